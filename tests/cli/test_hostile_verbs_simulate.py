"""``scoutd simulate`` against hostile file names and counts.

A chat or runs file is named by whoever made it: escape sequences, newlines,
bytes that are not UTF-8. Its name is shown escaped in the table, held as text
in the JSON and in a plot's title; a count no run could reach is refused before
any work, not waited for.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .helpers import ROOT, one_error_line, run

OPENAI_CHAT = ROOT / "examples" / "chats" / "openai_chat.json"
FORGED = "x\x1b[2J\x9b\u202e\nforged"
NOT_UTF8 = os.fsdecode(b"x\xff")


def _copy(home: Path, name: str, *, runs: bool) -> str:
    """The example chat at ``home/name`` (as one run of a runs file if ``runs``)."""
    target = os.path.join(os.fsencode(home), os.fsencode(name))
    if runs:
        messages = json.loads(OPENAI_CHAT.read_text())
        with open(target, "w") as out:
            out.write(json.dumps({"messages": messages}) + "\n")
    else:
        shutil.copyfile(OPENAI_CHAT, target)
    return name


def _unprintable(text: str) -> list[str]:
    return [c for c in text if not c.isprintable() and c != "\n"]


@pytest.mark.parametrize("flag", ["--chat", "--runs"])
def test_a_file_name_is_escaped_in_the_table(home: Path, flag: str) -> None:
    """The header printed the name as it was: a cleared screen and a forged line."""
    name = _copy(home, FORGED + (".jsonl" if flag == "--runs" else ".json"), runs=flag == "--runs")
    result = run(home, "simulate", flag, name, "--strategies", "shorten_tools")
    assert result.returncode == 0, result.stderr
    assert _unprintable(result.stdout) == []
    assert "\\x1b[2J\\x9b\\u202e\\x0aforged" in result.stdout.splitlines()[0]


def test_a_name_that_is_not_utf8_is_text_in_the_json(home: Path) -> None:
    """It was ``unexpected error: UnicodeEncodeError`` and no output."""
    name = _copy(home, NOT_UTF8 + ".json", runs=False)
    result = run(home, "simulate", "--chat", name, "--strategies", "shorten_tools", "--json")
    assert result.returncode == 0, result.stderr
    workload = json.loads(result.stdout)["workload"]
    assert workload["source"] == workload["chat"] == "x\\xff.json"


@pytest.mark.parametrize(
    "args",
    [
        ("--calls", "5", "--user-turns", "99999999999"),
        ("--calls", "99999999999999999999"),
        ("--calls", "100001"),
    ],
)
def test_a_count_no_run_could_reach_is_refused_at_once(home: Path, args: tuple[str, ...]) -> None:
    """A run of 5 calls with 10^11 user turns spent minutes placing the turns before
    the replay; 10^20 calls never ended (``run`` raised ``TimeoutExpired``)."""
    result = run(home, "simulate", *args, "--strategies", "none")
    assert result.returncode == 2, result
    flag, count = args[-2:]
    assert one_error_line(result) == f"scoutd simulate: {flag} {count}: at most 100,000"


def test_the_bound_itself_is_accepted(home: Path) -> None:
    """100,000 user turns on a short run: placed at once (the set holds one per call)."""
    result = run(home, "simulate", "--calls", "5", "--user-turns", "100000", "--strategies", "none")
    assert result.returncode == 0, result.stderr
    assert "100000 user turns" in result.stdout


def test_a_runs_name_that_is_not_utf8_titles_a_plot(home: Path) -> None:
    """matplotlib refused the title: ``unexpected error: TypeError: set_text(): ...``,
    a line of some 700 characters."""
    pytest.importorskip("matplotlib")
    name = _copy(home, NOT_UTF8 + ".jsonl", runs=True)
    plot = home / "harm.png"
    result = run(
        home, "simulate", "--runs", name, "--strategies", "shorten_tools", "--plot", str(plot)
    )
    assert result.returncode == 0, result.stderr
    assert plot.stat().st_size > 0
