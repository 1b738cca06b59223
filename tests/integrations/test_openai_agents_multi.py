"""One ``ScoutdInputFilter`` serving several conversations of the Agents SDK at once.

Real ``Runner`` loops with scripted models: a sub-agent called as a tool
(``agent.as_tool``), whose runs inherit the parent's ``RunConfig`` and so its
filter; two ``Runner.run`` at once (``asyncio.gather``) with one filter; a
handoff. What each model is sent, and what its ``recall`` calls are answered,
must come from its own run: a recall handle is never answered with another
run's output. In process and through a real daemon subprocess.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")

from agents import Agent, FunctionTool, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import scoutd
from scoutd.integrations._run import HookClosed
from scoutd.integrations.openai_agents import (
    MAX_CONVERSATIONS,
    RECALL_AMBIGUOUS,
    ScoutdInputFilter,
)
from scoutd.strategies.inbox import write_abort, write_notice
from tests.integrations.replay import CONFIG, contains
from tests.test_recall import output_text

pytestmark = pytest.mark.anyio

HANDLE = re.compile(r"recall #(\d+)\)")
WAIT = 20.0  # seconds any scripted step waits for another run
Decide = Callable[[int, list[Any]], Awaitable[list[Any]]]


def said(text: str) -> ResponseOutputMessage:
    """The model's final text."""
    content: list[Any] = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=content
    )


def called(call_id: str, name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    """One function call of the model."""
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments)
    )


class Scripted(Model):
    """A model whose answer to its ``n``-th call (1-based) is ``decide(n, items)``."""

    def __init__(self, decide: Decide) -> None:
        self.decide = decide
        self.seen: list[list[Any]] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        items = list(kwargs["input"] if "input" in kwargs else args[1])
        self.seen.append(items)
        output = await self.decide(len(self.seen), items)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run Runner.run")


def reader(tag: str, name: str = "bash") -> FunctionTool:
    """A tool whose output ``n`` is output ``n`` of the recall tests, marked with ``tag``."""

    def read(n: int) -> str:
        return f"{tag} {output_text(n)}"

    read.__doc__ = "Read part n."
    return function_tool(read, name_override=name)


def delayed(tool: FunctionTool, before: asyncio.Event) -> FunctionTool:
    """``tool``, answering only once ``before`` is set (another run has moved on)."""

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        await asyncio.wait_for(before.wait(), WAIT)
        answer: str = await tool.on_invoke_tool(context, arguments)
        return answer

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.params_json_schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def recall_answer(items: list[Any], call_id: str) -> str | None:
    """The output the recall call ``call_id`` got, if the items hold it."""
    for item in items:
        if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
            return str(item["output"])
    return None


def handles(items: list[Any]) -> list[int]:
    """The recall handles the prompt shows."""
    return [int(h) for h in HANDLE.findall(json.dumps(items, default=str))]


def save_in(socket: tuple[str | None, str], name: str) -> tuple[str | None, str]:
    socket_path, directory = socket
    return socket_path, os.path.join(directory, name)


