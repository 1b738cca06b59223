"""Responses ``reasoning`` items through the OpenAI Agents SDK's own loop with scoutd's filter.

A scripted model answers each call with a ``reasoning`` item (a summary and
``encrypted_content``, as a model answers when the run keeps its reasoning),
a text and three parallel function calls. The SDK sends the reasoning back, so
every request must fit the window by a plain oracle (4 characters of item JSON
per token), keep each kept call's reasoning item (the API rejects a call
without it), leave the SDK's own items as they were, and be what a whole
prepare of the same history gives.

In process, and through a real daemon.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.usage import Usage
from openai.types.responses import (
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


class ThinkingModel(Model):
    """Answers with reasoning, text and parallel calls; records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        given = kwargs.get("input", args[1] if len(args) > 1 else None)
        assert isinstance(given, list)
        self.seen.append(copy.deepcopy(given))
        turn = len(self.seen)
        text = ResponseOutputText(type="output_text", text=f"step {turn}", annotations=[])
        said = ResponseOutputMessage(
            id=f"msg_{turn}", type="message", role="assistant", status="completed", content=[text]
        )
        if turn > TURNS:
            return ModelResponse(output=[said], usage=Usage(), response_id=None)
        summary = Summary(type="summary_text", text=f"turn {turn} " + "ponder " * 400)
        output: list[Any] = [
            ResponseReasoningItem(
                id=f"rs_{turn}",
                type="reasoning",
                summary=[summary],
                encrypted_content="e" * 3_000,
            ),
            said,
        ]
        output += [
            ResponseFunctionToolCall(
                type="function_call",
                call_id=f"c{turn}_{n}",
                name="bash",
                arguments=json.dumps({"command": f"ls {turn}.{n}"}),
            )
            for n in range(CALLS)
        ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the test runs Runner.run")


@function_tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    return f"{command}: " + "output line\n" * 60


def billed(items: list[Any]) -> int:
    """The oracle: 4 characters of each item's JSON per token."""
    return sum(len(json.dumps(item, default=str)) for item in items) // 4


async def test_reasoning_is_counted_kept_and_the_sdk_items_untouched(
    socket: tuple[str | None, str],
) -> None:
    model = ThinkingModel()
    scoutd_filter = ScoutdInputFilter(socket=socket[0], config={"context_window": WINDOW})
    agent = Agent(name="coder", instructions="You are terse.", model=model, tools=[bash])
    full: list[list[Any]] = []
    snapshots: list[list[Any]] = []

    async def recording(data: CallModelData[Any]) -> ModelInputData:
        full.append(list(data.model_data.input))
        snapshots.append(copy.deepcopy(full[-1]))
        return await scoutd_filter(data)

    config = RunConfig(call_model_input_filter=recording, tracing_disabled=True)
    result = await Runner.run(agent, "look around", run_config=config, max_turns=50)
    scoutd_filter.close()
    assert result.final_output == f"step {TURNS + 1}"
    assert len(model.seen) == len(full) == TURNS + 1
    bills = [billed(items) for items in model.seen]
    assert not [bill for bill in bills if bill > WINDOW], bills
    assert billed(full[-1]) > 2 * WINDOW  # the run needed compacting, often
    kept_reasoning = 0
    for k, (history, sent) in enumerate(zip(full, model.seen, strict=True)):
        assert history == snapshots[k], f"the SDK's items changed at call {k}"
        assert not thinking_problems("openai-responses", history, sent), k
        assert not responses_problems(sent), k
        whole = scoutd.prepare(snapshots[k], config=CONFIG, format="openai-responses")
        assert json.loads(json.dumps(whole.messages, default=str)) == json.loads(
            json.dumps(sent, default=str)
        ), f"call {k}: a round differs from a whole prepare"
        kept_reasoning += sum(1 for item in sent if item.get("type") == "reasoning")
    assert kept_reasoning >= TURNS  # the floor: kept reasoning items were looked at
