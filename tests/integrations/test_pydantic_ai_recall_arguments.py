"""What a hostile model sends to the ``recall`` tool of the Pydantic AI capability.

Pydantic AI checks nothing of a schema tool's arguments and calls its function
with ``**`` them: arguments that are not a JSON object, or an object with a
``self`` key, used to end the run with a ``TypeError`` (``null``: an
``AssertionError``). Each must get a tool answer in the agent's real loop and
the run must go on to its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from scoutd.integrations.pydantic_ai import ScoutdCapability
from tests.integrations.test_pydantic_ai import close_the_loop_run_sync_left

NOT_AN_OBJECT = 'the recall arguments must be a JSON object: {"handle": "#37"}'
CASES = [
    ("[1, 2]", NOT_AN_OBJECT),
    ('"#1"', NOT_AN_OBJECT),
    ("123", NOT_AN_OBJECT),
    ("null", NOT_AN_OBJECT),
    ('{"self": 1}', "unknown recall arguments: self (handle, search)"),
    ('{"handle": "#1", "self": "x"}', "unknown recall arguments: self (handle, search)"),
    ('{"handle": {"a": 1}}', "handle and search must be strings"),
]


@pytest.mark.parametrize(("arguments", "expected"), CASES)
def test_any_arguments_get_a_tool_answer_and_the_run_goes_on(
    tmp_path: Path, arguments: str, expected: str
) -> None:
    answers: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("recall", arguments, tool_call_id="r1")])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        answers.extend(getattr(part, "content", None) for part in last.parts)
        return ModelResponse(parts=[TextPart("done")])

    capability = ScoutdCapability(save_file=str(tmp_path / "run.chat"))
    agent = Agent(FunctionModel(model), capabilities=[capability])
    try:
        result = agent.run_sync("go")
    finally:
        close_the_loop_run_sync_left()
    assert result.output == "done"
    assert answers == [expected]
