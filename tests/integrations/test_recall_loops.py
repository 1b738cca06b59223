"""Recall end to end in the frameworks' own loops, in process and through a real daemon.

A scripted model calls ``bash`` until the prompt it is given shows a shortened
output; it then calls ``recall`` with the handle it read in that placeholder,
and finishes once it has seen the answer. The recall tool is the one the scoutd
hook registers, answered by scoutd, never by a provider: the answer must be the
exact original output, and the prompt after it must carry it whole.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from tests.integrations.replay import CONFIG
from tests.test_recall import output_text

HANDLE = re.compile(r"recall #(\d+)\)")
MAX_CALLS = 120


class Script:
    """The model's decisions, shared by both frameworks' scripted models."""

    def __init__(self) -> None:
        self.calls = 0
        self.asked: int | None = None  # the handle the model recalled
        self.answer: str | None = None  # the tool answer it then saw
        self.prompts: list[str] = []

    def next(self, prompt: Any) -> tuple[str, dict[str, Any]] | None:
        """The next tool call (name, arguments), or None to finish."""
        text = json.dumps(prompt, default=str, ensure_ascii=False)
        self.prompts.append(text)
        self.calls += 1
        assert self.calls < MAX_CALLS, "no output was shortened in time"
        if self.asked is not None:
            return None
        handles = [int(h) for h in HANDLE.findall(text)]
        if handles:
            self.asked = min(handles)
            return "recall", {"handle": f"#{self.asked}"}
        return "bash", {"command": f"cat part_{self.calls}.txt"}

    def check(self, answer: str) -> None:
        """The recall answer is the original output, and the next prompt carried it whole."""
        assert self.asked is not None
        assert answer == output_text(self.asked)
        assert json.dumps(answer, ensure_ascii=False)[1:-1] in self.prompts[-1]


def bash_output(command: str) -> str:
    """The output of ``cat part_N.txt``: output N (the handle numbers outputs so)."""
    return output_text(int(command.removeprefix("cat part_").removesuffix(".txt")))


# --- OpenAI Agents SDK ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_openai_agents_model_recalls_a_shortened_output(
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

    script = Script()

    class Recaller(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = list(kwargs["input"] if "input" in kwargs else args[1])
            tools = kwargs["tools"] if "tools" in kwargs else args[3]
            assert "recall" in [t.name for t in tools]
            decided = script.next(items)
            if decided is None:
                answers = [
                    i["output"]
                    for i in items
                    if i.get("type") == "function_call_output" and i["call_id"] == "recall_1"
                ]
                script.answer = answers[-1]
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                output: list[Any] = [
                    ResponseOutputMessage(
                        id="msg",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            else:
                name, arguments = decided
                call_id = "recall_1" if name == "recall" else f"call_{script.calls}"
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=call_id,
                        name=name,
                        arguments=json.dumps(arguments),
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return bash_output(command)

    socket_path, directory = socket
    save_file = os.path.join(directory, "recall.chat")
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        agent = Agent(
            name="coder", instructions="be brief", model=Recaller(), tools=[bash, f.recall_tool]
        )
        config = RunConfig(call_model_input_filter=f, tracing_disabled=True)
        result = await Runner.run(agent, "read the parts", run_config=config, max_turns=MAX_CALLS)
    assert result.final_output == "done"
    assert script.answer is not None
    script.check(script.answer)


# --- LangChain ------------------------------------------------------------------------------------


def test_langchain_model_recalls_a_shortened_output(socket: tuple[str | None, str]) -> None:
    pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage, convert_to_openai_messages
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    from scoutd.integrations.langchain import ScoutdMiddleware
    from tests.integrations.scripted_chat import ScriptedChat

    script = Script()

    class Recaller(ScriptedChat):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            assert "recall" in [getattr(t, "name", None) for t in tools]
            return self

        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatResult:
            decided = script.next(convert_to_openai_messages(messages))
            if decided is None:
                answers = [
                    m.content
                    for m in messages
                    if isinstance(m, ToolMessage) and m.tool_call_id == "recall_1"
                ]
                script.answer = answers[-1]
                message = AIMessage(content="done")
            else:
                name, arguments = decided
                call_id = "recall_1" if name == "recall" else f"call_{script.calls}"
                call = {"name": name, "args": arguments, "id": call_id, "type": "tool_call"}
                message = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return bash_output(command)

    socket_path, directory = socket
    middleware = ScoutdMiddleware(
        save_file=os.path.join(directory, "recall.chat"), socket=socket_path, config=CONFIG
    )
    agent = create_agent(Recaller(), [bash], system_prompt="be brief", middleware=[middleware])
    payload = {"messages": [{"role": "user", "content": "read the parts"}]}
    state = agent.invoke(payload, {"recursion_limit": 4 * MAX_CALLS})  # type: ignore[arg-type]
    assert state["messages"][-1].content == "done"
    assert script.answer is not None
    script.check(script.answer)


# --- Pydantic AI ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pydantic_ai_model_recalls_a_shortened_output(
    socket: tuple[str | None, str],
) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from scoutd.integrations.pydantic_ai import ScoutdCapability
    from tests.integrations.test_pydantic_ai import chat, tool_returns

    script = Script()

    def recaller(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert "recall" in [t.name for t in info.function_tools]
        decided = script.next(chat(messages))
        if decided is None:
            script.answer = tool_returns(messages)["recall_1"]
            return ModelResponse(parts=[TextPart("done")])
        name, arguments = decided
        call_id = "recall_1" if name == "recall" else f"call_{script.calls}"
        return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=call_id)])

    socket_path, directory = socket
    capability = ScoutdCapability(
        save_file=os.path.join(directory, "recall.chat"), socket=socket_path, config=CONFIG
    )
    agent = Agent(FunctionModel(recaller), system_prompt="be brief", capabilities=[capability])

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        return bash_output(command)

    limits = UsageLimits(request_limit=MAX_CALLS)
    result = await agent.run("read the parts", usage_limits=limits)
    assert result.output == "done"
    assert script.answer is not None
    script.check(script.answer)
    # The run's own history holds the answer as the tool gave it.
    assert tool_returns(result.all_messages())["recall_1"] == script.answer
