"""Thinking made for OpenAI Responses through Pydantic AI's own loop with scoutd's capability.

Each response holds the ``ThinkingPart``s Pydantic AI makes of a Responses
``reasoning`` item (provider ``openai``, the item's id): a reasoning model's
summaries, the first with the ``encrypted_content`` as its signature, or a
gpt-oss model's raw chain of thought, which it keeps in ``provider_details``
(``raw_content``); then a text and three parallel calls. Pydantic AI's own
Responses model maps the history the model is sent to Responses input items:
they must be valid (a kept call keeps its reasoning item, unmodified, before
it) and fit the window by a plain oracle (4 characters of item JSON per
token); the agent's own messages are not mutated. A run streamed
(``run_stream_events``, the thinking arriving in pieces) sends the same requests
as the run that is not.

Before, the raw chain of thought counted for nothing: the requests of a run of
gpt-oss turns went past the window.

In process, and through a real daemon.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

from pydantic_ai import Agent, AgentRunResultEvent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponseStreamEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingPart,
    DeltaToolCall,
    FunctionModel,
    FunctionStreamedResponse,
)
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from scoutd.integrations._pydantic_ai_messages import to_chat
from scoutd.integrations.pydantic_ai import ScoutdCapability
from tests.formats.validity import responses_problems, thinking_problems
from tests.integrations.test_pydantic_ai import close_the_loop_run_sync_left
from tests.integrations.test_thinking_pydantic_ai import Recorder

WINDOW = 8_000
TURNS = 12
CALLS = 3


def thinking(turn: int) -> list[ThinkingPart]:
    """The parts of turn ``turn``'s reasoning item: two summaries (even turns) or a raw
    chain of thought (odd turns, as a gpt-oss model's)."""
    ident = f"rs_{turn}"
    if turn % 2:
        raw = {"raw_content": [f"turn {turn} " + "ponder " * 1_000]}
        return [ThinkingPart(content="", id=ident, provider_name="openai", provider_details=raw)]
    first = f"turn {turn} " + "ponder " * 300
    return [
        ThinkingPart(content=first, id=ident, signature="e" * 2_000, provider_name="openai"),
        ThinkingPart(content="and so " * 100, id=ident, provider_name="openai"),
    ]


def answer(turn: int) -> ModelResponse:
    if turn > TURNS:
        return ModelResponse(parts=[TextPart(content="done")], provider_name="openai")
    parts: list[Any] = [*thinking(turn), TextPart(content=f"step {turn}")]
    parts += [
        ToolCallPart(
            tool_name="bash",
            args={"command": f"ls {turn}.{n}"},
            tool_call_id=f"c{turn}_{n}",
        )
        for n in range(CALLS)
    ]
    return ModelResponse(parts=parts, provider_name="openai")


@dataclass
class Piece(DeltaThinkingPart):
    """A piece of streamed thinking, with what a Responses stream gives its part."""

    id: str | None = None
    provider_details: dict[str, Any] | None = None


@dataclass
class ResponsesStream(FunctionStreamedResponse):
    """The function model's stream, its thinking pieces made into parts as Pydantic
    AI's Responses stream makes them (the item's id, provider ``openai``)."""

    def _map_thinking_delta(
        self, index: int, delta: DeltaThinkingPart
    ) -> Iterator[ModelResponseStreamEvent]:
        yield from self._parts_manager.handle_thinking_delta(
            vendor_part_id=index,
            content=delta.content,
            id=delta.id if isinstance(delta, Piece) else None,
            signature=delta.signature,
            provider_name="openai",
            provider_details=delta.provider_details if isinstance(delta, Piece) else None,
        )

    @property
    def provider_name(self) -> str:  # type: ignore[override]
        return "openai"


class ResponsesStreamModel(FunctionModel):
    """A function model whose streams are :class:`ResponsesStream`."""

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamedResponse]:
        async with super().request_stream(*args, **kwargs) as stream:
            assert isinstance(stream, FunctionStreamedResponse)
            yield ResponsesStream(
                model_request_parameters=stream.model_request_parameters,
                _model_name=stream.model_name,
                _iter=stream._iter,
            )


class Thinker:
    """Answers (or streams) each turn; records what it was sent and what it made."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.made: list[tuple[ModelResponse, Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        response = answer(len(self.seen))
        self.made.append((response, copy.deepcopy(response.parts)))
        return response

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        """The turn in pieces: each summary's text in three, then the text, then the calls."""
        self.seen.append(list(messages))
        parts = answer(len(self.seen)).parts
        for index, part in enumerate(parts):
            if isinstance(part, ThinkingPart):
                third = len(part.content) // 3 + 1
                texts = [part.content[k : k + third] for k in range(0, len(part.content), third)]
                for k, text in enumerate(texts or [""]):
                    first = k == 0
                    yield {
                        index: Piece(
                            content=text,
                            signature=part.signature if first else None,
                            id=part.id,
                            provider_details=part.provider_details if first else None,
                        )
                    }
            elif isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                name, ident = part.tool_name, part.tool_call_id
                yield {index: DeltaToolCall(name=name, tool_call_id=ident)}
                yield {index: DeltaToolCall(json_args=part.args_as_json_str())}


