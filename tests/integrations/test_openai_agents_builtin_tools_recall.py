"""Recall and abort with the OpenAI Agents SDK's built-in tools, end to end.

The scripted model of ``test_openai_agents_builtin_tools_support.py`` works on until
its prompt names, for each kind of tool, an output that scoutd shortened
(``recall #N`` in its marker) or removed (the notice's ``removed here``); it
then calls the filter's ``recall`` tool with that handle. Each answer must be
the tool's original output, as docs/STRATEGIES.md ("Recall") gives each kind
back: the text, a shell output's stdout and stderr on lines of their own, an
apply_patch log, a screenshot as ``[image]``. An operator's ``abort`` stops a
run whose last turn called the SDK's own tools, as it stops one of function
tools.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")

from openai.types.responses import ResponseFunctionToolCall

import scoutd
from scoutd.integrations.openai_agents import ScoutdInputFilter
from tests.integrations.replay import ABORT_REASON, CONFIG, RECALL_CONFIG, Events
from tests.integrations.test_openai_agents_builtin_tools import check_valid
from tests.integrations.test_openai_agents_builtin_tools_support import (
    CALL_OF,
    FINAL,
    FORMAT,
    OUTPUT_OF,
    Record,
    ScriptedModel,
    final_message,
    run_async,
)

pytestmark = pytest.mark.anyio

PLACEHOLDER = re.compile(r"recall #(\d+)\)")
REMOVED = re.compile(r"removed here: ([#\d, -]+)")
MAX_TURNS = 120


def removed_handles(text: str) -> set[int]:
    """The handles a compaction notice lists as removed (``#1-#4, #7``)."""
    found: set[int] = set()
    for listed in REMOVED.findall(text):
        for run in listed.split(","):
            bounds = [int(b) for b in re.findall(r"#(\d+)", run)]
            if bounds:
                found.update(range(bounds[0], bounds[-1] + 1))
    return found


class Recaller(ScriptedModel):
    """Works through the planned tools; recalls one output of each kind once it can."""

    def __init__(self, record: Record) -> None:
        super().__init__(record, turns=MAX_TURNS)
        self.expected: dict[str, str] = {}  # recall call id -> the original output
        self.recalled: dict[str, str] = {}  # call kind -> the recall call id
        self.shown: dict[str, str] = {}  # recall call id -> "shortened" / "removed"
        self.work = 0

    def outputs(self) -> list[Any]:
        """The output items of the SDK's history, oldest first: handle N is the Nth."""
        return [item for item in self.full[-1] if item.get("type") in CALL_OF]

    def decide(self, turn: int, items: list[Any]) -> list[Any]:
        assert turn < MAX_TURNS - 1, f"recalled only {sorted(self.recalled)}"
        if len(self.recalled) == len(OUTPUT_OF):
            return [final_message(FINAL)]
        text = json.dumps(items)
        shortened = {int(h) for h in PLACEHOLDER.findall(text)}
        visible = sorted(shortened | removed_handles(text))
        outputs = self.outputs()
        kinds = {
            item["call_id"]: item["type"] for item in self.full[-1] if item.get("type") in OUTPUT_OF
        }
        for handle in visible:
            output = outputs[handle - 1]
            kind = kinds[output["call_id"]]
            if kind in self.recalled or output["call_id"] not in self.record.answers:
                continue
            call_id = f"recall_{turn}"
            self.recalled[kind] = call_id
            self.expected[call_id] = self.record.answers[output["call_id"]]
            self.shown[call_id] = "shortened" if handle in shortened else "removed"
            arguments = json.dumps({"handle": f"#{handle}"})
            return [
                ResponseFunctionToolCall(
                    type="function_call", call_id=call_id, name="recall", arguments=arguments
                )
            ]
        self.work += 1
        return super().decide(self.work, items)


async def test_recall_gives_back_each_kind_of_output(socket: tuple[str | None, str]) -> None:
    socket_path, directory = socket
    save_file = os.path.join(directory, "recall.chat")
    model = Recaller(Record())
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        run = await run_async(f, model)
    assert not isinstance(run.result, BaseException), run.result
    assert run.result.final_output == FINAL
    assert sorted(model.recalled) == sorted(OUTPUT_OF)
    history = run.result.to_input_list()
    answers = {
        i["call_id"]: i["output"] for i in history if i.get("type") == "function_call_output"
    }
    for kind, call_id in model.recalled.items():
        assert answers[call_id] == model.expected[call_id], kind
        # the next request carries it whole, after its call
        turn = int(call_id.removeprefix("recall_"))
        sent = {i["type"]: i for i in model.seen[turn + 1] if i.get("call_id") == call_id}
        assert sent["function_call_output"]["output"] == model.expected[call_id], kind
    # the screenshot was only ever removed; the others were reached as placeholders too
    assert model.shown[model.recalled["computer_call"]] == "removed"
    assert list(model.shown.values()).count("shortened") >= 2, model.shown
    for held, prompt in zip(model.full, model.seen, strict=True):
        check_valid(prompt)
        assert prompt == scoutd.prepare(held, config=RECALL_CONFIG, format=FORMAT).messages


ABORT_AT = 10  # the model's turn 10 calls the computer


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_abort_stops_a_run_of_builtin_tools(
    socket: tuple[str | None, str], streamed: bool
) -> None:
    socket_path, directory = socket
    save_file = os.path.join(directory, "abort.chat")
    record = Record()
    model = ScriptedModel(record, Events(save_file, abort_at=ABORT_AT))
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        run = await run_async(f, model, streamed=streamed)
        assert isinstance(run.result, scoutd.Aborted), run.result
        assert run.result.reason == ABORT_REASON
        # the SDK ran the computer action of call ABORT_AT; the next call never came
        assert len(model.seen) == ABORT_AT + 1 and len(run.full) == ABORT_AT + 2
        assert run.full[-1][-1]["type"] == "computer_call_output"
        assert record.actions[-1] == f"click {ABORT_AT} {2 * ABORT_AT} left"
        # fail closed: the filter keeps refusing after the abort file was consumed
        with pytest.raises(scoutd.Aborted, match=ABORT_REASON):
            f.prepare_items(run.full[-1])
