"""What operators and systemd see, against hostile values: log lines, sd_notify, watchdog.

Each test runs the real daemon as a subprocess and reads what it wrote: its log
file, the datagrams on a ``$NOTIFY_SOCKET`` bound by the test.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from scoutd.daemon_log import _OneLineFormatter
from scoutd.systemd import watchdog_interval
from tests.support.daemon import Daemon, wait_for

# A line the daemon writes: a timestamp, a level, a scoutd logger (written from
# docs/OPERATIONS.md "Logs", not from the formatter).
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) scoutd\.")
SHORTEST_PING = 0.01  # seconds: the daemon pings the watchdog at most 100 times a second
FORGED = "INFO scoutd.sessions: abort consumed for '/srv/a.inbox' (1 session(s)): 'forged'"


def _notify_socket(d: Daemon) -> socket.socket:
    """A datagram socket in the daemon's directory, named to it in ``$NOTIFY_SOCKET``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.path.join(d.dir, "notify"))
    d.env["NOTIFY_SOCKET"] = sock.getsockname()
    return sock


def _receive_until(sock: socket.socket, first_line: str, timeout: float = 10.0) -> list[bytes]:
    """Datagrams received until one whose first line is ``first_line``."""
    deadline = time.monotonic() + timeout
    got: list[bytes] = []
    while not any(m.split(b"\n")[0] == first_line.encode() for m in got):
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        got.append(sock.recv(65536))
    return got


def test_a_client_cannot_forge_a_daemon_log_line() -> None:
    with Daemon() as d:
        evil = os.path.join(d.dir, f"x\n{FORGED}\x1b[2J.chat")
        with d.connect() as c:
            assert "result" in c.call("session.open", {"save_file": evil, "pid": os.getpid()})
        assert d.stop() == 0
        text = d.log()
    assert "\x1b" not in text
    bad = [line for line in text.splitlines() if not LOG_LINE.match(line)]
    assert bad == [], bad
    assert "x\\nINFO scoutd.sessions: abort consumed" in text  # escaped (repr), in its line


def test_every_message_the_daemon_logs_is_one_escaped_line() -> None:
    """Whatever a call site does with a value (``%s`` too), the daemon's formatter
    writes the message as one line of printable text; a traceback follows as is."""
    formatter = _OneLineFormatter("%(levelname)s %(name)s: %(message)s")
    record = logging.LogRecord(
        "scoutd.test", logging.INFO, __file__, 1, "opened %s", (f"x\n{FORGED}\x1b[2J\u2028",), None
    )
    line = formatter.format(record)
    assert line == f"INFO scoutd.test: opened x\\x0a{FORGED}\\x1b[2J\\u2028"


def test_a_socket_path_not_utf8_or_with_a_newline_is_one_status_line() -> None:
    d = Daemon()
    notes = _notify_socket(d)
    d.socket_path = os.path.join(d.dir, "\udcff\nWATCHDOG=trigger.sock")  # bytes b"\xff\n..."
    try:
        with d:
            ready = _receive_until(notes, "READY=1")[-1].decode()
            status = f"STATUS=serving on {d.dir}/\\xff\\x0aWATCHDOG=trigger.sock"
            assert ready.split("\n") == ["READY=1", status]
            with d.connect() as c:
                assert "result" in c.call("status")
    finally:
        notes.close()


def test_a_huge_watchdog_usec_does_not_stop_the_daemon() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "9" * 400}) is not None  # was OverflowError
    assert watchdog_interval({"WATCHDOG_USEC": "9" * 5000}) is not None  # past int()'s digits
    assert watchdog_interval({"WATCHDOG_USEC": " 1_000"}) is None  # not what systemd writes
    with Daemon(env={"WATCHDOG_USEC": "9" * 400}) as d, d.connect() as c:  # it started
        assert "result" in c.call("status")


def test_a_tiny_watchdog_usec_does_not_spin_the_daemon() -> None:
    assert (watchdog_interval({"WATCHDOG_USEC": "1"}) or 0) >= SHORTEST_PING
    d = Daemon(env={"WATCHDOG_USEC": "1"})
    notes = _notify_socket(d)
    try:
        with d:
            _receive_until(notes, "READY=1")
            notes.settimeout(0.05)
            pings, started = 0, time.monotonic()
            while time.monotonic() - started < 0.3:
                with contextlib.suppress(TimeoutError):
                    pings += notes.recv(100) == b"WATCHDOG=1"
            elapsed = time.monotonic() - started
            assert 0 < pings <= elapsed / SHORTEST_PING + 5, pings  # not thousands
    finally:
        notes.close()


def test_a_notify_socket_that_fails_is_logged_once_not_at_every_ping() -> None:
    with Daemon(env={"WATCHDOG_USEC": "20000", "NOTIFY_SOCKET": "/nonexistent/notify"}) as d:
        # pings every 0.01 s: 0.3 s is about 30 failed pings
        wait_for(lambda: "WATCHDOG=1 failed" in d.log(), 5, "the first failed ping")
        time.sleep(0.3)
        with d.connect() as c:
            assert "result" in c.call("status")
        assert d.log().count("sd_notify WATCHDOG=1 failed") == 1


def _answer_status_once(listener: socket.socket, result: dict[str, object]) -> None:
    """Answer the one ``status`` request of one client with ``result`` (a fake daemon)."""
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(10)
        request = json.loads(conn.makefile("rb").readline())
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        conn.sendall(json.dumps(answer).encode() + b"\n")


def test_status_rows_stay_rows_whatever_the_daemon_answers(tmp_path: Path) -> None:
    hostile = "/x\ncounts.aborts                 0\x1b[2J\u2028"
    result = {
        "version": "0.1.0",
        "uptime": 1.0,
        "config": {"path": hostile, "generation": 1, "last_reload_error": hostile},
        "counts": {"connections": 1, "sessions": 0, "watches": 0, "requests": 1, "errors": 0},
        "latency": {"count": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0},
        "daemon": {"uid": 1, "gid": 1, "groups": [], "allowed_roots": ["/srv/\x9b2J"]},
        "fleet": None,
    }
    path = str(tmp_path / "fake.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(10)
        server = threading.Thread(target=_answer_status_once, args=(listener, result))
        server.start()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "scoutd", "status", "--socket", path],
                capture_output=True,
                timeout=30,
                env={**os.environ, "SCOUTD_CONFIG": str(tmp_path / "none.toml")},
            )
        finally:
            server.join(15)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    keys = [line.split(" ", 1)[0] for line in out.splitlines()]
    assert keys.count("counts.aborts") == 0 and keys.count("config.path") == 1, out
    assert not any(c in out for c in "\x1b\x9b\u2028"), out
    assert "config.path" in out and "/x\\x0acounts.aborts" in out
