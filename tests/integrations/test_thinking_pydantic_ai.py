"""An agent's thinking through Pydantic AI's own loop with scoutd's capability.

A ``FunctionModel`` answers each request with a ``ThinkingPart`` (with its
signature, as an Anthropic model's response holds it), a text and three
parallel tool calls. Pydantic AI sends the thinking back to the provider, so
it must be counted: every request the model gets fits the window by a plain
oracle (4 characters of parts JSON per token), a kept response keeps its
thinking first and unchanged, and the agent's own messages are not mutated.

Before, the capability's view held a response's text and calls only: the
thinking counted for nothing and the requests went far past the window.

In process, and through a real daemon.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel

import scoutd
from scoutd.integrations._pydantic_ai_messages import ORIGIN, from_chat, to_chat
from scoutd.integrations.pydantic_ai import ScoutdCapability
from tests.integrations.test_pydantic_ai import close_the_loop_run_sync_left

WINDOW = 8_000
TURNS = 12
CALLS = 3


def thinking(turn: int) -> ThinkingPart:
    return ThinkingPart(
        content=f"turn {turn} " + "ponder " * 900, signature=f"s{turn}", provider_name="anthropic"
    )


class ThinkingModel:
    """Answers with a turn of thinking, text and parallel calls; records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.made: list[tuple[ModelResponse, Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        turn = len(self.seen)
        if turn > TURNS:
            return ModelResponse(parts=[TextPart(content="done")])
        parts: list[Any] = [thinking(turn), TextPart(content=f"step {turn}")]
        parts += [
            ToolCallPart(
                tool_name="bash", args={"command": f"ls {turn}.{n}"}, tool_call_id=f"c{turn}_{n}"
            )
            for n in range(CALLS)
        ]
        response = ModelResponse(parts=parts)
        self.made.append((response, copy.deepcopy(response.parts)))
        return response


class Recorder(AbstractCapability[Any]):
    """Listed before scoutd's: keeps the run's history as each request starts."""

    def __init__(self) -> None:
        self.full: list[list[ModelMessage]] = []

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.full.append(list(request_context.messages))
        return request_context


def plain(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key != ORIGIN}


def view(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The chat view of ``messages``, without the slots it tags them with."""
    return [plain(item) for item in to_chat(messages).chat]


def billed(messages: list[ModelMessage]) -> int:
    """The oracle: 4 characters of each message's parts JSON per token (timestamps aside)."""
    chars = 0
    for message in messages:
        for part in message.parts:
            fields = {k: v for k, v in asdict(part).items() if k != "timestamp"}
            chars += len(json.dumps(fields, default=str))
    return chars // 4


def test_thinking_is_counted_kept_and_not_mutated(socket: tuple[str | None, str]) -> None:
    model = ThinkingModel()
    capability = ScoutdCapability(socket=socket[0], config={"context_window": WINDOW})
    recorder = Recorder()
    agent = Agent(
        FunctionModel(model), capabilities=[recorder, capability], instructions="You are terse."
    )

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return f"{command}: " + "output line\n" * 60

    try:
        result = agent.run_sync("look around")
    finally:
        close_the_loop_run_sync_left()  # collected unclosed, it would fail a later test
    assert result.output == "done"
    assert len(model.seen) == TURNS + 1
    bills = [billed(messages) for messages in model.seen]
    assert not [bill for bill in bills if bill > WINDOW], bills
    assert max(bills) > WINDOW // 2  # the window was used, then compacted
    kept_turns = 0
    for messages in model.seen:
        for message in messages:
            if isinstance(message, ModelResponse) and message.tool_calls:
                kept_turns += 1
                first = message.parts[0]
                assert isinstance(first, ThinkingPart)
                assert first == thinking(int(first.content.split()[1]))
    assert kept_turns >= TURNS  # the floor: kept turns of calls were looked at
    config = {"context_window": WINDOW, "recall": True}
    for k, history in enumerate(recorder.full):  # each round is what a whole prepare gives
        sent = to_chat(history)
        whole = scoutd.prepare(sent.chat, config=config, format="openai-chat").messages
        back = from_chat(whole, sent, history)  # the model gets them with requests merged
        assert view(back) == view(model.seen[k]) == [plain(m) for m in whole], k
    for response, parts in model.made:
        assert response.parts == parts
