"""A LangChain run ends its daemon session however it ends (docs/INTEGRATIONS.md).

LangChain calls ``after_agent`` only when the agent finishes; a run that ends
with an exception (the model's, a tool's), an abort or a cancellation never
reaches it. The middleware's session must end all the same, at once, not at
garbage collection: the daemon's ``status`` must count no session after the run
(garbage collection is off meanwhile, so that only a real close can pass).
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRetryMiddleware, ToolRetryMiddleware
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.errors import GraphRecursionError

import scoutd
from scoutd.inbox import write_abort
from scoutd.integrations.langchain import ScoutdMiddleware
from tests.integrations.replay import CONFIG, langchain_answer
from tests.integrations.scripted_chat import ScriptedChat
from tests.integrations.test_recall_loops import MAX_CALLS, Script, bash_output
from tests.support.daemon import Daemon, session_count, sessions_settled

CALLS = 4  # the model's tool calls before its answer


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


@pytest.fixture
def no_gc() -> Iterator[None]:
    """Garbage collection off: a session left to it stays open."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Model(ScriptedChat):
    """Calls ``bash`` ``CALLS`` times, then answers; its call number ``fail_at`` raises
    (once: a retry of it succeeds)."""

    fail_at: int = 0
    calls: int = 0

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the provider failed")
        n = self.record(messages)
        if n > CALLS:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="done"))])
        call = {
            "name": "bash",
            "args": {"command": f"step {n}"},
            "id": f"c{n}",
            "type": "tool_call",
        }
        message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
        return self._generate(messages)


def run(agent: Any, mode: str) -> Any:
    """``invoke`` or ``ainvoke`` the agent once; what it returned or raised."""
    request = {"messages": [HumanMessage("work")]}
    try:
        if mode == "invoke":
            return agent.invoke(request)
        return asyncio.run(asyncio.wait_for(agent.ainvoke(request), 20))
    except Exception as exc:
        return exc


