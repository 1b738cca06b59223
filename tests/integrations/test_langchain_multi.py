"""One LangChain middleware handed several conversations (docs/RELIABILITY.md, rule 30).

Real ``create_agent`` loops with scripted models: runs of one agent at once
(``abatch``), a sub-agent run from a tool of another agent with the same
middleware, a sub-agent given the recall tool without the middleware, and the
recall tool called directly. Each recall is answered from the calling run's
conversation or refused, never from another run's.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

pytest.importorskip("langchain", reason="needs the extra scoutd[langchain]")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from pydantic import Field

from scoutd.integrations.langchain import ScoutdMiddleware
from tests.integrations.replay import RECALL_CONFIG
from tests.integrations.scripted_chat import ScriptedChat

TIMEOUT = 30.0
# Graph steps allowed a run: each round takes four (before, model, after, tools).
CONFIG: Any = {"recursion_limit": 100}
# Outputs each conversation makes before it recalls: the outer one more than the inner.
OUTPUTS = {"outer": 3, "inner": 1, "A": 2, "B": 4}


def output_of(who: str, n: int) -> str:
    """Conversation ``who``'s output ``n``: its secret and enough lines to be shortened."""
    return f"secret of {who}: {n}\n" + "a line of output\n" * 300


@tool
async def bash(command: str) -> str:
    """Run a shell command and return its output."""
    who, n = command.split()
    return output_of(who, int(n))


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


class Scripted(ScriptedChat):
    """Each conversation (named by its first human message) makes its outputs, then
    recalls handles #1..#4 in one turn, then ends; ``before_recall`` runs first."""

    turns: dict[str, int] = Field(default_factory=dict)
    delegate_at: int = -1  # the outer conversation calls ``delegate`` at this turn
    before_recall: Any = None  # async callable of the conversation's name

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("async only")

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
        who = str(next(m for m in messages if isinstance(m, HumanMessage)).content)
        turn = self.turns[who] = self.turns.get(who, 0) + 1
        made = OUTPUTS[who]
        k = turn - (1 if who == "outer" and 0 < self.delegate_at < turn else 0)
        if who == "outer" and turn == self.delegate_at:
            message = _call("delegate", {"task": "inner"}, f"{who}-d")
        elif k <= made:
            message = _call("bash", {"command": f"{who} {k}"}, f"{who}-{k}")
        elif k == made + 1:
            if self.before_recall is not None:
                await self.before_recall(who)
            calls = [
                {"name": "recall", "args": {"handle": f"#{n}"}, "id": f"{who}-r{n}"}
                for n in range(1, 5)
            ]
            message = AIMessage(content="", tool_calls=calls)
        else:
            message = AIMessage(content=f"{who} done")
        return ChatResult(generations=[ChatGeneration(message=message)])


def recalled(result: dict[str, Any]) -> list[str]:
    """The recall answers of a run's result, in call order."""
    return [
        str(m.content)
        for m in result["messages"]
        if isinstance(m, ToolMessage) and m.name == "recall"
    ]


def check_own(who: str, answers: list[str]) -> None:
    """``answers`` (handles #1..#4) are ``who``'s outputs or "no output", never another's."""
    assert len(answers) == 4, answers
    for n, answer in enumerate(answers, start=1):
        if n <= OUTPUTS[who]:
            assert answer == output_of(who, n), (who, n, answer[:80])
        else:
            assert answer.startswith(f"no output #{n}"), (who, n, answer[:80])


def middleware_for(socket: tuple[str | None, str]) -> ScoutdMiddleware:
    socket_path, directory = socket
    save_file = os.path.join(directory, "multi.chat")
    return ScoutdMiddleware(save_file=save_file, socket=socket_path, config=RECALL_CONFIG)


