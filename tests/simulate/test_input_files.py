"""Hostile and unusual input files of ``scoutd simulate``: one error line, bounded memory.

A runs file or a chat file is read as the CLI reads a FILE (docs/OPERATIONS.md):
at most 256 MiB (a line of a runs file: each run), a FIFO nobody writes to is an
error and not a wait, a pipe is read once, a directory is refused by name.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from scoutd.simulate import files
from scoutd.simulate.cli import main
from scoutd.simulate.progress import Progress

RUN_TIMEOUT = 30.0

RUN: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Fix parse_config."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "src/app/config.py:120"},
    {"role": "assistant", "content": "Look at src/app/config.py."},
]
LINE = json.dumps({"messages": RUN}) + "\n"


def simulate(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m scoutd.simulate ARGV`` in a subprocess: a hang is a timeout, not a stall."""
    return subprocess.run(
        [sys.executable, "-m", "scoutd.simulate", *argv],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("flag", ["--runs", "--chat"])
def test_a_fifo_without_writer_is_an_error_not_a_wait(tmp_path: Path, flag: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = simulate(flag, str(fifo), "--strategies", "none")
    assert done.returncode == 1
    assert "a FIFO with no writer" in done.stderr and "Traceback" not in done.stderr


def test_a_pipe_of_runs_is_read_once(capsys: pytest.CaptureFixture[str]) -> None:
    """``--runs <(zcat runs.jsonl.gz)``: its runs were counted, then gone (0 runs)."""
    read, write = os.pipe()
    try:
        os.write(write, (LINE * 2).encode())
        os.close(write)
        code = main(["--runs", f"/dev/fd/{read}", "--strategies", "none", "--json"])
    finally:
        os.close(read)
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["run"] for row in data["runs"]] == [1, 2]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_of_a_pipe_counts_without_a_total() -> None:
    """A pipe's runs are not counted beforehand: the bar says how many are done."""
    stream = Terminal()
    bar = Progress(None, "replaying runs", stream=stream, delay=0.0)
    bar.update(3)
    bar.close()
    assert stream.getvalue().split("\r")[1].split() == ["replaying", "runs", "3"]


def test_a_gzip_bomb_line_is_refused_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line of 24 MiB (24 KiB gzipped) against a bound of 1 MiB: refused, never held."""
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 1024 * 1024)
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb") as handle:
        handle.write(LINE.encode())
        for _ in range(24):
            handle.write(b" " * (1024 * 1024))
    tracemalloc.start()
    try:
        code = main(["--runs", str(bomb), "--strategies", "none"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 1
    assert "bomb.jsonl.gz:2: a line longer than 1 MiB" in capsys.readouterr().err
    assert peak < 8 * 1024 * 1024


def test_a_chat_is_read_up_to_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 64 * 1024)
    assert main(["--chat", "/dev/zero", "--strategies", "none"]) == 1
    assert "chat /dev/zero is larger than 0.0625 MiB: refused" in capsys.readouterr().err
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(RUN))
    assert main(["--chat", str(chat), "--strategies", "none"]) == 0
    capsys.readouterr()
    assert main(["--chat", str(tmp_path), "--strategies", "none"]) == 1
    assert "it is a directory, not a file" in capsys.readouterr().err


def test_a_run_of_invalid_messages_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text(LINE + json.dumps({"messages": [{"role": "user", "content": "x"}, 5]}) + "\n")
    assert main(["--runs", str(runs), "--strategies", "none"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"scoutd simulate: {runs}:2: invalid message 1")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"hello", "Not a gzipped file"),
        (gzip.compress(LINE.encode() * 50, mtime=0)[:200], "Compressed file ended"),
    ],
)
def test_a_corrupt_gzip_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    runs = tmp_path / "runs.jsonl.gz"
    runs.write_bytes(content)
    assert main(["--runs", str(runs), "--strategies", "none"]) == 1
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_a_plot_path_that_cannot_be_written_is_refused_before_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not after a replay of minutes: checked first, before even the strategy names."""
    pytest.importorskip("matplotlib")
    runs = tmp_path / "runs.jsonl"
    runs.write_text(LINE)
    for plot, expected in (
        (tmp_path / "missing" / "x.png", "no directory"),
        (tmp_path, "it is a directory, not a file"),
    ):
        code = main(["--runs", str(runs), "--strategies", "no_such_strategy", "--plot", str(plot)])
        err = capsys.readouterr().err
        assert code == 1 and f"--plot {plot}: {expected}" in err
    assert main(["--runs", str(runs), "--strategies", "none", "--plot", ""]) == 2
    assert "--plot needs a file name" in capsys.readouterr().err
