"""What a hostile model sends to the ``recall`` tool, in each framework's own tool-call form.

A scripted model runs one tool (``bash``), then calls ``recall`` once per case
below, a turn each, and finishes. Every call must get a tool answer, the same
text from every integration and through the daemon as in process, and the run
must reach its end. LangChain called its recall function with ``**`` the
model's keys: an unknown key (``extra``, ``callbacks``) or ``self`` ended the
run with a ``TypeError``; the Agents SDK read past an unknown key, which Pydantic
AI refused, and Pydantic AI took a model's own ``"(not a JSON object)"`` key for
arguments that were no object.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from tests.integrations.replay import langchain_answer
from tests.test_recall import output_text

OUTPUT = output_text(1)
UNKNOWN = "unknown recall arguments: {} (handle, search)"
MALFORMED = 'malformed handle {!r}: give a number such as "#37"'
SURROGATE = "{} holds a lone surrogate (U+D800 to U+DFFF), which no tool output holds"
STRINGS = "handle and search must be strings"
NOT_AN_OBJECT = 'the recall arguments must be a JSON object: {"handle": "#37"}'
GIVE = 'give handle (a number such as "#37") or search (a text the output held)'
NO_CONVERSATION = (
    "no conversation is stored for this session yet (or it was dropped while"
    " idle): prepare a prompt in this session first"
)
# (arguments as the model sends them, the answer); the first case sees one output.
CASES: list[tuple[dict[str, Any], str]] = [
    ({"handle": "#99"}, "no output #99: this conversation has 1 tool output, #1"),
    ({"handle": "#1", "extra": 1}, UNKNOWN.format("extra")),
    ({"self": 1}, UNKNOWN.format("self")),
    ({"(not a JSON object)": 1}, UNKNOWN.format("(not a JSON object)")),
    ({"handle": "#1", "callbacks": 1}, UNKNOWN.format("callbacks")),
    ({"handle": "#1", "config": {}, "run_manager": 2}, UNKNOWN.format("config, run_manager")),
    ({"handle": 1.5}, STRINGS),
    ({"handle": None, "search": ["line"]}, STRINGS),
    ({"handle": "#\ud800"}, SURROGATE.format("handle")),
    ({"search": "line\udfff"}, SURROGATE.format("search")),
    ({"search": "x" * 5000}, "search is too long (5000 characters): give at most 4096 characters"),
    ({"handle": -3}, MALFORMED.format("-3")),
    ({"handle": True}, MALFORMED.format("True")),
    ({"handle": "\u0661\u0662"}, MALFORMED.format("\u0661\u0662")),
    ({"handle": "#1e9"}, MALFORMED.format("#1e9")),
    ({"handle": 10**30}, MALFORMED.format(str(10**30))),
    ({}, GIVE),
    ({"handle": " #1 "}, OUTPUT),
    ({"handle": 1}, OUTPUT),
]
EXPECTED = [answer for _, answer in CASES]
# The cases the Agents SDK and Pydantic AI let reach the tool: both fail on a lone surrogate
# in a call's arguments before any tool runs (the SDK's call fingerprint, Pydantic AI's
# serialization of the arguments), whatever the tool.
PORTABLE = [case for case in CASES if "lone surrogate" not in case[1]]


def decide(
    turn: int, cases: list[tuple[dict[str, Any], str]] = CASES
) -> tuple[str, dict[str, Any]] | None:
    """The model's call at ``turn`` (0-based): ``bash``, then each case; None to finish."""
    if turn == 0:
        return "bash", {"command": "cat part_1.txt"}
    if turn <= len(cases):
        return "recall", cases[turn - 1][0]
    return None


def run_bash(command: str) -> str:
    assert command == "cat part_1.txt"
    return OUTPUT


# --- LangChain ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_langchain_answers_every_argument_object_and_the_run_goes_on(
    socket: tuple[str | None, str], mode: str
) -> None:
    pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")
    from langchain.agents import create_agent
    from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatResult
    from langchain_core.tools import tool

    from scoutd.integrations.langchain import ScoutdMiddleware
    from tests.integrations.scripted_chat import ScriptedChat

    class Hostile(ScriptedChat):
        turns: int = 0

        def _generate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
            decided = decide(self.turns)
            self.turns += 1
            result: ChatResult = langchain_answer(decided, f"c{self.turns}")
            return result

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return run_bash(command)

    socket_path, directory = socket
    save_file = os.path.join(directory, f"{mode}.chat")
    with ScoutdMiddleware(save_file=save_file, socket=socket_path) as middleware:
        agent = create_agent(Hostile(), [bash], middleware=[middleware])
        payload: Any = {"messages": [HumanMessage("go")]}
        config: Any = {"recursion_limit": 10 * len(CASES)}
        if mode == "invoke":
            state = agent.invoke(payload, config)
        else:
            state = asyncio.run(asyncio.wait_for(agent.ainvoke(payload, config), 60))
    answers = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
    assert answers[1:] == EXPECTED
    assert state["messages"][-1].content == "done"