def test_runs_at_once_recall_only_their_own(socket: tuple[str | None, str]) -> None:
    """``abatch`` of two runs that recall while both are live: each gets its own."""
    middleware = middleware_for(socket)
    ready = {who: asyncio.Event() for who in "AB"}

    async def both_ready(who: str) -> None:
        ready[who].set()
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready.values())), TIMEOUT)

    async def main() -> list[Any]:
        model = Scripted(before_recall=both_ready)
        agent = create_agent(model, tools=[bash], middleware=[middleware])
        inputs: list[Any] = [{"messages": [HumanMessage(who)]} for who in "AB"]
        return await asyncio.wait_for(agent.abatch(inputs, CONFIG), 2 * TIMEOUT)

    with middleware:
        results = asyncio.run(main())
    for who, result in zip("AB", results, strict=True):
        check_own(who, recalled(result))
        assert result["messages"][-1].content == f"{who} done"


def test_a_sub_agent_with_the_same_middleware_has_its_own_session(
    socket: tuple[str | None, str],
) -> None:
    """An agent run from a tool of another, both with one middleware: the inner run
    recalls only its outputs, and the outer run, after it, only the outer's."""
    middleware = middleware_for(socket)
    model = Scripted(delegate_at=2)
    inner = create_agent(model, tools=[bash], middleware=[middleware])
    inner_results: list[Any] = []

    @tool
    async def delegate(task: str) -> str:
        """Hand a task to a sub-agent."""
        result = await inner.ainvoke({"messages": [HumanMessage(task)]}, CONFIG)
        inner_results.append(result)
        return str(result["messages"][-1].content)

    outer = create_agent(model, tools=[bash, delegate], middleware=[middleware])

    async def main() -> Any:
        return await asyncio.wait_for(
            outer.ainvoke({"messages": [HumanMessage("outer")]}, CONFIG), 2 * TIMEOUT
        )

    with middleware:
        result = asyncio.run(main())
    assert len(inner_results) == 1
    check_own("inner", recalled(inner_results[0]))
    # The outer run made outputs #1 (bash), #2 (the delegate's answer), #3, #4 (bash).
    answers = recalled(result)
    assert answers[0] == output_of("outer", 1)
    assert answers[1] == "inner done"
    assert answers[2:] == [output_of("outer", 2), output_of("outer", 3)]
    assert result["messages"][-1].content == "outer done"


@pytest.mark.parametrize("caller", ["a sub-agent without the middleware", "a direct call"])
def test_a_recall_from_no_run_is_refused(socket: tuple[str | None, str], caller: str) -> None:
    """The recall tool reached from outside the middleware's runs (a sub-agent given the
    tool but not the middleware, or a direct call, while a run is live) has no run to
    answer from: it is refused, never answered from the latest run's conversation."""
    middleware = middleware_for(socket)
    recall_tool: BaseTool = middleware.tools[0]
    plain = create_agent(Scripted(), tools=[bash, recall_tool])  # no middleware
    answers: list[str] = []

    async def from_elsewhere(who: str) -> None:
        if caller == "a direct call":
            answers.extend([str(await recall_tool.ainvoke({"handle": f"#{n}"})) for n in (1, 2)])
        else:
            result = await plain.ainvoke({"messages": [HumanMessage("inner")]}, CONFIG)
            answers.extend(recalled(result))

    async def main() -> Any:
        agent = create_agent(
            Scripted(before_recall=from_elsewhere), tools=[bash], middleware=[middleware]
        )
        return await asyncio.wait_for(
            agent.ainvoke({"messages": [HumanMessage("A")]}, CONFIG), 2 * TIMEOUT
        )

    with middleware:
        result = asyncio.run(main())
    check_own("A", recalled(result))
    assert answers, "nothing was recalled from outside the run"
    leaked = [a[:40] for a in answers if "secret of A" in a]
    assert not leaked, f"{len(leaked)} of {len(answers)} recalls answered from run A: {leaked}"
    assert all(a.startswith("no conversation is stored") for a in answers), answers
