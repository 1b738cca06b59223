"""Pydantic AI's own agent loop with scoutd's capability (docs/INTEGRATIONS.md).

Pydantic AI's ``FunctionModel`` replays a recorded real run
(tests/integrations/replay.py) and a real ``bash`` tool answers with the
recorded outputs, so the agent graph runs as it does with a provider, without
network. Each scenario runs in process and through a real daemon subprocess,
with ``run_sync`` and ``run``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

import anyio
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
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
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

import scoutd
from scoutd.inbox.aborted import clear
from scoutd.integrations.pydantic_ai import ScoutdCapability
from tests.integrations.replay import (
    ABORT_REASON,
    CONFIG,
    NOTICE,
    RECALL_CONFIG,
    Events,
    Replay,
    check_one_daemon_session,
    check_rounds,
    contains,
    load_replay,
)

NOTICE_AT = 8
ABORT_AT = 5
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


def reference(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prepared prompt of ``history`` (as :func:`chat` gives it), computed on the side."""
    wire = [
        {**m, "tool_calls": [_wire(c) for c in m["tool_calls"]]} if "tool_calls" in m else m
        for m in history
    ]
    prepared = scoutd.prepare(wire, config=RECALL_CONFIG, format="openai-chat").messages
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
    """The ``FunctionModel`` function: the replay's next turn; records what the model got."""

    def __init__(self, replay: Replay, events: Events) -> None:
        self.replay = replay
        self.events = events
        self.seen: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(chat(messages))
        turn = self.replay.turn(self.events.model_called())
        parts: list[Any] = [TextPart(turn.text)] if turn.text else []
        parts += [
            ToolCallPart(name, arguments, tool_call_id=i) for i, name, arguments in turn.calls
        ]
        return ModelResponse(parts=parts)


def run_replay(
    capability: ScoutdCapability, replay: Replay, events: Events, use_async: bool
) -> tuple[Any, Scripted, Recorder]:
    """Run the agent; return its result (or the exception), the model function, the recorder."""
    model = Scripted(replay, events)
    recorder = Recorder()
    agent = Agent(
        FunctionModel(model),
        system_prompt=replay.system,
        capabilities=[recorder, capability],
    )

    @agent.tool
    def bash(ctx: RunContext[None], command: str) -> str:
        """Run a shell command and return its output."""
        assert ctx.tool_call_id is not None
        return replay.outputs[ctx.tool_call_id]

    try:
        if use_async:

            async def main() -> Any:
                return await agent.run(replay.task, usage_limits=LIMITS)

            result: Any = anyio.run(main)
        else:
            try:
                result = agent.run_sync(replay.task, usage_limits=LIMITS)
            finally:
                close_the_loop_run_sync_left()
    except Exception as exc:
        result = exc
    return result, model, recorder


def close_the_loop_run_sync_left() -> None:
    """``run_sync`` leaves its event loop as the thread's current one: close it, as a
    script's exit would (an unclosed loop is a ResourceWarning, an error here)."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    asyncio.set_event_loop(None)
    loop.close()


@pytest.mark.parametrize("use_async", [False, True], ids=["run_sync", "run"])
def test_whole_run_sees_prepared_prompts(socket: tuple[str | None, str], use_async: bool) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, notice_at=NOTICE_AT)
    capability = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, recorder = run_replay(capability, replay, events, use_async)
    assert not isinstance(result, BaseException), result
    assert result.output == replay.final
    full = recorder.full
    assert len(model.seen) == len(replay.turns) == len(full)
    check_rounds(full, model.seen, [reference(h) for h in full], NOTICE_AT)
    # The run's own history holds every recorded output, whole, and no notice;
    # what each request started from is still there as it was.
    history = chat(result.all_messages())
    assert history[: len(full[-1])] == full[-1]
    outputs = [m["content"] for m in history if m["role"] == "tool"]
    assert outputs == [replay.outputs[c[0]] for t in replay.turns for c in t.calls]
    assert not contains(history, NOTICE) and not contains(history, "[Context compaction]")
    check_one_daemon_session(socket_path, directory)


@pytest.mark.parametrize("use_async", [False, True], ids=["run_sync", "run"])
def test_abort_stops_the_run_before_the_next_model_request(
    socket: tuple[str | None, str], use_async: bool
) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, abort_at=ABORT_AT)
    capability = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, recorder = run_replay(capability, replay, events, use_async)
    assert isinstance(result, scoutd.Aborted), repr(result)
    assert result.reason == ABORT_REASON
    # The model answered requests 0..ABORT_AT; the next one never reached it.
    assert len(model.seen) == ABORT_AT + 1
    assert len(recorder.full) == ABORT_AT + 2
    check_one_daemon_session(socket_path, directory)


def test_an_aborted_chat_stays_aborted_at_the_next_run(socket: tuple[str | None, str]) -> None:
    """The abort file went with the first run; the chat stays aborted until it is cleared."""
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    capability = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, _ = run_replay(capability, replay, Events(save_file, abort_at=ABORT_AT), False)
    assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
    for use_async in (False, True):  # the same capability, then a new one, at the next run
        for hook in (capability, ScoutdCapability(save_file=save_file, socket=socket_path)):
            result, model, recorder = run_replay(hook, replay, Events(save_file), use_async)
            assert isinstance(result, scoutd.Aborted), repr(result)
            assert result.reason == ABORT_REASON
            assert model.seen == [] and len(recorder.full) == 1
    clear(save_file)  # the operator lifts it: a new capability's run goes to its end
    cleared = ScoutdCapability(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, _ = run_replay(cleared, replay, Events(save_file), True)
    assert not isinstance(result, BaseException), result
    assert result.output == replay.final
    # The capability that saw the abort stays aborted for its whole life.
    result, model, _ = run_replay(capability, replay, Events(save_file), False)
    assert isinstance(result, scoutd.Aborted) and model.seen == []
