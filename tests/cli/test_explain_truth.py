"""``scoutd explain`` against the prompt: what its rows, counts and sentences say is true.

The chat: 135 reads of their own files, then one of them read again. The
default compacted at output 131 and keeps the read of ``f079.py`` whole as the
newest read of its file; the read two outputs later makes that untrue, and the
row must say so. The oracle counts the rows' actions and the characters of the
file and of the prompt the library prepares, not the report.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import scoutd

from ..strategies.test_reasons import run as equal_reads
from .helpers import run

STRATEGY = "shorten_tools_cost_aware"


def _chat() -> list[dict[str, str]]:
    messages = equal_reads(135)
    again = {"name": "read", "arguments": {"path": "f079.py"}, "id": "again"}
    output = {"name": "read", "content": "x" * 1500, "id": "again"}
    messages.append({"role": "function_call", "content": json.dumps(again)})
    messages.append({"role": "function_call_output", "content": json.dumps(output)})
    return messages


def test_the_table_says_what_the_prompt_shows(home: Path) -> None:
    messages = _chat()
    source = home / "chat.json"
    source.write_text(json.dumps(messages), encoding="utf-8")
    result = run(home, "explain", str(source), "--strategies", STRATEGY)
    assert result.returncode == 0, result.stderr
    section = result.stdout.split("\n\n")[0].splitlines()
    rows = [line for line in section if line.strip()[:1].isdigit()]
    assert len(rows) == 2 * 136
    actions: Counter[tuple[str, str]] = Counter()
    for line in rows:
        cells = line.split()
        actions[(cells[1], cells[5])] += 1
    prompt = scoutd.prepare(messages, STRATEGY).messages
    present = {id(m) for m in prompt}
    outputs = [m for m in messages if m["role"] == "function_call_output"]
    assert actions[("function_call_output", "kept")] + actions[
        ("function_call_output", "protected")
    ] == sum(id(m) in present for m in outputs)
    counts = next(line for line in section if line.startswith("  calls: "))
    for role, side in (("function_call", "calls"), ("function_call_output", "outputs")):
        said = re.search(
            rf"{side}: (\d+) kept, (\d+) protected, (\d+) truncated, (\d+) dropped", counts
        )
        assert said is not None
        assert [int(n) for n in said.groups()] == [
            actions[(role, fate)] for fate in ("kept", "protected", "truncated", "dropped")
        ]
    before = sum(len(m["content"]) for m in messages)
    after = sum(len(m["content"]) for m in prompt)
    assert f"chars: {before} -> {after}" in counts
    first = next(line for line in rows if line.split()[2] == "c079")  # f079.py, read first
    assert first.split()[5] == "protected"
    assert first.endswith(
        "kept whole: the newest whole read of its file at the last compaction;"
        " a newer read came since"
    )
    untouched = next(line for line in rows if line.split()[2] == "c078")  # f078.py, read once
    assert untouched.endswith("kept whole: the newest whole read of its file")
