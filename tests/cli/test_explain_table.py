"""The text table of ``scoutd explain`` (``scoutd/cli/explain_table.py``), in this process.

Whole lines written out by hand: the columns' widths and alignment, the
agent's ids and names made one safe line and cut, the counts line and the
reason. The CLI tests (test_explain_counts.py and others) read the same
table from the real command.
"""

from __future__ import annotations

from typing import Any

from scoutd.cli.explain_table import explain_lines
from scoutd.protocol.report import Reason, StrategyReport, ToolAction


def action(index: int, **fields: Any) -> ToolAction:
    given: dict[str, Any] = {
        "role": "function_call_output",
        "id": "c1",
        "name": "bash",
        "position": 1,
        "action": "kept",
        "chars_before": 5,
        "chars_after": 5,
        **fields,
    }
    return ToolAction(index=index, **given)


def report(**fields: Any) -> StrategyReport:
    return StrategyReport(strategy="shorten_tools", **fields)


COUNTS_NONE = (
    "  calls: 0 kept, 0 protected, 0 truncated, 0 dropped; outputs: 0 kept, 0 protected,"
    " 0 truncated, 0 dropped; chars: 0 -> 0; notice: no; inbox delivered: 0"
)


def test_a_report_without_detail_or_without_tool_messages_says_so() -> None:
    assert explain_lines(report()) == [
        "strategy shorten_tools",
        "  (no per-message detail from this strategy)",
        COUNTS_NONE,
    ]
    assert explain_lines(report(actions=[])) == [
        "strategy shorten_tools",
        "  (no tool messages)",
        COUNTS_NONE,
    ]


def test_each_count_is_named_by_its_own_field() -> None:
    counts = report(
        calls_kept=1,
        calls_protected=2,
        calls_truncated=3,
        calls_dropped=4,
        outputs_kept=5,
        outputs_protected=6,
        outputs_truncated=7,
        outputs_dropped=8,
        chars_before=900,
        chars_after=100,
        notice=True,
        inbox_delivered=2,
        reason=Reason(code="paid", text="compacting paid for itself"),
    )
    assert explain_lines(counts)[-2:] == [
        "  calls: 1 kept, 2 protected, 3 truncated, 4 dropped; outputs: 5 kept, 6 protected,"
        " 7 truncated, 8 dropped; chars: 900 -> 100; notice: inserted; inbox delivered: 2",
        "  why: compacting paid for itself",
    ]


def test_the_rows_line_up_numbers_right_and_text_left() -> None:
    rows = [
        action(3, id="call_a", name="read_file", position=2, chars_before=1200, chars_after=80),
        action(
            12,
            role="function_call",
            id=None,
            name="grep",
            position=10,
            action="truncated",
            chars_before=40,
            chars_after=40,
            why="older than the newest 20 outputs",
        ),
    ]
    lines = explain_lines(report(actions=rows))
    assert lines[:4] == [
        "strategy shorten_tools",
        "   #  role                  id      name       pos  action     chars       why",
        "   3  function_call_output  call_a  read_file    2  kept       1200 -> 80  -",
        "  12  function_call         -       grep        10  truncated  40 -> 40    "
        "older than the newest 20 outputs",
    ]


def test_an_agents_id_and_name_are_one_safe_line_cut_to_forty_characters() -> None:
    rows = [
        action(0, id="a\nb\x1b[2Jc", name="x" * 40),
        action(1, id={"not": "text"}, name="y" * 41),
        action(2, id=7, name="\u202eevil"),
    ]
    name, evil = "name" + " " * 36, "\\u202eevil" + " " * 30
    assert explain_lines(report(actions=rows))[1:5] == [
        f"  #  role                  id              {name}  pos  action  chars   why",
        f"  0  function_call_output  a b\\x1b[2Jc     {'x' * 40}    1  kept    5 -> 5  -",
        f'  1  function_call_output  {{"not":"text"}}  {"y" * 37}...    1  kept    5 -> 5  -',
        f"  2  function_call_output  7               {evil}    1  kept    5 -> 5  -",
    ]
