"""Responses ``reasoning`` items through the OpenAI Agents SDK's streamed loop
(``Runner.run_streamed``) with scoutd's filter.

The scripted model streams each turn as a Responses stream ends, with a
``response.completed`` event whose response holds a ``reasoning`` item (two
summaries and ``encrypted_content``), a text and three parallel function calls.
The SDK sends the reasoning back, so every request must fit the window by a
plain oracle (4 characters of item JSON per token), keep each kept call's
reasoning item unmodified before it, leave the SDK's own items as they were,
be what a whole prepare of the same history gives, and be the request the
same script's ``Runner.run`` sends.

In process, and through a real daemon.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

import scoutd
from scoutd.integrations.openai_agents import ScoutdInputFilter
from tests.formats.validity import responses_problems, thinking_problems

pytestmark = pytest.mark.anyio

WINDOW = 8_000
TURNS = 12
CALLS = 3
CONFIG = {"context_window": WINDOW, "recall": True}


def command(turn: int, n: int) -> str:
    """A call's command: long, as a file written by the shell is (scoutd may shorten it)."""
    return f"cat > f{turn}.{n} <<EOF\n" + "line of the file\n" * 150 + "EOF"


def output(turn: int) -> list[Any]:
    """The output items of the answer to call ``turn`` (1-based)."""
    text = ResponseOutputText(type="output_text", text=f"step {turn}", annotations=[])
    said = ResponseOutputMessage(
        id=f"msg_{turn}", type="message", role="assistant", status="completed", content=[text]
    )
    if turn > TURNS:
        return [said]
    summaries = [
        Summary(type="summary_text", text=f"turn {turn} " + "ponder " * 300),
        Summary(type="summary_text", text="and so " * 100),
    ]
    items: list[Any] = [
        ResponseReasoningItem(
            id=f"rs_{turn}", type="reasoning", summary=summaries, encrypted_content="e" * 2_000
        ),
        said,
    ]
    items += [
        ResponseFunctionToolCall(
            type="function_call",
            id=f"fc_{turn}_{n}",
            call_id=f"c{turn}_{n}",
            name="bash",
            arguments=json.dumps({"command": command(turn, n)}),
            status="completed",
        )
        for n in range(CALLS)
    ]
    return items


class Thinker(Model):
    """Answers (or streams) reasoning, text and parallel calls; records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []
        self.streamed = 0

    def _answer(self, given: Any) -> list[Any]:
        assert isinstance(given, list)
        self.seen.append(copy.deepcopy(given))
        return output(len(self.seen))

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        return ModelResponse(output=self._answer(input), usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self.streamed += 1
        response = Response(
            id=f"resp_{len(self.seen) + 1}",
            created_at=0,
            model="scripted",
            object="response",
            output=self._answer(input),
            parallel_tool_calls=True,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )


@function_tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    return f"{command}: " + "output line\n" * 60


def billed(items: list[Any]) -> int:
    """The oracle: 4 characters of each item's JSON per token."""
    return sum(len(json.dumps(item, default=str)) for item in items) // 4


async def run(socket: str | None, streamed: bool) -> tuple[Thinker, list[Any], list[Any]]:
    """One run: the model, the histories the SDK held and a deep copy of each."""
    model = Thinker()
    scoutd_filter = ScoutdInputFilter(socket=socket, config={"context_window": WINDOW})
    agent = Agent(name="coder", instructions="You are terse.", model=model, tools=[bash])
    full: list[list[Any]] = []
    snapshots: list[list[Any]] = []

    async def recording(data: CallModelData[Any]) -> ModelInputData:
        full.append(list(data.model_data.input))
        snapshots.append(copy.deepcopy(full[-1]))
        return await scoutd_filter(data)

    config = RunConfig(call_model_input_filter=recording, tracing_disabled=True)
    try:
        if streamed:
            result: Any = Runner.run_streamed(agent, "look around", run_config=config, max_turns=50)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, "look around", run_config=config, max_turns=50)
    finally:
        scoutd_filter.close()
    assert result.final_output == f"step {TURNS + 1}"
    assert model.streamed == (TURNS + 1 if streamed else 0)
    return model, full, snapshots


async def test_streamed_reasoning_is_counted_kept_and_sent_as_unstreamed(
    socket: tuple[str | None, str],
) -> None:
    model, full, snapshots = await run(socket[0], streamed=True)
    assert len(model.seen) == len(full) == TURNS + 1
    bills = [billed(items) for items in model.seen]
    assert not [bill for bill in bills if bill > WINDOW], bills
    assert billed(full[-1]) > 2 * WINDOW  # the run needed compacting, often
    kept_reasoning = shortened = 0
    for k, (history, sent) in enumerate(zip(full, model.seen, strict=True)):
        assert history == snapshots[k], f"the SDK's items changed at call {k}"
        assert not thinking_problems("openai-responses", history, sent), k
        assert not responses_problems(sent), k
        whole = scoutd.prepare(snapshots[k], config=CONFIG, format="openai-responses")
        assert json.loads(json.dumps(whole.messages, default=str)) == json.loads(
            json.dumps(sent, default=str)
        ), f"call {k}: a round differs from a whole prepare"
        kept_reasoning += sum(1 for item in sent if item.get("type") == "reasoning")
        shortened += sum(  # calls scoutd changed, after their turn's reasoning
            1 for item in sent if item.get("type") == "function_call" and item not in history
        )
    assert kept_reasoning >= TURNS and shortened >= 3, (kept_reasoning, shortened)  # floors
    unstreamed, _, _ = await run(socket[0], streamed=False)
    assert json.loads(json.dumps(model.seen, default=str)) == json.loads(
        json.dumps(unstreamed.seen, default=str)
    )
