"""Pydantic AI's own agent loop with scoutd's capability (docs/INTEGRATIONS.md).

Pydantic AI's ``FunctionModel`` replays a recorded real run
(tests/integrations/replay.py) and a real ``bash`` tool answers with the
recorded outputs, so the agent graph runs as it does with a provider, without
network. Each scenario runs in process and through a real daemon subprocess,
with ``run_sync``, ``run`` and, streamed, ``run_stream`` and ``run_stream_events``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

import anyio
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import RetryModelRequest
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.run import AgentRunResultEvent
from pydantic_ai.usage import UsageLimits

import scoutd
from scoutd.inbox.aborted import clear
from scoutd.integrations.pydantic_ai import ScoutdCapability
from tests.integrations.replay import (
    ABORT_REASON,
    CONFIG,
    NOTICE,
    Events,
    Replay,
    Turn,
    check_one_daemon_session,
    check_rounds,
    contains,
    load_replay,
)

NOTICE_AT = 8
ABORT_AT = 5
# The turns of a run_stream replay stream no text (Scripted.stream): a smaller
# window than CONFIG's keeps compaction as frequent on those shorter prompts.
STREAM_CONFIG = {"context_window": 14_000}
LIMITS = UsageLimits(request_limit=200)  # the replay makes 53 requests


def chat(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """Pydantic AI messages as comparable OpenAI Chat dicts, one per part, calls parsed."""
    result: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            entry: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(p.content for p in message.parts if isinstance(p, TextPart)),
            }
            calls = [
                (p.tool_call_id, p.tool_name, p.args_as_dict())
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            if calls:
                entry["tool_calls"] = calls
            result.append(entry)
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                result.append({"role": "system", "content": part.content})
            elif isinstance(part, UserPromptPart):
                result.append({"role": "user", "content": part.content})
            elif isinstance(part, ToolReturnPart):
                text = part.content
                result.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": text})
    return result


def tool_returns(messages: Sequence[ModelMessage]) -> dict[str, Any]:
    """The content of each tool return in ``messages``, by call id (the latest wins)."""
    return {
        part.tool_call_id: part.content
        for message in messages
        if not isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def reference(
    history: list[dict[str, Any]], config: dict[str, Any] = CONFIG
) -> list[dict[str, Any]]:
    """The prepared prompt of ``history`` (as :func:`chat` gives it), computed on the side
    with ``config`` and recall on, as the capability has it by default."""
    wire = [
        {**m, "tool_calls": [_wire(c) for c in m["tool_calls"]]} if "tool_calls" in m else m
        for m in history
    ]
    overrides = {**config, "recall": True}
    prepared = scoutd.prepare(wire, config=overrides, format="openai-chat").messages
    return [
        {**m, "tool_calls": [_plain(c) for c in m["tool_calls"]]} if "tool_calls" in m else m
        for m in prepared
    ]


def _wire(call: tuple[str, str, Any]) -> dict[str, Any]:
    return {
        "id": call[0],
        "type": "function",
        "function": {"name": call[1], "arguments": json.dumps(call[2], separators=(",", ":"))},
    }


def _plain(call: dict[str, Any]) -> tuple[str, str, Any]:
    return (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"]))


class Recorder(AbstractCapability[Any]):
    """Listed before scoutd's: keeps the run's history as each request starts (as chat dicts)."""

    def __init__(self) -> None:
        self.full: list[list[dict[str, Any]]] = []

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.full.append(chat(ctx.messages))
        return request_context


class Scripted:
    """The ``FunctionModel`` functions: the replay's next turn; records what the model got."""

    def __init__(self, replay: Replay, events: Events, texts: bool = True) -> None:
        self.replay = replay
        self.events = events
        self.texts = texts
        self.seen: list[list[dict[str, Any]]] = []
        self.tools: set[str] = set()  # the names of the tools the model was offered

    def _turn(self, messages: list[ModelMessage], info: AgentInfo) -> Turn:
        self.tools.update(tool.name for tool in info.function_tools)
        self.seen.append(chat(messages))
        return self.replay.turn(self.events.model_called())

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = self._turn(messages, info)
        parts: list[Any] = [TextPart(turn.text)] if turn.text else []
        parts += [
            ToolCallPart(name, arguments, tool_call_id=i) for i, name, arguments in turn.calls
        ]
        return ModelResponse(parts=parts)

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        """The turn streamed in small pieces: its calls, then its text.

        ``run_stream`` takes the first text it streams for the run's output and
        runs no tool after it: a model scripted for it (``texts=False``) streams
        the text of the final turn only."""
        turn = self._turn(messages, info)
        for index, (call_id, name, arguments) in enumerate(turn.calls):
            yield {index: DeltaToolCall(name=name, tool_call_id=call_id)}
            yield {index: DeltaToolCall(json_args=arguments)}
        if self.texts or not turn.calls:
            for start in range(0, len(turn.text), 7):
                yield turn.text[start : start + 7]


