"""Recall across runs and across a daemon restart, in the frameworks' own loops.

Two runs of one chat at once (one Pydantic AI agent and capability; two Agents
SDK filters): the model of one recalls every handle the other's prompts
showed, and searches for the other's secret. Each must get its own outputs or
a "no output" text, never the other run's. Then a daemon restarts while the
model is thinking: the recall it sends gets the documented "not available now"
text, and the next model call's session answers the same handle exactly.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.integrations._run import RECALL_LOST
from tests.integrations.replay import langchain_answer
from tests.integrations.test_recall_loops import MAX_CALLS, Script, bash_output
from tests.support.daemon import Daemon

# The outputs each run makes before the recalls: B makes more, so A is asked handles
# that only B's prompts showed.
OUTPUTS = {"A": 2, "B": 5}
TIMEOUT = 20.0


def secret_output(who: str, n: int) -> str:
    """Run ``who``'s output ``n``: its secret, and enough lines to be a real output."""
    return f"secret of {who}: {n}\n" + "a line of output\n" * 50


def expected_answers(who: str) -> list[str]:
    """What run ``who`` must get for handles #1..#5 and a search for the other's secret,
    asked in one turn after its own outputs (answered as of its last prompt)."""
    own = OUTPUTS[who]
    holds = f"this conversation has {own} tool outputs, #1-#{own}"
    answers = [
        secret_output(who, n) if n <= own else f"no output #{n}: {holds}"
        for n in range(1, OUTPUTS["B"] + 1)
    ]
    other = "B" if who == "A" else "A"
    answers.append(
        f"no tool output shortened or removed from the prompt contains 'secret of {other}'"
        f" ({holds})"
    )
    return answers


def recall_calls(who: str) -> list[dict[str, Any]]:
    """The recall arguments run ``who`` sends, in one turn."""
    calls: list[dict[str, Any]] = [{"handle": f"#{n}"} for n in range(1, OUTPUTS["B"] + 1)]
    return [*calls, {"search": f"secret of {'B' if who == 'A' else 'A'}"}]


class Pacing:
    """Keeps the two runs overlapping: each recalls only once both made their outputs,
    and finishes only once both recalled."""

    def __init__(self) -> None:
        self.made = {who: asyncio.Event() for who in OUTPUTS}
        self.recalled = {who: asyncio.Event() for who in OUTPUTS}

    async def both(self, events: dict[str, asyncio.Event]) -> None:
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events.values())), TIMEOUT)


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


# --- two runs of one chat -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pydantic_ai_runs_of_one_chat_recall_only_their_own_outputs(
    socket: tuple[str | None, str],
) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from scoutd.integrations.pydantic_ai import ScoutdCapability
    from tests.integrations.test_pydantic_ai import tool_returns

    pacing = Pacing()

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        who = str(getattr(messages[0].parts[-1], "content", ""))
        turn = len(messages) // 2
        if turn < OUTPUTS[who]:
            call = ToolCallPart("bash", {"command": f"{who} {turn + 1}"}, tool_call_id=f"b{turn}")
            return ModelResponse(parts=[call])
        if turn == OUTPUTS[who]:
            pacing.made[who].set()
            await pacing.both(pacing.made)
            calls = [
                ToolCallPart("recall", arguments, tool_call_id=f"r{k}")
                for k, arguments in enumerate(recall_calls(who))
            ]
            return ModelResponse(parts=list(calls))
        pacing.recalled[who].set()
        await pacing.both(pacing.recalled)
        return ModelResponse(parts=[TextPart(f"{who} done")])

    socket_path, directory = socket
    save_file = os.path.join(directory, "shared.chat")  # one chat, two runs
    capability = ScoutdCapability(save_file=save_file, socket=socket_path)
    agent = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        who, n = command.split()
        return secret_output(who, int(n))

    runs = [agent.run(who) for who in OUTPUTS]
    results = await asyncio.wait_for(asyncio.gather(*runs), 2 * TIMEOUT)
    for who, result in zip(OUTPUTS, results, strict=True):
        assert result.output == f"{who} done"
        returned = tool_returns(result.all_messages())
        answers = [returned[f"r{k}"] for k in range(len(recall_calls(who)))]
        assert answers == expected_answers(who), who