def test_langchain_recall_called_outside_the_tool_node_takes_no_runtime_it_cannot_read(
    tmp_path: Any,
) -> None:
    """Called directly (no tool node injects the run's ``runtime``), a ``runtime`` key
    without a run's state is no run: a text, never the ``AttributeError`` it raised."""
    pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")
    from scoutd.integrations.langchain import ScoutdMiddleware

    with ScoutdMiddleware(save_file=str(tmp_path / "direct.chat")) as middleware:
        [recall] = middleware.tools
        for runtime in ("x", {"state": 1}, 7):
            answer = recall.invoke({"handle": "#1", "runtime": runtime})
            assert answer == NO_CONVERSATION


# --- OpenAI Agents SDK ----------------------------------------------------------------------------

# Arguments texts that are no JSON object, as a model may send them in the SDK's own form.
TEXTS = [("[1, 2]", NOT_AN_OBJECT), ("null", NOT_AN_OBJECT), ('"#1"', NOT_AN_OBJECT)]
TEXTS += [("{not json", NOT_AN_OBJECT), ("[" * 200, NOT_AN_OBJECT), ("", GIVE)]


@pytest.mark.anyio
async def test_openai_agents_answers_every_arguments_text_and_the_run_goes_on(
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

    sent = [(json.dumps(arguments), answer) for arguments, answer in PORTABLE] + TEXTS
    seen: list[list[Any]] = []

    class Hostile(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = list(kwargs["input"] if "input" in kwargs else args[1])
            seen.append(items)
            turn = len(seen) - 1
            if turn == 0:
                name, arguments = "bash", json.dumps({"command": "cat part_1.txt"})
            elif turn <= len(sent):
                name, arguments = "recall", sent[turn - 1][0]
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                message = ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
                return ModelResponse(output=[message], usage=Usage(), response_id=None)
            call = ResponseFunctionToolCall(
                type="function_call", call_id=f"c{turn}", name=name, arguments=arguments
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return run_bash(command)

    socket_path, directory = socket
    save_file = os.path.join(directory, "agents.chat")
    with ScoutdInputFilter(save_file=save_file, socket=socket_path) as f:
        agent = Agent(name="a", instructions="x", model=Hostile(), tools=[bash, f.recall_tool])
        config = RunConfig(call_model_input_filter=f, tracing_disabled=True)
        result = await Runner.run(agent, "go", run_config=config, max_turns=3 * len(sent))
    assert result.final_output == "done"
    history: list[Any] = result.to_input_list()
    answers = [item["output"] for item in history if item.get("type") == "function_call_output"]
    assert answers[1:] == [answer for _, answer in sent]


# --- Pydantic AI ----------------------------------------------------------------------------------


def test_pydantic_ai_answers_every_argument_object_alike(socket: tuple[str | None, str]) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from scoutd.integrations.pydantic_ai import ScoutdCapability
    from tests.integrations.test_pydantic_ai import close_the_loop_run_sync_left, tool_returns

    turns: list[int] = []

    def hostile(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns.append(len(turns))
        decided = decide(turns[-1], PORTABLE)
        if decided is None:
            return ModelResponse(parts=[TextPart("done")])
        name, arguments = decided
        return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=f"c{turns[-1]}")])

    socket_path, directory = socket
    capability = ScoutdCapability(save_file=os.path.join(directory, "p.chat"), socket=socket_path)
    agent = Agent(FunctionModel(hostile), capabilities=[capability])

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return run_bash(command)

    try:
        result = agent.run_sync("go", usage_limits=UsageLimits(request_limit=3 * len(PORTABLE)))
    finally:
        close_the_loop_run_sync_left()
    assert result.output == "done"
    returned = tool_returns(result.all_messages())
    expected = [answer for _, answer in PORTABLE]
    assert [returned[f"c{turn}"] for turn in range(1, len(PORTABLE) + 1)] == expected