async def test_a_sub_agent_tool_never_answers_the_parent_s_recall(
    socket: tuple[str | None, str],
) -> None:
    """The parent calls its sub-agent tool and ``recall`` in one turn; the sub-agent's
    run (the same filter, inherited) prepares meanwhile. The recall is the parent's:
    it was answered with the sub-agent's output of the same number."""
    socket_path, save_file = save_in(socket, "multi.chat")
    inner_done = asyncio.Event()
    asked: list[int] = []

    async def inner(n: int, items: list[Any]) -> list[Any]:
        if n <= 8:  # as many outputs as the parent has when it recalls
            return [called(f"in_{n}", "inner_bash", {"n": n})]
        inner_done.set()
        return [said("inner done")]

    async def outer(n: int, items: list[Any]) -> list[Any]:
        if recall_answer(items, "recall_1") is not None:
            return [said("outer done")]
        shown = handles(items)
        if shown:
            asked.append(min(shown))
            return [
                called("helper_1", "helper", {"input": "look around"}),
                called("recall_1", "recall", {"handle": f"#{min(shown)}"}),
            ]
        return [called(f"out_{n}", "bash", {"n": n})]

    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        helper = Agent(name="helper", model=Scripted(inner), tools=[reader("INNER", "inner_bash")])
        helper_tool = helper.as_tool(tool_name="helper", tool_description="A helper.")
        lead = Agent(
            name="lead",
            model=Scripted(outer),
            tools=[reader("OUTER"), helper_tool, delayed(f.recall_tool, inner_done)],
        )
        config = RunConfig(call_model_input_filter=f, tracing_disabled=True)
        result = await Runner.run(lead, "work", run_config=config, max_turns=60)
    assert result.final_output == "outer done"
    assert len(asked) == 1 and 1 <= asked[0] <= 8
    answer = recall_answer(result.to_input_list(), "recall_1")
    assert answer == f"OUTER {output_text(asked[0])}", (answer or "")[:80]


@pytest.mark.parametrize("same_input", [False, True])
async def test_parallel_runs_with_one_filter_recall_their_own_outputs(
    socket: tuple[str | None, str], same_input: bool
) -> None:
    """Two ``Runner.run`` at once, one filter: each run's recall answers from its own
    conversation, however the other run's rounds fall between its prompt and its
    recall. The second run's recall waits until the first has prepared again.

    Runs begun with the same input cannot be told apart by the filter: their
    recalls are refused with a text, never answered with the other's output."""
    socket_path, save_file = save_in(socket, "multi.chat")
    moved_on = asyncio.Event()  # run A was prepared after B decided to recall
    b_asked = asyncio.Event()
    b_going = asyncio.Event()  # run B has had its second model call
    asked: dict[str, int] = {}

    def script(tag: str) -> Decide:
        async def decide(n: int, items: list[Any]) -> list[Any]:
            if b_asked.is_set() and tag == "A":
                moved_on.set()
            if tag == "B" and n >= 2:
                b_going.set()
            if recall_answer(items, f"recall_{tag}") is not None:
                if tag == "A" and not moved_on.is_set():
                    return [called(f"{tag}_{n}", "bash", {"n": n})]  # until B recalls
                return [said(f"{tag} done")]
            shown = handles(items)
            if shown and tag not in asked:
                asked[tag] = min(shown)
                if tag == "B":
                    b_asked.set()
                return [called(f"recall_{tag}", "recall", {"handle": f"#{min(shown)}"})]
            return [called(f"{tag}_{n}", "bash", {"n": n})]

        return decide

    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        config = RunConfig(call_model_input_filter=f, tracing_disabled=True)
        runs = []
        recalls = (delayed(f.recall_tool, b_going), delayed(f.recall_tool, moved_on))
        for tag, recall in zip("AB", recalls, strict=True):
            agent = Agent(
                name=f"agent_{tag}", model=Scripted(script(tag)), tools=[reader(tag), recall]
            )
            task = "task" if same_input else f"task {tag}"
            runs.append(Runner.run(agent, task, run_config=config, max_turns=80))
        results = await asyncio.wait_for(asyncio.gather(*runs), 4 * WAIT)
    for tag, result in zip("AB", results, strict=True):
        assert result.final_output == f"{tag} done"
        answer = recall_answer(result.to_input_list(), f"recall_{tag}")
        own = f"{tag} {output_text(asked[tag])}"
        if same_input:
            assert answer == RECALL_AMBIGUOUS, (tag, (answer or "")[:60])
        else:
            assert answer == own, (tag, (answer or "")[:60])


