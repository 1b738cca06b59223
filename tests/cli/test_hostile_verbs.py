"""Every verb against hostile standard streams, options and answers.

Operators run ``scoutd`` from scripts with a stream closed (``<&-``,
``2>&-``), pass bytes that are not UTF-8, and read what a configuration or
whatever answers on a socket holds. Each case ends in its documented exit code
and one clear line on stderr; nothing that is not printable reaches the
terminal, and nothing but the verb's own output reaches stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import ROOT, one_error_line, run

# Long (tests/conftest.py starts the tests marked slow first).
pytestmark = pytest.mark.slow

OPENAI_CHAT = str(ROOT / "examples" / "chats" / "openai_chat.json")
# What an impostor, a corrupted file or an agent may put in text an operator reads:
# an OSC title change, a screen clear, a C1 CSI, a bidirectional override, a line
# separator, a carriage return.
HOSTILE = "\x1b]0;pwn\x07\x1b[2J\x9b31m\u202e\u2028\r"
NOT_UTF8 = os.fsdecode(b"\xff")  # a byte that is not UTF-8, as a command line hands it over
# `sh -c 'exec "$@" <&-' sh CMD...`: CMD with the stream closed, not merely empty
CLOSED_STDIN = ("sh", "-c", 'exec "$@" <&-', "sh")
CLOSED_STDERR = ("sh", "-c", 'exec "$@" 2>&-', "sh")


def _unprintable(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on, line breaks aside."""
    return [c for c in text if not c.isprintable() and c not in "\n"]


@pytest.mark.parametrize(
    "args",
    [
        ("notify", "agent.chat", "-"),
        ("prepare", "--local"),
        ("explain", "-"),
        ("simulate", "--chat", "-"),
    ],
)
def test_a_closed_stdin_is_said_in_one_line(home: Path, args: tuple[str, ...]) -> None:
    """It was ``unexpected error: AttributeError: 'NoneType' object has no attribute
    'fileno'`` (``'buffer'`` for simulate): Python leaves ``sys.stdin`` None."""
    result = run(home, *args, prefix=CLOSED_STDIN)
    assert result.returncode == 1, result
    line = one_error_line(result)
    assert line.endswith("standard input is closed"), line
    assert not (home / "agent.inbox").exists()


def test_a_stdin_open_for_writing_only_is_named(home: Path) -> None:
    """It was ``scoutd: Bad file descriptor``, naming nothing."""
    target = home / "write-only"
    with open(target, "wb") as writable:
        result = run(home, "notify", "agent.chat", "-", stdin=writable)
    assert result.returncode == 1, result
    assert one_error_line(result) == "scoutd: cannot read <stdin>: Bad file descriptor"


def test_a_closed_stderr_keeps_warnings_out_of_the_json(home: Path) -> None:
    """``print(file=None)`` writes to stdout: with fd 2 closed the foreign-traffic
    warning was the first line of the messages a script parses."""
    result = run(home, "prepare", "--local", "--format", "anthropic", OPENAI_CHAT)
    assert "warning" in result.stderr  # the warning this case is about is given
    closed = run(
        home, "prepare", "--local", "--format", "anthropic", OPENAI_CHAT, prefix=CLOSED_STDERR
    )
    assert closed.returncode == 0
    assert closed.stdout == result.stdout
    assert isinstance(json.loads(closed.stdout), list)
    failed = run(home, "explain", "missing.json", prefix=CLOSED_STDERR)
    assert (failed.returncode, failed.stdout) == (1, "")


@pytest.mark.parametrize("key", ["full_tool_outputs", "compaction_notice"])
def test_a_set_value_that_is_not_utf8_is_a_usage_error(home: Path, key: str) -> None:
    """It was ``invalid _parse_setting value`` (scoutd) and ``unexpected error:
    UnicodeEncodeError`` with exit 1 (simulate)."""
    for args in (
        ("explain", OPENAI_CHAT, "--set", f"{key}={NOT_UTF8}"),
        ("simulate", "--calls", "3", "--set", f"{key}={NOT_UTF8}"),
    ):
        result = run(home, *args)
        assert result.returncode == 2, result
        assert one_error_line(result).endswith("'\\xff' is not UTF-8 text"), result.stderr


