"""The scripted model and the fake tools of the built-in tool tests of the OpenAI Agents SDK.

The model calls, turn after turn, the tools the SDK itself runs: a function
tool, ``LocalShellTool``, ``ShellTool``, ``ApplyPatchTool`` (with an editor),
``ComputerTool`` (a fake computer whose screenshot is a small base64 image) and
a freeform ``CustomTool``; each turn opens with a ``reasoning`` item, and some
hold several calls. Every tool records what it answered, by call id, as the
text a recall of that output gives back (docs/STRATEGIES.md, "Recall").
This module holds no tests.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")

from agents import (
    Agent,
    ApplyPatchTool,
    ComputerTool,
    CustomTool,
    LocalShellCommandRequest,
    LocalShellTool,
    Model,
    ModelResponse,
    RunConfig,
    Runner,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
    function_tool,
)
from agents.computer import AsyncComputer, Button, Computer, Environment
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseApplyPatchToolCall,
    ResponseCompletedEvent,
    ResponseComputerToolCall,
    ResponseCustomToolCall,
    ResponseFunctionShellToolCall,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_item import LocalShellCall

from scoutd.integrations.openai_agents import ScoutdInputFilter
from tests.integrations.replay import Events

FORMAT = "openai-responses"
KINDS = ("function", "local_shell", "shell", "apply_patch", "computer", "custom")
# call item type -> the output item type the SDK answers it with
OUTPUT_OF = {
    "function_call": "function_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "computer_call": "computer_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
CALL_OF = {output: call for call, output in OUTPUT_OF.items()}
SCREENSHOT = base64.b64encode(b"\x89PNG\r\n\x1a\n a tiny fake screenshot").decode()
TURNS = 36
FINAL = "all done"


def body(tag: str, index: int) -> str:
    """A tool's text for call ``index``: about 1.5 KB of numbered lines, unique to it."""
    lines = [f"{tag} #{index} line {n}: " + "abcdefghij" * 4 for n in range(28)]
    return "\n".join(lines)


def plan(turn: int) -> list[str]:
    """The kinds of the calls the model makes at ``turn``: one, or three in parallel."""
    if turn % 7 == 6:
        return [KINDS[turn % 6], KINDS[(turn + 2) % 6], KINDS[(turn + 4) % 6]]
    return [KINDS[turn % 6]]


@dataclass
class Record:
    """What each tool answered, by call id, as the text a recall of it gives back."""

    answers: dict[str, str] = field(default_factory=dict)
    patch_ids: dict[str, str] = field(default_factory=dict)  # file path -> call id
    actions: list[str] = field(default_factory=list)


class FakeComputer(Computer):
    """A synchronous computer: every action is logged, every screenshot the same."""

    def __init__(self, record: Record) -> None:
        self.record = record

    @property
    def environment(self) -> Environment:
        return "ubuntu"

    @property
    def dimensions(self) -> tuple[int, int]:
        return (640, 480)

    def screenshot(self) -> str:
        return SCREENSHOT

    def click(self, x: int, y: int, button: Button) -> None:
        self.record.actions.append(f"click {x} {y} {button}")

    def double_click(self, x: int, y: int) -> None:
        self.record.actions.append(f"double_click {x} {y}")

    def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int) -> None:
        self.record.actions.append(f"scroll {x} {y}")

    def type(self, text: str) -> None:
        self.record.actions.append(f"type {text}")

    def wait(self) -> None:
        self.record.actions.append("wait")

    def move(self, x: int, y: int) -> None:
        self.record.actions.append(f"move {x} {y}")

    def keypress(self, keys: list[str]) -> None:
        self.record.actions.append(f"keypress {keys}")

    def drag(self, path: list[tuple[int, int]]) -> None:
        self.record.actions.append(f"drag {path}")


