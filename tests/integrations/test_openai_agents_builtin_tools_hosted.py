"""A provider-run shell inside a model response, through the OpenAI Agents SDK.

With ``ShellTool(environment={"type": "container_auto"})`` the provider runs the
commands: one response of a reasoning model holds its ``reasoning`` item, the
``shell_call``, the ``shell_call_output`` the provider wrote, and then a
``function_call`` the SDK runs. The API takes such a function call back only
with the reasoning item of its response (else: "Item 'fc_...' of type
'function_call' was provided without its required 'reasoning' item"), so when
scoutd drops the old shell pair the reasoning must stay with the function call.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")

from agents import Runner, ShellTool
from openai.types.responses import (
    ResponseFunctionShellToolCall,
    ResponseFunctionToolCall,
    ResponseReasoningItem,
)
from openai.types.responses.response_function_shell_tool_call_output import (
    ResponseFunctionShellToolCallOutput,
)

import scoutd
from scoutd.integrations.openai_agents import ScoutdInputFilter
from tests.integrations.replay import CONFIG, RECALL_CONFIG
from tests.integrations.test_openai_agents_builtin_tools import check_valid
from tests.integrations.test_openai_agents_builtin_tools_support import (
    FINAL,
    FORMAT,
    Record,
    ScriptedModel,
    agent_and_config,
    body,
    final_message,
)

pytestmark = pytest.mark.anyio

TURNS = 30


class HostedShellModel(ScriptedModel):
    """Each response: reasoning, a hosted shell call and its output, then a function call."""

    def decide(self, turn: int, items: list[Any]) -> list[Any]:
        if turn >= TURNS:
            return [final_message(FINAL)]
        output = {
            "stdout": body("hosted ls", turn),
            "stderr": "",
            "outcome": {"type": "exit", "exit_code": 0},
        }
        shell = {"call_id": f"hosted_{turn}", "status": "completed"}
        arguments = json.dumps({"command": f"cat notes_{turn}.txt"})
        return [
            ResponseReasoningItem(type="reasoning", id=f"rs_{turn}", summary=[]),
            ResponseFunctionShellToolCall.model_validate(
                {**shell, "type": "shell_call", "id": f"sh_{turn}", "action": {"commands": ["ls"]}}
            ),
            ResponseFunctionShellToolCallOutput.model_validate(
                {**shell, "type": "shell_call_output", "id": f"sho_{turn}", "output": [output]}
            ),
            ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{turn}",
                call_id=f"call_{turn}",
                name="bash",
                arguments=arguments,
            ),
        ]


def without_reasoning(prompt: list[Any]) -> list[str]:
    """The items of a response sent without that response's reasoning item."""
    sent = {item.get("id") for item in prompt}
    return [
        item["id"]
        for item in prompt
        if str(item.get("id")).split("_")[0] in ("sh", "sho", "fc")
        and f"rs_{item['id'].split('_')[1]}" not in sent
    ]


async def test_a_function_call_keeps_its_reasoning_when_the_hosted_shell_pair_goes(
    socket: tuple[str | None, str],
) -> None:
    socket_path, directory = socket
    model = HostedShellModel(Record(), turns=TURNS)
    save_file = os.path.join(directory, "hosted.chat")
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        agent, config, full = agent_and_config(f, model)
        hosted = ShellTool(environment={"type": "container_auto"})
        agent = agent.clone(tools=[agent.tools[0], hosted, f.recall_tool])

        result = await Runner.run(agent, "operate", run_config=config, max_turns=2 * TURNS)
    assert result.final_output == FINAL
    dropped = orphaned = 0
    for history, prompt in zip(full, model.seen, strict=True):
        assert prompt == scoutd.prepare(history, config=RECALL_CONFIG, format=FORMAT).messages
        check_valid(prompt)
        sent = {item.get("id") for item in prompt}
        dropped += sum(f"sh_{t}" not in sent and f"fc_{t}" in sent for t in range(TURNS))
        orphaned += len(without_reasoning(prompt))
    assert dropped >= 5, dropped  # shell pairs dropped while their response's call stayed
    assert orphaned == 0, f"{orphaned} items sent without their response's reasoning"