@pytest.mark.anyio
async def test_agents_sdk_runs_of_one_chat_recall_only_their_own_outputs(
    socket: tuple[str | None, str],
) -> None:
    pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")
    from agents import Agent, Model, ModelResponse, RunConfig, Runner, function_tool
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from scoutd.integrations.openai_agents import ScoutdInputFilter

    pacing = Pacing()

    class Paced(Model):
        def __init__(self, who: str) -> None:
            self.who = who
            self.turn = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            who, turn = self.who, self.turn
            self.turn += 1
            output: list[Any]
            if turn < OUTPUTS[who]:
                arguments = json.dumps({"command": f"{who} {turn + 1}"})
                output = [
                    ResponseFunctionToolCall(
                        type="function_call", call_id=f"b{turn}", name="bash", arguments=arguments
                    )
                ]
            elif turn == OUTPUTS[who]:
                pacing.made[who].set()
                await pacing.both(pacing.made)
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"r{k}",
                        name="recall",
                        arguments=json.dumps(arguments),
                    )
                    for k, arguments in enumerate(recall_calls(who))
                ]
            else:
                pacing.recalled[who].set()
                await pacing.both(pacing.recalled)
                text = ResponseOutputText(type="output_text", text=f"{who} done", annotations=[])
                output = [
                    ResponseOutputMessage(
                        id="m", type="message", role="assistant", status="completed", content=[text]
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        who, n = command.split()
        return secret_output(who, int(n))

    socket_path, directory = socket
    save_file = os.path.join(directory, "shared.chat")

    async def run(who: str) -> list[Any]:
        with ScoutdInputFilter(save_file=save_file, socket=socket_path) as f:
            agent = Agent(name=who, model=Paced(who), tools=[bash, f.recall_tool])
            config = RunConfig(call_model_input_filter=f, tracing_disabled=True)
            result = await Runner.run(agent, who, run_config=config, max_turns=10)
        assert result.final_output == f"{who} done"
        return result.to_input_list()

    histories = await asyncio.wait_for(asyncio.gather(*(run(w) for w in OUTPUTS)), 2 * TIMEOUT)
    for who, history in zip(OUTPUTS, histories, strict=True):
        returned = {
            item["call_id"]: item["output"]
            for item in history
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        }
        answers = [returned[f"r{k}"] for k in range(len(recall_calls(who)))]
        assert answers == expected_answers(who), who


# --- a daemon restart while the model thinks ------------------------------------------------------


class Restarting(Script):
    """:class:`Script`, with the daemon restarted in the model call that decides the
    recall; recalls the same handle again at the next call, then finishes."""

    def __init__(self, daemon: Daemon) -> None:
        super().__init__()
        self.daemon = daemon
        self.answers: list[str] = []

    def decide(self, prompt: Any, answers: list[str]) -> tuple[str, dict[str, Any]] | None:
        self.answers = answers
        if self.asked is not None and len(answers) == 1:
            return "recall", {"handle": f"#{self.asked}"}  # again, in the new session
        decided = self.next(prompt)
        if decided is not None and decided[0] == "recall":
            self.daemon.stop()
            self.daemon.start()
        return decided

    def check_answers(self) -> None:
        assert self.asked is not None
        assert self.answers[0] == RECALL_LOST
        self.check(self.answers[1])


def test_langchain_recall_across_a_daemon_restart(daemon: Daemon) -> None:
    pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")
    from langchain.agents import create_agent
    from langchain_core.messages import (
        BaseMessage,
        HumanMessage,
        ToolMessage,
        convert_to_openai_messages,
    )
    from langchain_core.outputs import ChatResult
    from langchain_core.tools import tool

    from scoutd.integrations.langchain import ScoutdMiddleware
    from tests.integrations.replay import CONFIG
    from tests.integrations.scripted_chat import ScriptedChat

    script = Restarting(daemon)

    class Model(ScriptedChat):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
            answers = [
                str(m.content)
                for m in messages
                if isinstance(m, ToolMessage) and m.name == "recall"
            ]
            decided = script.decide(convert_to_openai_messages(messages), answers)
            result: ChatResult = langchain_answer(decided, f"c{script.calls}_{len(answers)}")
            return result

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return bash_output(command)

    save_file = os.path.join(daemon.dir, "restart.chat")
    with ScoutdMiddleware(save_file=save_file, socket=daemon.socket_path, config=CONFIG) as hook:
        agent = create_agent(Model(), [bash], middleware=[hook])
        request: Any = {"messages": [HumanMessage("read the parts")]}
        state = agent.invoke(request, {"recursion_limit": 4 * MAX_CALLS})
    assert state["messages"][-1].content == "done"
    script.check_answers()


def test_pydantic_ai_recall_across_a_daemon_restart(daemon: Daemon) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from scoutd.integrations.pydantic_ai import ScoutdCapability
    from tests.integrations.replay import CONFIG
    from tests.integrations.test_pydantic_ai import (
        chat,
        close_the_loop_run_sync_left,
        tool_returns,
    )

    script = Restarting(daemon)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = tool_returns(messages)
        answers = [str(v) for k, v in returned.items() if k.startswith("recall")]
        decided = script.decide(chat(messages), answers)
        if decided is None:
            return ModelResponse(parts=[TextPart("done")])
        name, arguments = decided
        call_id = f"{name}_{script.calls}_{len(answers)}"
        return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=call_id)])

    save_file = os.path.join(daemon.dir, "restart.chat")
    capability = ScoutdCapability(save_file=save_file, socket=daemon.socket_path, config=CONFIG)
    agent = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return bash_output(command)

    try:
        result = agent.run_sync("read the parts", usage_limits=UsageLimits(request_limit=MAX_CALLS))
    finally:
        close_the_loop_run_sync_left()
    assert result.output == "done"
    script.check_answers()
