"""What ``scoutd prepare`` and ``explain`` read, and every error line they print.

An operator names a FIFO, a directory or ``/dev/zero`` by mistake; an agent
names its files with escape sequences and newlines. Each ends in one safe
error line and a documented exit code, never a hang or all the memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .helpers import one_error_line, run

# An escape sequence that would colour the operator's terminal, and a newline that
# would forge a second ``scoutd:`` line.
HOSTILE = "x\x1b[31mRED\nscoutd: forged"


def test_a_fifo_nobody_writes_to_is_one_error_not_a_hang(home: Path) -> None:
    """It hung in ``open`` until killed (``run`` raises ``TimeoutExpired`` then)."""
    fifo = home / "chat.fifo"
    os.mkfifo(fifo)
    for verb in (("prepare", "--local"), ("explain",)):
        result = run(home, *verb, str(fifo))
        assert result.returncode == 1
        assert one_error_line(result).endswith("a FIFO with no writer (nothing to read)")


def test_a_fifo_with_a_writer_is_read(home: Path) -> None:
    """What a process substitution (``<(cat chat.json)``) gives: read like stdin."""
    fifo = home / "chat.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(
        [sys.executable, "-c", f"open({str(fifo)!r}, 'w').write('[]')"],
    )
    try:
        result = run(home, "prepare", "--local", str(fifo))
    finally:
        writer.wait(timeout=20)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


def test_a_directory_is_named_as_one(home: Path) -> None:
    result = run(home, "explain", str(home))
    assert result.returncode == 1
    assert one_error_line(result).endswith("it is a directory, not a file")


def test_an_endless_input_is_refused_at_its_bound(home: Path) -> None:
    """``/dev/zero`` as FILE or on stdin: refused past 256 MiB, not read forever."""
    result = run(home, "prepare", "--local", "/dev/zero", input=b"")
    assert result.returncode == 1, result.stderr
    assert one_error_line(result).endswith("is larger than 256 MiB: refused")
    with open("/dev/zero", "rb") as zeros:
        result = run(home, "prepare", "--local", stdin=zeros)
    assert result.returncode == 1, result.stderr
    assert one_error_line(result) == "scoutd: <stdin> is larger than 256 MiB: refused"


def test_an_endless_notice_on_stdin_is_refused_and_nothing_written(home: Path) -> None:
    with open("/dev/zero", "rb") as zeros:
        result = run(home, "notify", str(home / "agent.chat"), "-", stdin=zeros)
    assert result.returncode == 1, result.stderr
    assert one_error_line(result) == "scoutd: <stdin> is larger than 256 MiB: refused"
    assert not (home / "agent.inbox").exists()


def test_names_in_input_errors_are_escaped(home: Path) -> None:
    """Missing, not JSON, not a list: the name an agent chose is shown escaped."""
    named = home / HOSTILE
    named.mkdir()
    bad_json = named / "bad.json"
    bad_json.write_text("[1")
    not_a_list = named / "scalar.json"
    not_a_list.write_text("3")
    for path in (named / "missing.json", bad_json, not_a_list):
        result = run(home, "explain", str(path))
        assert result.returncode == 1
        line = one_error_line(result)
        assert "\x1b" not in line and "x\\x1b[31mRED\\x0ascoutd: forged" in line


def test_an_abort_reason_cannot_forge_the_operators_screen(home: Path) -> None:
    """An agent may write its own ``abort`` with escape sequences: printed escaped, exit 3."""
    (home / "work").mkdir()
    dropped = run(home, "abort", "work/agent.chat", "placeholder")
    assert dropped.returncode == 0, dropped.stderr
    (aborted,) = [p for p in (home / "work").rglob("abort") if p.is_file()]
    aborted.write_text(HOSTILE)
    result = run(home, "prepare", "--local", "--save-file", "work/agent.chat", input="[]")
    assert result.returncode == 3, result.stderr
    assert one_error_line(result) == "scoutd: aborted: x\\x1b[31mRED\\x0ascoutd: forged"