@dataclass
class Finished:
    """What a run gave, whichever way it ran: its output and its whole history."""

    output: Any
    messages: list[ModelMessage]


# How a test runs the agent: Pydantic AI's four ways, two of them streamed.
MODES = ["run_sync", "run", "run_stream", "run_stream_events"]


async def run_streamed(agent: Agent[None, str], task: str, mode: str) -> Finished:
    """Run ``agent`` with ``run_stream`` or ``run_stream_events``, to its end."""
    if mode == "run_stream":
        async with agent.run_stream(task, usage_limits=LIMITS) as stream:
            output = await stream.get_output()
        return Finished(output, stream.all_messages())
    finished: list[Finished] = []
    async with agent.run_stream_events(task, usage_limits=LIMITS) as events:
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                finished.append(Finished(event.result.output, event.result.all_messages()))
    assert len(finished) == 1
    return finished[0]


def run_replay(
    capability: ScoutdCapability,
    replay: Replay,
    events: Events,
    mode: str,
    outer: Sequence[AbstractCapability[Any]] = (),
) -> tuple[Finished | Exception, Scripted, Recorder]:
    """Run the agent (``outer`` capabilities listed before scoutd's); return how it
    finished (or the exception), the model, the recorder."""
    model = Scripted(replay, events, texts=mode != "run_stream")
    recorder = Recorder()
    agent = Agent(
        FunctionModel(model, stream_function=model.stream),
        system_prompt=replay.system,
        capabilities=[recorder, *outer, capability],
    )

    @agent.tool
    def bash(ctx: RunContext[None], command: str) -> str:
        """Run a shell command and return its output."""
        assert ctx.tool_call_id is not None
        return replay.outputs[ctx.tool_call_id]

    async def main() -> Finished:
        if mode == "run":
            result = await agent.run(replay.task, usage_limits=LIMITS)
            return Finished(result.output, result.all_messages())
        return await run_streamed(agent, replay.task, mode)

    result: Finished | Exception
    try:
        if mode == "run_sync":
            try:
                ran = agent.run_sync(replay.task, usage_limits=LIMITS)
            finally:
                close_the_loop_run_sync_left()
            result = Finished(ran.output, ran.all_messages())
        else:
            result = anyio.run(main)
    except Exception as exc:
        result = exc
    return result, model, recorder


