"""``scoutd explain`` in a provider format: its row numbers and its counts agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoutd.formats import scout_view

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