def test_config_show_escapes_what_json_leaves_raw(home: Path) -> None:
    """JSON escapes only C0 controls: a C1 CSI, a bidi override and a line separator in
    a configured string reached the terminal as they were."""
    config = home / "hostile.toml"
    config.write_text(f"[prompt]\ncompaction_notice = {json.dumps(HOSTILE)}\n")
    result = run(home, "config", "show", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert _unprintable(result.stdout) == []
    shown = [line for line in result.stdout.splitlines() if "compaction_notice" in line]
    assert shown == [
        'prompt.compaction_notice = "\\u001b]0;pwn\\u0007\\u001b[2J\\x9b31m'
        '\\u202e\\u2028\\r"  (file)'
    ]


class _Impostor:
    """Whatever listens on a socket path: answers every request with ``result``."""

    def __init__(self, path: str, result: object) -> None:
        self.path = path
        self.result = result
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(path)
        self.server.listen(4)
        self.server.settimeout(30.0)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                answer = {"jsonrpc": "2.0", "id": json.loads(line).get("id"), "result": self.result}
                conn.sendall(json.dumps(answer).encode() + b"\n")

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=10.0)


@pytest.fixture
def impostor(home: Path) -> Iterator[_Impostor]:
    text = f"scoutd_up 1\nscoutd_{HOSTILE}\t2\n"
    server = _Impostor(str(home / "impostor.sock"), {"text": text})
    try:
        yield server
    finally:
        server.close()


def test_metrics_escapes_what_answers_on_the_socket(home: Path, impostor: _Impostor) -> None:
    """The daemon's text went to stdout as it came: an impostor cleared the screen."""
    result = run(home, "metrics", "--socket", impostor.path, "--timeout", "10")
    assert result.returncode == 0, result.stderr
    assert _unprintable(result.stdout.replace("\t", "")) == []
    assert result.stdout.splitlines()[0] == "scoutd_up 1"
    assert result.stdout.splitlines()[1].endswith("\t2")  # a tab, a separator, is kept


def test_fleet_receipts_of_what_is_no_command_id_is_a_usage_error(home: Path) -> None:
    """A mistyped id was printed raw on stdout, and answered 0 (no host beating) or 1
    ("not answered yet", forever); here an unreachable Redis made it 1."""
    config = home / "fleet.toml"
    config.write_text('[fleet]\nurl = "redis://127.0.0.1:1/0"\nconnect_timeout = 1.0\n')
    for wrong in (f"{HOSTILE}\nforged", "3F9C0E5D1A7B4C2E8F6D0B1A2C3D4E5F", "3f9c"):
        result = run(home, "fleet", "receipts", wrong, "--config", str(config))
        assert result.returncode == 2, result
        assert result.stdout == ""
        line = one_error_line(result)
        assert "is not a command id" in line and _unprintable(line) == [], line


