"""LangChain's own agent loop (``create_agent``) with scoutd's middleware (docs/INTEGRATIONS.md).

A scripted chat model replays a recorded real run (tests/integrations/replay.py)
and a real ``bash`` tool answers with the recorded outputs, so the agent graph
runs as it does with a provider, without network. Each scenario runs in process
and through a real daemon subprocess, with ``invoke`` (``wrap_model_call``) and
``ainvoke`` (``awrap_model_call``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelRetryMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from pydantic import Field

import scoutd
from scoutd.inbox import write_abort
from scoutd.inbox.aborted import clear
from scoutd.integrations.langchain import ModelCallAborted, ScoutdMiddleware
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
from tests.integrations.scripted_chat import ScriptedChat

NOTICE_AT = 8
ABORT_AT = 5


class ScriptedChatModel(ScriptedChat):
    """Answers each call with the next turn of the replay; records what it was sent."""

    replay: Any
    events: Any

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.record(messages)
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
    prepared = scoutd.prepare(plain, config=RECALL_CONFIG, format="openai-chat").messages
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
    middleware: ScoutdMiddleware,
    replay: Replay,
    events: Events,
    use_async: bool,
    between: Sequence[AgentMiddleware] = (),  # type: ignore[type-arg]
    inside: Sequence[AgentMiddleware] = (),  # type: ignore[type-arg]
    model: ScriptedChatModel | None = None,
) -> tuple[Any, ScriptedChatModel, Recorder]:
    """Run the agent graph; return its final state (or the exception), the model, the recorder.

    ``between``: middleware placed after the recorder and before scoutd's, so
    that its model-call wrappers run around scoutd's; ``inside``: placed after
    scoutd's, so that they run inside it. ``model``: another scripted model
    than the replay's plain one.
    """
    if model is None:
        model = ScriptedChatModel(replay=replay, events=events)
    recorder = Recorder()
    agent = create_agent(
        model,
        [bash_tool(replay)],
        system_prompt=replay.system,
        middleware=[recorder, *between, middleware, *inside],
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
    try:
        result, model, recorder = run_replay(middleware, replay, events, socket_path is None)
        assert isinstance(result, scoutd.Aborted), result
        assert result.reason == ABORT_REASON
        # The model answered calls 0..ABORT_AT; the next call never reached it, nor
        # any model-call wrapper: before_model raises the abort, ahead of them, as
        # soon as the abort or its marker is there, pushed or not. Only while the
        # daemon is between consuming the abort and writing the marker does the
        # call go on to its prepare, which the daemon then refuses: the outer
        # wrapper (the recorder) saw that call, the model did not.
        assert len(model.seen) == ABORT_AT + 1
        in_claim = 1 if socket_path is not None else 0
        assert ABORT_AT + 1 <= len(recorder.full) <= ABORT_AT + 1 + in_claim
        assert middleware.preparer.aborted == ABORT_REASON
    finally:
        middleware.preparer.close()


def test_an_aborted_chat_stays_aborted_at_the_next_invoke(socket: tuple[str | None, str]) -> None:
    """The abort file went with the first run; the chat stays aborted until an operator clears it.

    The middleware used to build a fresh preparer at the next ``invoke``, which
    found no abort file, and the run went on.
    """
    socket_path, directory = socket
    use_async = socket_path is not None
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=CONFIG)
    events = Events(save_file, abort_at=ABORT_AT)
    result, model, _ = run_replay(middleware, replay, events, use_async)
    assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
    assert len(model.seen) == ABORT_AT + 1
    # The same middleware, and a new one as a restarted agent makes: no model call at all.
    restarted = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=CONFIG)
    for hook in (middleware, middleware, restarted):
        result, model, recorder = run_replay(hook, replay, Events(save_file), use_async)
        assert isinstance(result, scoutd.Aborted), result
        assert result.reason == ABORT_REASON
        assert model.seen == [] and recorder.full == []
    middleware.preparer.close()
    restarted.preparer.close()
    clear(save_file)  # the operator lifts it: a new run goes to its end
    cleared = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=CONFIG)
    result, model, _ = run_replay(cleared, replay, Events(save_file), use_async)
    assert not isinstance(result, BaseException), result
    assert len(model.seen) == len(replay.turns)


class AbortDropper(AgentMiddleware):  # type: ignore[type-arg]
    """Drops an ``abort`` inside the model-call chain, after scoutd's ``before_model`` ran.

    It sits between a retry middleware and scoutd's, at model call ``at``: the
    abort arrives in the instant between the check before the call and the
    prepare inside it.
    """

    def __init__(self, save_file: str, at: int) -> None:
        super().__init__()
        self.save_file = save_file
        self.at = at
        self.calls = 0

    def _drop(self) -> None:
        if self.calls == self.at:
            write_abort(self.save_file, ABORT_REASON)
        self.calls += 1

    def wrap_model_call(self, request: ModelRequest, handler: Callable[..., Any]) -> Any:  # type: ignore[type-arg]
        self._drop()
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[..., Awaitable[Any]],
    ) -> Any:
        self._drop()
        return await handler(request)


def retrying(retry_on: str) -> ModelRetryMiddleware:  # type: ignore[type-arg]
    """A retry middleware that answers with a message once its retries are spent."""
    if retry_on == "default":
        return ModelRetryMiddleware(on_failure="continue", initial_delay=0, jitter=False)
    return ModelRetryMiddleware(
        on_failure="continue", initial_delay=0, jitter=False, retry_on=(Exception,)
    )


@pytest.mark.parametrize("retry_on", ["default", "everything"])
def test_a_retry_middleware_never_turns_an_abort_into_an_answer(
    socket: tuple[str | None, str], retry_on: str
) -> None:
    """scoutd's middleware placed inside ``ModelRetryMiddleware(on_failure="continue")``.

    The abort dropped during a model call is raised by ``before_model``,
    outside every model-call wrapper: the run ends with ``Aborted``, not with
    the retry's "Model call failed" message as its final answer.
    """
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=CONFIG)
    events = Events(save_file, abort_at=ABORT_AT)
    result, model, _ = run_replay(
        middleware, replay, events, socket_path is None, between=[retrying(retry_on)]
    )
    assert isinstance(result, scoutd.Aborted), result
    assert result.reason == ABORT_REASON
    assert len(model.seen) == ABORT_AT + 1
    middleware.preparer.close()


@pytest.mark.parametrize("retry_on", ["default", "everything"])
def test_an_abort_met_inside_the_model_call_still_ends_the_run(
    socket: tuple[str | None, str], retry_on: str
) -> None:
    """The abort appears after ``before_model``: the prepare inside the retried call meets it.

    With the default ``retry_on`` the non-retryable ``ModelCallAborted`` goes
    straight through; a retry middleware that retries everything swallows it
    into a message, and ``after_model`` raises it again. Either way the model
    is never called after the abort, and the run ends with ``Aborted``.
    """
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=CONFIG)
    dropper = AbortDropper(save_file, at=ABORT_AT)
    result, model, recorder = run_replay(
        middleware,
        replay,
        Events(save_file),
        socket_path is not None,
        between=[retrying(retry_on), dropper],
    )
    assert isinstance(result, scoutd.Aborted), result
    assert result.reason == ABORT_REASON
    assert isinstance(result, ModelCallAborted) == (retry_on == "default")
    assert len(model.seen) == ABORT_AT  # calls 0 .. ABORT_AT - 1; never the one aborted
    assert dropper.calls == (ABORT_AT + 1 if retry_on == "default" else ABORT_AT + 3)
    assert len(recorder.full) == ABORT_AT + 1
    middleware.preparer.close()


class TwoRunsModel(ScriptedChat):
    """Answers two overlapping runs of one agent, told apart by their task ("A", "B").

    A: ``bash``, then (once B made two calls) ``recall`` of output #1, then its
    answer. B: two ``bash`` calls, then (once A finished) one more, then its answer.
    """

    calls: dict[str, int] = Field(default_factory=dict)
    b_ready: Any = None  # asyncio.Event: B made its two calls
    a_done: Any = None  # asyncio.Event: A answered

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("async only")

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
        who = str(messages[0].content)
        n = self.calls[who] = self.calls.get(who, 0) + 1
        name, args_ = "bash", {"command": f"{who}{n}"}
        if who == "A" and n == 2:
            await asyncio.wait_for(self.b_ready.wait(), 10)
            name, args_ = "recall", {"handle": "#1"}
        if who == "B" and n == 3:
            self.b_ready.set()
            await asyncio.wait_for(self.a_done.wait(), 10)
        if (who, n) in (("A", 3), ("B", 4)):
            self.a_done.set()
            message = AIMessage(content=f"{who} done")
        else:
            call = {"name": name, "args": args_, "id": f"{who}-{n}", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


def test_overlapping_runs_of_one_agent_keep_their_own_sessions(
    socket: tuple[str | None, str],
) -> None:
    """Two ``ainvoke`` of one agent at once (one middleware): each run its own session.

    They shared one: the run that started last replaced the other's, the first to end
    closed it, so the other died with ``HookClosed``; and a recall answered from the
    other run's conversation (A got B's output)."""
    socket_path, directory = socket
    save_file = os.path.join(directory, "run.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=socket_path, config=RECALL_CONFIG)

    @tool
    async def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return f"secret of {command[0]}: {command}\n" + "a line of output\n" * 300

    async def main() -> list[Any]:
        model = TwoRunsModel(b_ready=asyncio.Event(), a_done=asyncio.Event())
        agent = create_agent(model, tools=[bash], middleware=[middleware])
        runs = [agent.ainvoke({"messages": [HumanMessage(who)]}) for who in "AB"]
        return await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 60)

    try:
        first, second = asyncio.run(main())
    finally:
        middleware.preparer.close()
    assert not isinstance(first, BaseException), repr(first)
    recalled = [m for m in first["messages"] if isinstance(m, ToolMessage) and m.name == "recall"]
    assert len(recalled) == 1 and "secret of B" not in str(recalled[0].content)
    assert str(recalled[0].content).startswith("secret of A: A1\n")  # A's own output #1
    assert not isinstance(second, BaseException), repr(second)
    assert [first["messages"][-1].content, second["messages"][-1].content] == ["A done", "B done"]