def close_the_loop_run_sync_left() -> None:
    """``run_sync`` leaves its event loop as the thread's current one: close it, as a
    script's exit would (an unclosed loop is a ResourceWarning, an error here)."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    asyncio.set_event_loop(None)
    loop.close()


@pytest.mark.parametrize("mode", MODES)
def test_whole_run_sees_prepared_prompts(socket: tuple[str | None, str], mode: str) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, notice_at=NOTICE_AT)
    config = STREAM_CONFIG if mode == "run_stream" else CONFIG
    capability = ScoutdCapability(save_file=save_file, socket=socket_path, config=config)
    result, model, recorder = run_replay(capability, replay, events, mode)
    assert not isinstance(result, BaseException), result
    assert result.output == replay.final
    full = recorder.full
    assert len(model.seen) == len(replay.turns) == len(full)
    check_rounds(full, model.seen, [reference(h, config) for h in full], NOTICE_AT)
    # The run's own history holds every recorded output, whole, and no notice;
    # what each request started from is still there as it was.
    history = chat(result.messages)
    assert history[: len(full[-1])] == full[-1]
    outputs = [m["content"] for m in history if m["role"] == "tool"]
    assert outputs == [replay.outputs[c[0]] for t in replay.turns for c in t.calls]
    assert not contains(history, NOTICE) and not contains(history, "[Context compaction]")
    assert model.tools == {"bash", "recall"}
    check_one_daemon_session(socket_path, directory)


def test_recall_false_offers_no_tool_and_no_handles(tmp_path: Path) -> None:
    replay = load_replay()
    save_file = str(tmp_path / "run.chat")
    capability = ScoutdCapability(save_file=save_file, config=CONFIG, recall=False)
    result, model, _ = run_replay(capability, replay, Events(save_file), "run")
    assert not isinstance(result, BaseException), result
    assert model.tools == {"bash"}
    assert contains(model.seen[-1], "[Context compaction]")
    assert contains(model.seen[-1], "Truncated (") and not contains(model.seen, "recall #")


@pytest.mark.parametrize("mode", MODES)
def test_abort_stops_the_run_before_the_next_model_request(
    socket: tuple[str | None, str], mode: str
) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, abort_at=ABORT_AT)
    capability = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, recorder = run_replay(capability, replay, events, mode)
    assert isinstance(result, scoutd.Aborted), repr(result)
    assert result.reason == ABORT_REASON
    # The model answered requests 0..ABORT_AT; the next one never reached it.
    assert len(model.seen) == ABORT_AT + 1
    assert len(recorder.full) == ABORT_AT + 2
    check_one_daemon_session(socket_path, directory)


class RetryOnce(AbstractCapability[Any]):
    """Rejects the model's answer at one request step once: the step makes a second attempt."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.steps = 0

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        if request_context.attempt == 1:
            self.steps += 1
            if self.steps == self.step + 1:
                raise RetryModelRequest()
        return response


@pytest.mark.parametrize("mode", ["run_sync", "run"])
def test_abort_stops_a_further_attempt_of_the_same_step(
    socket: tuple[str | None, str], mode: str
) -> None:
    """The abort lands while the model answers; that answer is rejected and the step tries
    again: the second attempt never reaches the model."""
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, abort_at=ABORT_AT)
    capability = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    outer = [RetryOnce(ABORT_AT)]
    result, model, recorder = run_replay(capability, replay, events, mode, outer)
    assert isinstance(result, scoutd.Aborted), repr(result)
    assert result.reason == ABORT_REASON
    assert len(model.seen) == ABORT_AT + 1 == len(recorder.full)


def test_an_aborted_chat_stays_aborted_at_the_next_run(socket: tuple[str | None, str]) -> None:
    """The abort file went with the first run; the chat stays aborted until it is cleared."""
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    capability = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    events = Events(save_file, abort_at=ABORT_AT)
    result, model, _ = run_replay(capability, replay, events, "run_sync")
    assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
    for mode in ("run_sync", "run"):  # the same capability, then a new one, at the next run
        for hook in (capability, ScoutdCapability(save_file=save_file, socket=socket_path)):
            result, model, recorder = run_replay(hook, replay, Events(save_file), mode)
            assert isinstance(result, scoutd.Aborted), repr(result)
            assert result.reason == ABORT_REASON
            assert model.seen == [] and len(recorder.full) == 1
    clear(save_file)  # the operator lifts it: a new capability's run goes to its end
    cleared = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, _ = run_replay(cleared, replay, Events(save_file), "run")
    assert not isinstance(result, BaseException), result
    assert result.output == replay.final
    # The capability that saw the abort stays aborted for its whole life.
    result, model, _ = run_replay(capability, replay, Events(save_file), "run_sync")
    assert isinstance(result, scoutd.Aborted) and model.seen == []