class FakeAsyncComputer(AsyncComputer):
    """The same computer, asynchronous."""

    def __init__(self, record: Record) -> None:
        self.sync = FakeComputer(record)

    @property
    def environment(self) -> Environment:
        return "ubuntu"

    @property
    def dimensions(self) -> tuple[int, int]:
        return (640, 480)

    async def screenshot(self) -> str:
        return self.sync.screenshot()

    async def click(self, x: int, y: int, button: Button) -> None:
        self.sync.click(x, y, button)

    async def double_click(self, x: int, y: int) -> None:
        self.sync.double_click(x, y)

    async def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int) -> None:
        self.sync.scroll(x, y, scroll_x, scroll_y)

    async def type(self, text: str) -> None:
        self.sync.type(text)

    async def wait(self) -> None:
        self.sync.wait()

    async def move(self, x: int, y: int) -> None:
        self.sync.move(x, y)

    async def keypress(self, keys: list[str]) -> None:
        self.sync.keypress(keys)

    async def drag(self, path: list[tuple[int, int]]) -> None:
        self.sync.drag(path)


class Editor:
    """An editor that applies nothing and logs a long line per operation."""

    def __init__(self, record: Record) -> None:
        self.record = record

    def _log(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        call_id = self.record.patch_ids[operation.path]
        log = body(f"patched {operation.path} ({operation.type})", len(self.record.answers))
        self.record.answers[call_id] = log
        return ApplyPatchResult(status="completed", output=log)

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return self._log(operation)

    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return self._log(operation)

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return self._log(operation)


def make_tools(record: Record, *, asynchronous: bool = False) -> list[Any]:
    """The SDK's built-in tools and a function tool, each logging its answer in ``record``."""

    @function_tool
    def bash(ctx: ToolContext[Any], command: str) -> str:
        """Run a shell command and return its output."""
        record.answers[ctx.tool_call_id] = body(f"bash {command}", len(record.answers))
        return record.answers[ctx.tool_call_id]

    def local_shell(request: LocalShellCommandRequest) -> str:
        call = request.data
        record.answers[call.call_id] = body(" ".join(call.action.command), len(record.answers))
        return record.answers[call.call_id]

    def shell(request: ShellCommandRequest) -> ShellResult:
        data = request.data
        stdout = body(data.action.commands[0], len(record.answers))
        stderr = f"warning: {data.call_id} wrote to stderr"
        record.answers[data.call_id] = f"{stdout}\n{stderr}"  # a recall joins them so
        return ShellResult(output=[ShellCommandOutput(stdout=stdout, stderr=stderr)])

    def grep(ctx: ToolContext[Any], text: str) -> str:
        record.answers[ctx.tool_call_id] = body(f"grep {text}", len(record.answers))
        return record.answers[ctx.tool_call_id]

    computer: Any = FakeAsyncComputer(record) if asynchronous else FakeComputer(record)
    return [
        bash,
        LocalShellTool(executor=local_shell),
        ShellTool(executor=shell),
        ApplyPatchTool(editor=Editor(record)),
        ComputerTool(computer=computer),
        CustomTool(
            name="grep", description="Search files: the input is a pattern.", on_invoke_tool=grep
        ),
    ]


def call_item(kind: str, call_id: str, turn: int, record: Record) -> Any:
    """The model's output item of a call of ``kind``, as the Responses API returns it."""
    n = call_id.split("_", 1)[1]
    if kind == "function":
        arguments = json.dumps({"command": f"cat notes_{n}.txt"})
        return ResponseFunctionToolCall(
            type="function_call", call_id=call_id, name="bash", arguments=arguments, id=f"fc_{n}"
        )
    if kind == "custom":
        pattern = f"TODO\\({n}\\)"
        return ResponseCustomToolCall(
            type="custom_tool_call", call_id=call_id, name="grep", input=pattern, id=f"ct_{n}"
        )
    item: dict[str, Any] = {"call_id": call_id, "status": "completed"}
    if kind == "local_shell":
        action = {"type": "exec", "command": ["ls", "-l", f"dir_{n}"], "env": {}}
        item |= {"type": "local_shell_call", "id": f"lsh_{n}", "action": action}
        return LocalShellCall.model_validate(item)
    if kind == "shell":
        action = {"commands": [f"grep -rn todo src_{n}"]}
        item |= {"type": "shell_call", "id": f"sh_{n}", "action": action}
        return ResponseFunctionShellToolCall.model_validate(item)
    if kind == "apply_patch":
        path = f"src/module_{n}.py"
        record.patch_ids[path] = call_id
        operation = {"type": "update_file", "path": path, "diff": body(f"+ change {n}", turn)}
        item |= {"type": "apply_patch_call", "id": f"ap_{n}", "operation": operation}
        return ResponseApplyPatchToolCall.model_validate(item)
    assert kind == "computer"
    record.answers[call_id] = "[image]"  # what a recall of a screenshot gives
    click: dict[str, Any] = {"type": "click", "x": turn, "y": 2 * turn, "button": "left"}
    item |= {
        "type": "computer_call",
        "id": f"cu_{n}",
        "pending_safety_checks": [],
        "action": click,
    }
    return ResponseComputerToolCall.model_validate(item)


def final_message(text: str) -> ResponseOutputMessage:
    """The model's closing answer: a message and no call, which ends the run."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    fields = {"id": "msg_final", "role": "assistant", "status": "completed", "content": content}
    return ResponseOutputMessage.model_validate({"type": "message", **fields})


class ScriptedModel(Model):
    """Calls the planned tools turn after turn, then answers :data:`FINAL`; records its input.

    :meth:`decide` may be replaced (the recall script) to choose a turn's output.
    """

    def __init__(self, record: Record, events: Events | None = None, turns: int = TURNS) -> None:
        self.record = record
        self.events = events
        self.turns = turns
        self.seen: list[list[Any]] = []
        self.full: list[list[Any]] = []  # the histories the SDK held, filled by the hook

    def decide(self, turn: int, items: list[Any]) -> list[Any]:
        """The output items of the model's answer at ``turn`` (0-based)."""
        if turn >= self.turns:
            return [final_message(FINAL)]
        out: list[Any] = [ResponseReasoningItem(type="reasoning", id=f"rs_{turn}", summary=[])]
        for k, kind in enumerate(plan(turn)):
            out.append(call_item(kind, f"call_{turn}x{k}", turn, self.record))
        return out

    def _answer(self, items: Any) -> list[Any]:
        self.seen.append(list(items))
        turn = len(self.seen) - 1
        if self.events is not None:
            self.events.model_called()
        return self.decide(turn, self.seen[-1])

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        return ModelResponse(output=self._answer(input), usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        output = self._answer(input)
        response = Response(
            id=f"resp_{len(self.seen)}",
            created_at=0,
            model="scripted",
            object="response",
            output=output,
            parallel_tool_calls=True,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )


@dataclass
class Run:
    """One SDK run: its result (or what it raised), the model, the histories the hook got."""

    result: Any
    model: ScriptedModel
    full: list[list[Any]]
    record: Record


def agent_and_config(
    scoutd_filter: ScoutdInputFilter, model: ScriptedModel, *, asynchronous: bool = False
) -> tuple[Agent[Any], RunConfig, list[list[Any]]]:
    """The agent with every tool (and recall), and a run config recording each history."""
    full = model.full

    async def recording(data: CallModelData[Any]) -> ModelInputData:
        full.append(list(data.model_data.input))  # what the SDK holds
        return await scoutd_filter(data)

    tools: list[Any] = [*make_tools(model.record, asynchronous=asynchronous)]
    tools.append(scoutd_filter.recall_tool)
    agent = Agent(name="operator", instructions="use the tools", model=model, tools=tools)
    config = RunConfig(call_model_input_filter=recording, tracing_disabled=True)
    return agent, config, full


async def run_async(
    scoutd_filter: ScoutdInputFilter, model: ScriptedModel, *, streamed: bool = False
) -> Run:
    """``Runner.run`` (or ``run_streamed``, with the asynchronous computer) to its end."""
    agent, config, full = agent_and_config(scoutd_filter, model, asynchronous=streamed)
    result: Any
    try:
        if streamed:
            run = Runner.run_streamed(agent, "operate", run_config=config, max_turns=4 * TURNS)
            async for _ in run.stream_events():
                pass
            result = run
        else:
            result = await Runner.run(agent, "operate", run_config=config, max_turns=4 * TURNS)
    except Exception as exc:
        result = exc
    return Run(result, model, full, model.record)


def run_sync(scoutd_filter: ScoutdInputFilter, model: ScriptedModel) -> Run:
    """``Runner.run_sync`` to its end."""
    agent, config, full = agent_and_config(scoutd_filter, model)
    result = Runner.run_sync(agent, "operate", run_config=config, max_turns=4 * TURNS)
    return Run(result, model, full, model.record)
