"""One Pydantic AI capability handed several conversations (docs/RELIABILITY.md, rule 30).

Agent delegation: an agent's tool runs another agent (or the same one) that
shares the capability object, while runs of the outer agent overlap. Pydantic AI
asks the capability for a fresh instance per run (``for_run``) and takes the
recall tool from that instance: each conversation recalls only its own outputs.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from scoutd.integrations.pydantic_ai import ScoutdCapability
from tests.integrations.test_pydantic_ai import tool_returns

TIMEOUT = 30.0
# Outputs each conversation makes with bash before it recalls (the outer ones also
# delegate once, after their first output).
OUTPUTS = {"A": 3, "B": 2, "sub-A": 1, "sub-B": 4}
HANDLES = 5


def output_of(who: str, n: int) -> str:
    """Conversation ``who``'s output ``n``: its secret and enough lines to be shortened."""
    return f"secret of {who}: {n}\n" + "a line of output\n" * 300


def expected(who: str) -> list[str]:
    """The recall answers of ``who`` for handles #1..#5: its own tool outputs in order."""
    own: list[str] = []
    for n in range(1, OUTPUTS[who] + 1):
        own.append(output_of(who, n))
        if n == 1 and not who.startswith("sub-"):
            own.append(f"sub-{who} done")  # the delegate tool's answer is output #2
    return [
        own[k] if k < len(own) else f"no output #{k + 1}: this conversation has" for k in range(5)
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("same_agent", [False, True], ids=["two agents", "one agent"])
async def test_delegated_runs_recall_only_their_own(
    socket: tuple[str | None, str], same_agent: bool
) -> None:
    """Two outer runs at once, each delegating to a sub-agent run with the same capability
    object: the four conversations recall their own outputs, each while all are live."""
    recalling = {who: asyncio.Event() for who in OUTPUTS}
    turns: dict[str, int] = {}

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        who = str(getattr(messages[0].parts[-1], "content", ""))
        turn = turns[who] = turns.get(who, 0) + 1
        outer = not who.startswith("sub-")
        k = turn - (1 if outer and turn > 2 else 0)
        if outer and turn == 2:
            return ModelResponse(parts=[ToolCallPart("delegate", {"who": who}, "d")])
        if k <= OUTPUTS[who]:
            call = ToolCallPart("bash", {"command": f"{who} {k}"}, tool_call_id=f"b{k}")
            return ModelResponse(parts=[call])
        if k == OUTPUTS[who] + 1:
            recalling[who].set()
            if not outer:  # a sub-agent recalls once every other conversation is live
                await asyncio.wait_for(
                    recalling[f"sub-{'B' if who == 'sub-A' else 'A'}"].wait(), TIMEOUT
                )
            calls = [
                ToolCallPart("recall", {"handle": f"#{n}"}, tool_call_id=f"r{n}")
                for n in range(1, HANDLES + 1)
            ]
            return ModelResponse(parts=list(calls))
        return ModelResponse(parts=[TextPart(f"{who} done")])

    socket_path, directory = socket
    capability = ScoutdCapability(
        save_file=os.path.join(directory, "deleg.chat"), socket=socket_path
    )
    outer = Agent(FunctionModel(model), capabilities=[capability])
    inner = outer if same_agent else Agent(FunctionModel(model), capabilities=[capability])
    sub_results: dict[str, Any] = {}

    @outer.tool_plain
    def bash(command: str) -> str:
        """Run a shell command and return its output."""
        who, n = command.split()
        return output_of(who, int(n))

    if not same_agent:
        inner.tool_plain(bash)

    @outer.tool_plain
    async def delegate(who: str) -> str:
        """Hand a task to a sub-agent."""
        result = await inner.run(f"sub-{who}")
        sub_results[who] = result
        return str(result.output)

    runs = [outer.run(who) for who in "AB"]
    results = await asyncio.wait_for(asyncio.gather(*runs), 2 * TIMEOUT)
    conversations = 0
    for who, result in zip("AB", results, strict=True):
        for name, run in ((who, result), (f"sub-{who}", sub_results[who])):
            assert run.output == f"{name} done"
            returned = tool_returns(run.all_messages())
            answers = [str(returned[f"r{n}"]) for n in range(1, HANDLES + 1)]
            for n, (answer, want) in enumerate(zip(answers, expected(name), strict=True), 1):
                assert (
                    answer.startswith(want) if want.startswith("no output") else answer == want
                ), (
                    name,
                    n,
                    answer[:60],
                )
            conversations += 1
    assert conversations == 4
