"""``scoutd explain`` in a provider format: its row numbers and its counts agree."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import scoutd
from scoutd.formats import scout_view
from scoutd.testing import conversation

from .helpers import ROOT, run


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("anthropic.json", "anthropic"), ("openai_responses.json", "openai-responses")],
)
def test_the_footer_counts_what_the_rows_number(home: Path, name: str, fmt: str) -> None:
    path = ROOT / "examples" / "chats" / name
    document = json.loads(path.read_text(encoding="utf-8"))
    messages = document["messages"] if isinstance(document, dict) else document
    result = run(home, "explain", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = [int(line.split()[0]) for line in lines[:-1] if line.strip()[:1].isdigit()]
    view = len(scout_view(messages, fmt))
    assert rows and max(rows) < view
    counts = f"{len(messages)} messages in, {len(messages)} messages out"
    if view != len(messages):  # rows numbered past the input's count: both counts given
        counts += f" (the # column numbers the {view} of the scout view)"
    assert lines[-1].startswith(f"{counts}; {fmt} format, stable prefix ")


def test_in_scout_format_the_footer_is_plain(home: Path) -> None:
    result = run(home, "explain", str(ROOT / "examples" / "chats" / "scout.json"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("26 messages in, 26 messages out; scout")


def test_explain_says_why_in_text_and_in_json(home: Path) -> None:
    """The strategy's reason under its counts, one per row; the same reasons in --json."""
    messages = conversation(40, user_every=0, output_size=1500)
    source = home / "chat.json"
    source.write_text(json.dumps(messages), encoding="utf-8")
    expected = scoutd.prepare(messages, "shorten_tools_cost_aware", detail=True).report[0]
    assert expected.reason is not None and expected.reason.code == "not_paying"
    text = run(home, "explain", str(source), "--strategies", "shorten_tools_cost_aware")
    assert text.returncode == 0, text.stderr
    section = text.stdout.split("\n\n")[0].splitlines()
    assert section[-1] == f"  why: {expected.reason.text}"
    assert section[-1].startswith("  why: compaction does not pay yet: it would remove ")
    assert expected.actions is not None
    rows = section[2:-2]
    assert len(rows) == len(expected.actions)
    assert all(
        row.endswith(action.why or "-") for row, action in zip(rows, expected.actions, strict=True)
    )
    as_json = run(
        home, "explain", "--json", str(source), "--strategies", "shorten_tools_cost_aware"
    )
    assert as_json.returncode == 0, as_json.stderr
    (report,) = json.loads(as_json.stdout)
    assert report["reason"] == msgspec.to_builtins(expected.reason)
    assert report["reason"]["removed_tokens"] > 0 and report["reason"]["more_tokens"] > 0
    assert [(a["reason"], a["why"]) for a in report["actions"]] == [
        (a.reason, a.why) for a in expected.actions
    ]