def responses_model() -> OpenAIResponsesModel:
    """Pydantic AI's Responses model, used only to map a history to what it sends."""
    return OpenAIResponsesModel("gpt-5", provider=OpenAIProvider(api_key="unused"))


def sent_items(messages: list[ModelMessage]) -> list[Any]:
    """The Responses input items Pydantic AI's Responses model sends for ``messages``."""
    mapping = responses_model()._map_messages(messages, {}, ModelRequestParameters())
    _, items = asyncio.run(mapping)
    plain: list[Any] = json.loads(json.dumps(items, default=str))
    for item in plain:  # an easy input message is a message item (the checkers look for it)
        if "role" in item:
            item.setdefault("type", "message")
    return plain


def billed(items: list[Any]) -> int:
    """The oracle: 4 characters of each item's JSON per token."""
    return sum(len(json.dumps(item)) for item in items) // 4


async def streamed(agent: Agent[None, str]) -> Any:
    """The run's output, streamed with ``run_stream_events`` to its end."""
    outputs = []
    async with agent.run_stream_events("look around") as events:
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                outputs.append(event.result.output)
    assert len(outputs) == 1
    return outputs[0]


def run(socket: str | None, stream: bool = False) -> tuple[Thinker, Recorder]:
    model = Thinker()
    capability = ScoutdCapability(socket=socket, config={"context_window": WINDOW})
    recorder = Recorder()
    function = ResponsesStreamModel(model, stream_function=model.stream)
    agent = Agent(function, capabilities=[recorder, capability], instructions="You are terse.")

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return f"{command}: " + "output line\n" * 60

    if stream:
        assert asyncio.run(streamed(agent)) == "done"
        return model, recorder
    try:
        result = agent.run_sync("look around")
    finally:
        close_the_loop_run_sync_left()  # collected unclosed, it would fail a later test
    assert result.output == "done"
    return model, recorder


@pytest.mark.parametrize("stream", [False, True], ids=["run_sync", "run_stream_events"])
def test_responses_thinking_is_counted_kept_and_not_mutated(
    socket: tuple[str | None, str], stream: bool
) -> None:
    model, recorder = run(socket[0], stream)
    assert len(model.seen) == len(recorder.full) == TURNS + 1
    kept_reasoning = raw_kept = edited = 0
    bills = []
    for k, (history, seen) in enumerate(zip(recorder.full, model.seen, strict=True)):
        given, sent = sent_items(history), sent_items(seen)
        bills.append(billed(sent))
        assert not responses_problems(sent), k
        assert not thinking_problems("openai-responses", given, sent), k
        reasoning = [item for item in sent if item.get("type") == "reasoning"]
        kept_reasoning += len(reasoning)
        raw_kept += sum(1 for item in reasoning if item.get("content"))
        edited += sum(  # responses scoutd changed (a call dropped): their thinking stays
            1
            for message in seen
            if isinstance(message, ModelResponse) and not any(message is m for m in history)
        )
    assert not [bill for bill in bills if bill > WINDOW], bills
    assert billed(sent_items(recorder.full[-1])) > 2 * WINDOW  # compacting was needed
    assert kept_reasoning >= TURNS and raw_kept >= TURNS // 2, (kept_reasoning, raw_kept)
    assert edited >= 3, edited  # the floor: edited responses were looked at
    for response, parts in model.made:
        assert response.parts == parts
    if stream:  # the requests of the same script's run that is not streamed
        whole, _ = run(socket[0])
        assert [sent_items(m) for m in model.seen] == [sent_items(m) for m in whole.seen]


def test_provider_details_count_whatever_they_hold() -> None:
    """The raw chain of thought counts as its text; details JSON cannot write (a key
    that is no text, a cycle) count as their text rather than raise."""
    raw = "ponder " * 1_000
    cyclic: dict[str, Any] = {"raw_content": [raw]}
    cyclic["self"] = cyclic
    cases: list[Any] = [{"raw_content": [raw]}, {(1, 2): raw}, cyclic]
    for details in cases:
        part = ThinkingPart(content="", id="rs_1", provider_name="openai", provider_details=details)
        response = ModelResponse(parts=[part, TextPart(content="step")])
        (item,) = to_chat([response]).chat
        assert len(json.dumps(item, default=str)) > len(raw), details
