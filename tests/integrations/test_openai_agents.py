"""The OpenAI Agents SDK's own run loop with scoutd's input filter (docs/INTEGRATIONS.md).

A scripted ``Model`` replays a recorded real run (tests/integrations/replay.py)
and a real ``bash`` function tool answers with the recorded outputs, so the
SDK's ``Runner.run`` does everything it does with a provider, without network.
Each scenario runs in process and through a real daemon subprocess.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")

from agents import Agent, FunctionTool, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import scoutd
from scoutd.inbox.aborted import clear
from scoutd.integrations.openai_agents import ScoutdInputFilter
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

pytestmark = pytest.mark.anyio

NOTICE_AT = 8
ABORT_AT = 5


class ScriptedModel(Model):
    """Answers each call with the next turn of the replay; records what it was sent."""

    def __init__(self, replay: Replay, events: Events) -> None:
        self.replay = replay
        self.events = events
        self.seen: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        assert system_instructions == self.replay.system  # instructions pass through
        self.seen.append(list(input))
        index = self.events.model_called()
        turn = self.replay.turn(index)
        output: list[Any] = []
        if turn.text:
            text = ResponseOutputText(type="output_text", text=turn.text, annotations=[])
            output.append(
                ResponseOutputMessage(
                    id=f"msg_{index}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            )
        for call_id, name, arguments in turn.calls:
            output.append(
                ResponseFunctionToolCall(
                    type="function_call", call_id=call_id, name=name, arguments=arguments
                )
            )
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run Runner.run, not streaming")


def bash_tool(replay: Replay) -> FunctionTool:
    @function_tool
    def bash(ctx: ToolContext[Any], command: str) -> str:
        """Run a shell command and return its output."""
        return replay.outputs[ctx.tool_call_id]

    return bash


async def run_replay(
    scoutd_filter: ScoutdInputFilter, replay: Replay, events: Events, *, streamed: bool = False
) -> tuple[Any, ScriptedModel, list[list[Any]]]:
    """Run the SDK's loop; return its result (or the exception), the model, the histories."""
    model = ScriptedModel(replay, events)
    agent = Agent(name="coder", instructions=replay.system, model=model, tools=[bash_tool(replay)])
    full: list[list[Any]] = []

    async def recording(data: CallModelData[Any]) -> ModelInputData:
        full.append(list(data.model_data.input))  # what the framework holds
        return await scoutd_filter(data)

    config = RunConfig(call_model_input_filter=recording, tracing_disabled=True)
    try:
        if streamed:
            run = Runner.run_streamed(agent, replay.task, run_config=config, max_turns=200)
            async for _ in run.stream_events():
                pass
            result: Any = run
        else:
            result = await Runner.run(agent, replay.task, run_config=config, max_turns=200)
    except Exception as exc:
        result = exc
    return result, model, full


async def test_whole_run_sees_prepared_prompts(socket: tuple[str | None, str]) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, notice_at=NOTICE_AT)
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        result, model, full = await run_replay(f, replay, events)
    assert not isinstance(result, BaseException), result
    assert result.final_output == replay.final
    assert len(model.seen) == len(replay.turns) == len(full)
    expected = [
        scoutd.prepare(h, config=RECALL_CONFIG, format="openai-responses").messages for h in full
    ]
    check_rounds(full, model.seen, expected, NOTICE_AT)
    # The SDK's own history holds every recorded output, whole, and no notice.
    history = result.to_input_list()
    outputs = [i["output"] for i in history if i.get("type") == "function_call_output"]
    assert outputs == [replay.outputs[c[0]] for t in replay.turns for c in t.calls]
    assert not contains(history, NOTICE) and not contains(history, "[Context compaction]")
    check_one_daemon_session(socket_path, directory)


async def test_abort_stops_the_run_before_the_next_model_call(
    socket: tuple[str | None, str],
) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, abort_at=ABORT_AT)
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        result, model, full = await run_replay(f, replay, events)
        assert isinstance(result, scoutd.Aborted), result
        assert result.reason == ABORT_REASON
        # The model answered calls 0..ABORT_AT; the next call never reached it.
        assert len(model.seen) == ABORT_AT + 1
        assert len(full) == ABORT_AT + 2
        # Fail closed: the filter keeps refusing after the abort file was consumed.
        with pytest.raises(scoutd.Aborted, match="budget exceeded"):
            f.prepare_items(full[-1])


async def test_an_aborted_chat_stays_aborted_at_the_next_run(
    socket: tuple[str | None, str],
) -> None:
    """The abort file went with the first run; a later run, with this filter or a new
    one, never reaches the model until an operator clears the chat.

    One filter per run is the documented use: a new filter used to find no
    abort file, and its run went on.
    """
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as first:
        result, model, _ = await run_replay(first, replay, Events(save_file, abort_at=ABORT_AT))
        assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
        assert len(model.seen) == ABORT_AT + 1
        result, model, full = await run_replay(first, replay, Events(save_file))
        assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
        assert model.seen == [] and len(full) == 1
    for streamed in (False, True):  # a new run, as the next Runner.run makes it
        with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
            result, model, full = await run_replay(f, replay, Events(save_file), streamed=streamed)
            assert isinstance(result, scoutd.Aborted), result
            assert result.reason == ABORT_REASON
            assert model.seen == [] and len(full) == 1
    clear(save_file)  # the operator lifts it: the next run goes to its end
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as cleared:
        result, model, _ = await run_replay(cleared, replay, Events(save_file))
    assert not isinstance(result, BaseException), result
    assert result.final_output == replay.final