@pytest.mark.usefixtures("no_gc")
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("failing", ["model", "tool"])
def test_a_run_that_raises_ends_its_session(
    daemon: Daemon, tmp_path: Any, failing: str, mode: str
) -> None:
    """The model's second call, or the tool's second run, raises: out of the run, and
    the run's daemon session is ended (it stayed open until garbage collection)."""
    save_file = os.path.join(daemon.dir, f"{tmp_path.name}.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=daemon.socket_path)
    before = session_count(daemon)  # those of other tests' runs

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        if failing == "tool" and command == "step 2":
            raise ValueError("the tool failed")
        return f"{command}: ok\n" * 50

    model = Model(fail_at=2 if failing == "model" else 0)
    agent = create_agent(model, tools=[bash], middleware=[middleware])
    result = run(agent, mode)
    assert isinstance(result, RuntimeError if failing == "model" else ValueError), result
    assert sessions_settled(daemon, before) <= before
    middleware.preparer.close()


@pytest.mark.usefixtures("no_gc")
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_an_aborted_run_ends_its_session_and_stays_aborted(
    daemon: Daemon, tmp_path: Any, mode: str
) -> None:
    """An abort ends the run and its session; the next run of the same middleware is
    aborted too, without a model call, and leaves no session either."""
    save_file = os.path.join(daemon.dir, f"{tmp_path.name}.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=daemon.socket_path)
    before = session_count(daemon)  # those of other tests' runs

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        if command == "step 2":
            write_abort(save_file, "stop now")
        return f"{command}: ok\n"

    model = Model()
    agent = create_agent(model, tools=[bash], middleware=[middleware])
    first = run(agent, mode)
    assert isinstance(first, scoutd.Aborted) and first.reason == "stop now", first
    assert len(model.seen) == 2
    assert sessions_settled(daemon, before) <= before
    second = run(agent, mode)
    assert isinstance(second, scoutd.Aborted) and second.reason == "stop now", second
    assert len(model.seen) == 2
    assert sessions_settled(daemon, before) <= before
    scoutd.inbox.aborted.clear(save_file)


@pytest.mark.usefixtures("no_gc")
def test_a_cancelled_ainvoke_ends_its_session(daemon: Daemon, tmp_path: Any) -> None:
    """``ainvoke`` cancelled while a tool runs (a timeout): the session ends."""
    save_file = os.path.join(daemon.dir, f"{tmp_path.name}.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=daemon.socket_path)
    before = session_count(daemon)  # those of other tests' runs

    @tool
    async def bash(command: str) -> str:
        """Run a shell command and return its output."""
        if command == "step 2":
            await asyncio.sleep(30)
        return f"{command}: ok\n"

    agent = create_agent(Model(), tools=[bash], middleware=[middleware])

    async def main() -> None:
        await asyncio.wait_for(agent.ainvoke({"messages": [HumanMessage("work")]}), 0.5)

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert sessions_settled(daemon, before) <= before
    middleware.preparer.close()


@pytest.mark.usefixtures("no_gc")
def test_a_retried_model_error_goes_on_in_a_fresh_session(daemon: Daemon, tmp_path: Any) -> None:
    """A retry middleware outside scoutd's catches a model error: the run goes on, its
    retried call gets the prompt ``scoutd.prepare`` makes of the history, and the run
    ends with no session left."""
    save_file = os.path.join(daemon.dir, f"{tmp_path.name}.chat")
    middleware = ScoutdMiddleware(save_file=save_file, socket=daemon.socket_path)
    before = session_count(daemon)  # those of other tests' runs

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return f"{command}: ok\n"

    model = Model(fail_at=3)
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, retry_on=(RuntimeError,))
    chain: list[Any] = [retry, middleware]  # the retry outermost, scoutd last
    agent = create_agent(model, tools=[bash], middleware=chain)
    result = run(agent, "invoke")
    assert not isinstance(result, BaseException), result
    assert result["messages"][-1].content == "done"
    assert len(model.seen) == CALLS + 1
    assert sessions_settled(daemon, before) <= before
    middleware.preparer.close()


@pytest.mark.usefixtures("no_gc")
def test_close_ends_the_sessions_of_runs_that_ended_where_no_hook_runs(
    daemon: Daemon, tmp_path: Any
) -> None:
    """A run stopped by the recursion limit, and a ``stream`` left half-way, end where
    none of the middleware's hooks runs: ``close()`` (the end of ``with``) ends their
    sessions; the middleware then serves a run as before, which ends its own."""
    save_file = os.path.join(daemon.dir, f"{tmp_path.name}.chat")
    before = session_count(daemon)

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return f"{command}: ok\n"

    with ScoutdMiddleware(save_file=save_file, socket=daemon.socket_path) as middleware:
        agent = create_agent(Model(), tools=[bash], middleware=[middleware])
        request: Any = {"messages": [HumanMessage("work")]}
        with pytest.raises(GraphRecursionError):
            agent.invoke(request, {"recursion_limit": 4})
        chunks = agent.stream(request)
        for _, _chunk in zip(range(4), chunks, strict=False):
            pass  # the run is between two steps, its session open
        del chunks
        assert session_count(daemon) > before
    assert sessions_settled(daemon, before) <= before
    result = run(create_agent(Model(), tools=[bash], middleware=[middleware]), "invoke")
    assert not isinstance(result, BaseException), result
    assert result["messages"][-1].content == "done"
    assert sessions_settled(daemon, before) <= before


def test_a_tool_error_an_outer_retry_catches_leaves_recall_exact(
    daemon: Daemon, tmp_path: Any
) -> None:
    """``ToolRetryMiddleware`` listed before scoutd's retries a failed tool: the error
    passed scoutd's tool wrapper, which ended the run's session; the run goes on in a
    fresh one, whose recall still answers with the exact original output."""
    script = Script()

    class Recaller(ScriptedChat):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
            decided = script.next(convert_to_openai_messages(messages))
            if decided is None:
                answers = [m.content for m in messages if getattr(m, "name", "") == "recall"]
                script.answer = str(answers[-1])
            result: ChatResult = langchain_answer(decided, f"c{script.calls}")
            return result

    failed: list[str] = []

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        if command == "cat part_2.txt" and not failed:
            failed.append(command)
            raise ValueError("the tool failed once")
        return bash_output(command)

    save_file = os.path.join(daemon.dir, f"{tmp_path.name}.chat")
    before = session_count(daemon)
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    with ScoutdMiddleware(save_file=save_file, socket=daemon.socket_path, config=CONFIG) as hook:
        chain: list[Any] = [retry, hook]
        agent = create_agent(Recaller(), tools=[bash], middleware=chain)
        request: Any = {"messages": [HumanMessage("read the parts")]}
        state = agent.invoke(request, {"recursion_limit": 4 * MAX_CALLS})
    assert failed and state["messages"][-1].content == "done"
    assert script.answer is not None
    script.check(script.answer)
    assert sessions_settled(daemon, before) <= before
