"""LangChain's own agent loop (``create_agent``) with scoutd's middleware (docs/INTEGRATIONS.md).

A scripted chat model replays a recorded real run (tests/integrations/replay.py)
and a real ``bash`` tool answers with the recorded outputs, so the agent graph
runs as it does with a provider, without network. Each scenario runs in process
and through a real daemon subprocess, with ``invoke`` (``wrap_model_call``) and
``ainvoke`` (``awrap_model_call``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from pydantic import ConfigDict, Field

import scoutd
from scoutd.integrations.langchain import ScoutdMiddleware
from tests.integrations.replay import (
    ABORT_REASON,
    CONFIG,
    NOTICE,
    Events,
    Replay,
    check_one_daemon_session,
    check_rounds,
    contains,
    load_replay,
)

NOTICE_AT = 8
ABORT_AT = 5


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next turn of the replay; records what it was sent."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    replay: Any
    events: Any
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-replay"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        turn = self.replay.turn(self.events.model_called())
        calls = [
            {"name": name, "args": json.loads(arguments), "id": call_id, "type": "tool_call"}
            for call_id, name, arguments in turn.calls
        ]
        message = AIMessage(content=turn.text, tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


class Recorder(AgentMiddleware):  # type: ignore[type-arg]
    """The outer middleware: keeps the messages the agent hands to the model call."""

    def __init__(self) -> None:
        super().__init__()
        self.full: list[list[BaseMessage]] = []

    def wrap_model_call(self, request: ModelRequest, handler: Callable[..., Any]) -> Any:  # type: ignore[type-arg]
        self.full.append(list(request.messages))
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[..., Awaitable[Any]],
    ) -> Any:
        self.full.append(list(request.messages))
        return await handler(request)


def bash_tool(replay: Replay) -> Any:
    @tool
    def bash(command: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Run a shell command and return its output."""
        return replay.outputs[tool_call_id]

    return bash


def chat(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as comparable OpenAI Chat dicts (LangChain's own converter)."""
    result = []
    for item in convert_to_openai_messages(messages):
        entry = {"role": item["role"], "content": item.get("content") or ""}
        if item.get("tool_calls"):
            entry["tool_calls"] = [
                (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in item["tool_calls"]
            ]
        if item.get("tool_call_id"):
            entry["tool_call_id"] = item["tool_call_id"]
        result.append(entry)
    return result


def reference(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """The prepared prompt of ``messages``, computed on the side in OpenAI Chat form."""
    plain = [
        {**m, "tool_calls": [_wire(c) for c in m["tool_calls"]]} if "tool_calls" in m else m
        for m in chat(messages)
    ]
    prepared = scoutd.prepare(plain, config=CONFIG, format="openai-chat").messages
    return [
        {**m, "tool_calls": [_plain(c) for c in m["tool_calls"]]} if "tool_calls" in m else m
        for m in prepared
    ]


def _wire(call: tuple[str, str, Any]) -> dict[str, Any]:
    return {
        "id": call[0],
        "type": "function",
        "function": {"name": call[1], "arguments": json.dumps(call[2])},
    }


def _plain(call: dict[str, Any]) -> tuple[str, str, Any]:
    return (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"]))


def run_replay(
    middleware: ScoutdMiddleware, replay: Replay, events: Events, use_async: bool
) -> tuple[Any, ScriptedChatModel, Recorder]:
    """Run the agent graph; return its final state (or the exception), the model, the recorder."""
    model = ScriptedChatModel(replay=replay, events=events)
    recorder = Recorder()
    agent = create_agent(
        model,
        [bash_tool(replay)],
        system_prompt=replay.system,
        middleware=[recorder, middleware],
    )
    payload = {"messages": [{"role": "user", "content": replay.task}]}
    config = {"recursion_limit": 1000}
    try:
        if use_async:
            import anyio

            async def main() -> Any:
                return await agent.ainvoke(payload, config)  # type: ignore[arg-type]

            result: Any = anyio.run(main)
        else:
            result = agent.invoke(payload, config)  # type: ignore[arg-type]
    except Exception as exc:
        result = exc
    return result, model, recorder


def seen_without_system(model: ScriptedChatModel, replay: Replay) -> list[list[BaseMessage]]:
    """What the model saw after the system message (which must be the agent's own)."""
    for messages in model.seen:
        assert isinstance(messages[0], SystemMessage)
        assert messages[0].content == replay.system
    return [messages[1:] for messages in model.seen]


def test_whole_run_sees_prepared_prompts(socket: tuple[str | None, str]) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, notice_at=NOTICE_AT)
    middleware = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, recorder = run_replay(middleware, replay, events, socket_path is not None)
    assert not isinstance(result, BaseException), result
    assert len(model.seen) == len(replay.turns) == len(recorder.full)
    seen = seen_without_system(model, replay)
    full = [chat(messages) for messages in recorder.full]
    expected = [reference(messages) for messages in recorder.full]
    check_rounds(full, [chat(messages) for messages in seen], expected, NOTICE_AT)
    # Messages scoutd left alone reach the model as the agent's own objects.
    last_ids = {id(m) for m in recorder.full[-1]}
    assert sum(id(m) in last_ids for m in seen[-1]) >= len(seen[-1]) // 2
    # The agent's state holds every recorded output, whole, and no notice.
    state = result["messages"]
    outputs = [m.content for m in state if isinstance(m, ToolMessage)]
    assert outputs == [replay.outputs[c[0]] for t in replay.turns for c in t.calls]
    assert state[-1].content == replay.final
    assert not contains(chat(state), NOTICE) and not contains(chat(state), "[Context compaction]")
    assert middleware.preparer.aborted is None
    check_one_daemon_session(socket_path, directory)


def test_abort_stops_the_run_before_the_next_model_call(socket: tuple[str | None, str]) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, abort_at=ABORT_AT)
    middleware = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, recorder = run_replay(middleware, replay, events, socket_path is None)
    assert isinstance(result, scoutd.Aborted), result
    assert result.reason == ABORT_REASON
    # The model answered calls 0..ABORT_AT; the next call never reached it.
    assert len(model.seen) == ABORT_AT + 1
    assert len(recorder.full) == ABORT_AT + 2
    assert middleware.preparer.aborted == ABORT_REASON
    middleware.preparer.close()