async def test_a_notice_and_an_abort_reach_the_parent_through_a_sub_agent(
    socket: tuple[str | None, str],
) -> None:
    """A notice dropped while the sub-agent runs reaches one model call, the next
    one (the sub-agent's); an abort dropped then stops the sub-agent's next call
    (the tool's error text) and the parent's next call raises it."""
    socket_path, save_file = save_in(socket, "multi.chat")

    async def inner(n: int, items: list[Any]) -> list[Any]:
        if n == 1:
            write_notice(save_file, "operator notice 5d1e: wrap up", name="note.txt")
        if n == 2:
            write_abort(save_file, "operator abort 3c7a: stop now")
        return [called(f"in_{n}", "inner_bash", {"n": n})]

    async def outer(n: int, items: list[Any]) -> list[Any]:
        if n == 1:
            return [called("helper_1", "helper", {"input": "look around"})]
        return [said("outer done")]

    inner_model, outer_model = Scripted(inner), Scripted(outer)
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        helper = Agent(name="helper", model=inner_model, tools=[reader("INNER", "inner_bash")])
        lead = Agent(
            name="lead",
            model=outer_model,
            tools=[helper.as_tool(tool_name="helper", tool_description="A helper.")],
        )
        config = RunConfig(call_model_input_filter=f, tracing_disabled=True)
        with pytest.raises(scoutd.Aborted, match="3c7a"):
            await Runner.run(lead, "work", run_config=config, max_turns=20)
        assert f.preparer.aborted == "operator abort 3c7a: stop now"
    assert len(inner_model.seen) == 2 and len(outer_model.seen) == 1
    prompts = [*inner_model.seen, *outer_model.seen]
    assert [contains(p, "5d1e") for p in prompts] == [False, True, False]


async def test_a_handoff_goes_on_in_the_same_conversation(
    socket: tuple[str | None, str],
) -> None:
    """After a handoff the new agent's model calls continue the run's conversation:
    its recall answers the outputs read before the handoff."""
    socket_path, save_file = save_in(socket, "multi.chat")
    asked: list[int] = []

    async def specialist(n: int, items: list[Any]) -> list[Any]:
        if recall_answer(items, "recall_1") is not None:
            return [said("specialist done")]
        shown = handles(items)
        if shown:
            asked.append(min(shown))
            return [called("recall_1", "recall", {"handle": f"#{min(shown)}"})]
        return [called(f"s_{n}", "bash", {"n": 100 + n})]

    async def triage(n: int, items: list[Any]) -> list[Any]:
        if n <= 12:
            return [called(f"t_{n}", "bash", {"n": n})]
        return [called("handoff_1", "transfer_to_specialist", {})]

    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        expert = Agent(
            name="specialist", model=Scripted(specialist), tools=[reader("T"), f.recall_tool]
        )
        lead = Agent(name="triage", model=Scripted(triage), tools=[reader("T")], handoffs=[expert])
        config = RunConfig(call_model_input_filter=f, tracing_disabled=True)
        result = await Runner.run(lead, "work", run_config=config, max_turns=60)
    assert result.final_output == "specialist done"
    assert asked and asked[0] <= 12  # an output read before the handoff
    answer = recall_answer(result.to_input_list(), "recall_1")
    assert answer == f"T {output_text(asked[0])}"


def test_a_filter_keeps_a_bounded_number_of_conversations() -> None:
    """Past ``MAX_CONVERSATIONS`` the least recently prepared idle conversation's
    session is closed; a recall from a run that began as it did is refused from then
    on (its answer can no longer be told from another run's), never guessed."""

    def conversation(n: int) -> list[Any]:
        return [
            {"role": "user", "content": f"task {n}"},
            {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": f"run {n} output"},
        ]

    with ScoutdInputFilter(config=CONFIG) as f:
        for n in range(MAX_CONVERSATIONS + 1):
            f.prepare_items(conversation(n))
        for n in range(1, MAX_CONVERSATIONS + 1):
            assert f.recall(conversation(n)[:1], "#1", None) == f"run {n} output"
        assert f.recall(conversation(0)[:1], "#1", None) == RECALL_AMBIGUOUS
        f.prepare_items([*conversation(3), {"role": "user", "content": "go on"}])
        assert f.recall(conversation(3)[:1], "#1", None) == "run 3 output"
    with pytest.raises(HookClosed):
        f.recall([], "#1", None)
