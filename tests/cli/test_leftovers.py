"""Command-line corners: names past NAME_MAX, the library's log lines, empty
file names and the simulator's header, each through a real ``scoutd`` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scoutd.inbox import inbox_dir
from scoutd.inbox.aborted import Cleared, clear, held, marker_paths

from .helpers import CLI_TIMEOUT, clean_environ, run

NOT_ABORTED = "scoutd: warning: the chat was not aborted: nothing to clear"
MESSAGES = json.dumps([{"role": "user", "content": "hi"}])


def _lines(stderr: str) -> list[str]:
    """Every stderr line: each the command's own (``scoutd...``), printable, once."""
    lines = stderr.splitlines()
    assert all(line.startswith("scoutd") for line in lines), stderr
    assert all(line.isprintable() for line in lines), stderr
    assert len(set(lines)) == len(lines), stderr
    return lines


# ---------------------------------------------------------------- clear past NAME_MAX


@pytest.mark.parametrize("stem", [250, 300])
def test_clear_of_a_name_no_inbox_can_have(home: Path, stem: int) -> None:
    """The save file's inbox name is over NAME_MAX (255): nothing can be there, so
    the chat is not aborted, with no "could not be removed" on the way."""
    save_file = home / ("a" * stem + ".chat")
    assert len(os.path.basename(inbox_dir(save_file))) > 255
    assert clear(save_file) == Cleared([], [], None)
    result = run(home, "clear", str(save_file))
    assert result.returncode == 0, result.stderr
    assert _lines(result.stderr) == [NOT_ABORTED]
    assert result.stdout == ""


def test_clear_of_a_chat_marked_in_its_inbox_only(home: Path) -> None:
    """A stem of 248: the inbox fits (254), the marker beside it does not (262);
    the abort's marker went into the inbox, and clear removes it without a word
    about the one that cannot exist."""
    save_file = home / ("b" * 248 + ".chat")
    beside, in_inbox = marker_paths(save_file)
    assert len(os.path.basename(beside)) > 255
    os.mkdir(inbox_dir(save_file))
    (home / "m.json").write_text(MESSAGES)
    # written, with a warning that its record directory's name is too long too
    run(home, "abort", str(save_file), "stop")
    assert os.path.isfile(os.path.join(inbox_dir(save_file), "abort"))
    aborted = run(home, "prepare", "--local", "--save-file", str(save_file), "m.json")
    assert aborted.returncode == 3, aborted.stderr
    assert os.path.lexists(in_inbox) and held(save_file) == "stop"
    result = run(home, "clear", str(save_file))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == [in_inbox]
    assert held(save_file) is None


# ---------------------------------------------------------------- the library's log lines


def test_a_broken_inbox_entry_is_told_once_as_the_commands_line(home: Path) -> None:
    """``prepare --local`` over an abort that is a FIFO: the library logs it on
    each pass; the command shows it once, prefixed, then fails with exit 3."""
    save_file = home / "agent.chat"
    inbox = Path(inbox_dir(save_file))
    inbox.mkdir()
    os.mkfifo(inbox / "abort")
    (home / "m.json").write_text(MESSAGES)
    result = run(home, "prepare", "--local", "--save-file", str(save_file), "m.json")
    assert result.returncode == 3, result.stderr
    lines = _lines(result.stderr)
    assert lines[-1] == "scoutd: aborted: aborted by operator (the abort entry is a FIFO; not read)"
    assert [line for line in lines if "FIFO: it aborts" in line] == [
        f"scoutd: error: abort entry {str(inbox / 'abort')!r} is a FIFO: it aborts all the"
        " same, unread"
    ]


def test_an_unusable_inbox_named_with_escapes_stays_on_printable_lines(home: Path) -> None:
    """The inbox is a symlink (never followed) and its name holds an escape
    sequence and a newline: every line is the command's, escaped."""
    chat_dir = home / "x\x1b[2Jy\nz"
    chat_dir.mkdir()
    save_file = chat_dir / "agent.chat"
    os.symlink(home, inbox_dir(save_file))
    (home / "m.json").write_text(MESSAGES)
    result = run(home, "prepare", "--local", "--save-file", str(save_file), "m.json")
    assert result.returncode == 3, result.stderr
    lines = _lines(result.stderr)
    assert lines[0].startswith("scoutd: error: inbox ")
    assert lines[-1].startswith("scoutd: aborted: the inbox ")
    assert len(lines) == 2


def test_notify_still_loads_no_logging(home: Path) -> None:
    """The light verb is spared the logging set-up (scripts/bench times it)."""
    (home / "agent.inbox").mkdir()
    code = (
        "import sys, scoutd.cli\n"
        "assert scoutd.cli.main(['notify', 'agent.chat', 'hi']) == 0\n"
        "assert 'logging' not in sys.modules, 'logging loaded'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=home,
        env={**clean_environ(), "SCOUTD_CONFIG": str(home / "empty.toml")},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(os.listdir(home / "agent.inbox")) == 1


# ---------------------------------------------------------------- empty file names


@pytest.mark.parametrize(
    "args",
    [
        ("--config", "", "status"),
        ("--config=", "status"),
        ("status", "--config", ""),
        ("config", "show", "--config", ""),
        ("prepare", "--local", "--config", "", "m.json"),
        ("--config", "", "simulate", "--calls", "5"),
        ("status", "--socket", ""),
        ("serve", "--socket", ""),
        ("config", "check", ""),
    ],
)
def test_an_empty_file_name_is_a_usage_error(home: Path, args: tuple[str, ...]) -> None:
    """``--config ''`` (a variable a script left empty) once read as no --config."""
    (home / "m.json").write_text(MESSAGES)
    result = run(home, *args)
    assert result.returncode == 2, result
    last = result.stderr.strip().splitlines()[-1]
    assert last.endswith("must name a file, got an empty string"), result.stderr
    assert result.stdout == ""


# ---------------------------------------------------------------- the simulator's header


def test_the_simulate_header_escapes_what_the_user_wrote(home: Path) -> None:
    notice = "\x1b[31mX\nforged line"
    chat = home / "c\x1b[2Jd.json"
    chat.write_text(MESSAGES)
    for args in (
        ("--calls", "5", "--set", f"compaction_notice={json.dumps(notice)}"),
        ("--chat", str(chat)),
    ):
        result = run(home, "simulate", "--strategies", "none", *args)
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout
        header = result.stdout.split("\n\n")[0].splitlines()
        assert all(line.isprintable() for line in header), header
        assert "forged line" not in result.stdout.splitlines()
    assert any("\\x1b[2Jd.json" in line for line in header), header


def test_the_simulate_table_escapes_a_swept_value(home: Path) -> None:
    """A swept string is a row's label: escaped as in the header."""
    result = run(
        home,
        "simulate",
        "--calls",
        "5",
        "--strategies",
        "shorten_tools_cost_aware",
        "--sweep",
        'compaction_notice="\x1b[31mA",B',
    )
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("compaction_notice=")]
    assert len(rows) == 2 and rows[0].startswith('compaction_notice="\\x1b[31mA"'), rows