@pytest.mark.parametrize(("verb", "what"), [("notify", "the notice"), ("abort", "the abort")])
def test_a_file_the_inbox_refuses_names_the_inbox(home: Path, verb: str, what: str) -> None:
    """The error named the temporary file (``scoutd: .inbox-123-abc: Permission
    denied``, ``.tmp-123-abc`` for an abort), not where it was to go."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to act as an account the inbox refuses")
    home.chmod(0o755)
    closed = home / "closed"  # the inbox cannot be made in it
    closed.mkdir(mode=0o555)
    made = home / "made.inbox"  # the inbox exists and cannot be written to
    made.mkdir(mode=0o555)
    nobody = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
    for chat, inbox in ((closed / "a.chat", closed / "a.inbox"), (home / "made.chat", made)):
        result = run(home, verb, str(chat), "text", prefix=nobody)
        assert result.returncode == 1, result
        line = one_error_line(result)
        assert line == f"scoutd: cannot write {what} into {inbox}: Permission denied", line


def test_json_output_holds_a_path_that_is_not_utf8(home: Path) -> None:
    """``config show --json`` of such a file was ``unexpected error: UnicodeEncodeError``."""
    name = os.fsencode(home) + b"/c\xff.toml"
    with open(name, "w"):
        pass
    for args, env in (
        (("config", "show", "--json", "--config", os.fsdecode(name)), {}),
        (("config", "show", "--json"), {"SCOUTD_CONFIG": os.fsdecode(name)}),
    ):
        result = run(home, *args, env=env)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["path"] == f"{home}/c\\xff.toml"


def test_an_input_that_does_not_fit_in_memory_is_said_so(home: Path) -> None:
    """7.5 MB of ``[{},{},...]`` decode to some 275 MB: under a 256 MiB address-space
    limit it was ``unexpected error: MemoryError:``, as if a bug (found with 15 MB
    under 512 MiB; each verb starts in less than 160 MiB); unlimited, 256 MiB of it
    (under the byte bound) would take some 9 GB."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    dense = home / "dense.json"
    dense.write_bytes(b"[" + b",".join([b"{}"] * 2_500_000) + b"]")
    limit = (prlimit, f"--as={256 * 1024**2}")
    expected = {
        ("explain", str(dense)): "scoutd: not enough memory",
        ("prepare", "--local", str(dense)): "scoutd: not enough memory",
        ("simulate", "--chat", str(dense)): "scoutd simulate: not enough memory",
    }
    for args, start in expected.items():
        result = run(home, *args, prefix=limit)
        assert result.returncode == 1, result
        assert one_error_line(result).startswith(start), result.stderr


@pytest.mark.parametrize("verb", ["status", "metrics", "prepare"])
def test_a_timeout_past_what_a_wait_takes_is_a_usage_error(home: Path, verb: str) -> None:
    """``--timeout 1e308`` was ``unexpected error: OverflowError: timestamp out of range
    for platform time_t`` (exit 1); past some 24.8 days, poll(2) refused it the same way."""
    missing = str(home / "no-daemon.sock")
    for seconds in ("1e308", "2200000"):
        result = run(home, verb, "--socket", missing, "--timeout", seconds, input=b"[]")
        assert result.returncode == 2, result
        assert result.stderr.splitlines()[-1].endswith(
            f"argument --timeout: must be a finite number > 0 and <= 604800, got {seconds}"
        ), result.stderr
    accepted = run(home, verb, "--socket", missing, "--timeout", "604800", input=b"[]")
    assert accepted.returncode == 1 and "no-daemon.sock" in one_error_line(accepted)


def test_a_reader_that_goes_away_mid_output_is_exit_1(home: Path) -> None:
    """``scoutd prepare BIG | head -c1``: the write blocked on the full pipe returned
    the 64 KiB taken when the reader left, the short count was dropped, and the
    command ended 0 with the rest of its output lost (3 runs of 3)."""
    conversation = [{"role": "user", "content": "x" * 100}] * 20_000  # 2.5 MB of output
    chat = home / "wide.json"
    chat.write_text(json.dumps(conversation))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SCOUTD_")}
    environ["SCOUTD_CONFIG"] = str(home / "empty.toml")
    for _ in range(3):
        with subprocess.Popen(
            [sys.executable, "-m", "scoutd", "prepare", "--local", str(chat)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environ,
            cwd=home,
        ) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            assert proc.stdout.read(1) == b"["  # it is writing: blocked on the full pipe
            time.sleep(0.2)
            proc.stdout.close()
            assert proc.wait(timeout=60) == 1
            assert proc.stderr.read() == b""  # the reader left: nothing worth a line
