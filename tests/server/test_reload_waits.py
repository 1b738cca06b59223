"""A reload wakes the waits its old bounds sized (docs/RELIABILITY.md, rule 29).

A connection whose client leaves its answers unread is held back: the daemon
reads no more of its requests and starts none of its answers while those
answers fill ``max_queued_response_bytes``. A reload that raises the bound
must let it go on at once, not once the client reads. Real daemon process,
real Unix sockets, every wait bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from typing import Any

from ..support.daemon import Daemon, LineClient, wait_for

WAIT = 10.0  # seconds any one step may take
ANSWER_BYTES = 4 << 20  # far more than the socket buffers of both ends take


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, str(reply)[:400]
    result: dict[str, Any] = reply["result"]
    return result


def _counts(c: LineClient) -> dict[str, Any]:
    counts: dict[str, Any] = _result(c.call("status"))["counts"]
    return counts


def _line(id: int, method: str, params: dict[str, Any]) -> bytes:
    request = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    return json.dumps(request).encode() + b"\n"


def _drain(sock: socket.socket, timeout: float) -> list[dict[str, Any]]:
    """Read every line the daemon sends until it has been quiet a moment."""
    sock.settimeout(0.5)
    buffer = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        buffer += chunk
    return [json.loads(line) for line in buffer.splitlines() if line]


def test_a_raised_answer_bound_lets_a_held_connection_go_on_at_once() -> None:
    """Before: the held connection waited on its own drain alone; after a reload
    raised ``max_queued_response_bytes`` from 64 KiB to 64 MiB (above what it
    holds), its next request (a ``session.open``) still did not run within 10 s.
    Now the reload wakes it and the request runs while the client still reads
    nothing."""
    d = Daemon(daemon={"max_queued_response_bytes": 64 * 1024})
    big = [{"role": "user", "content": "x" * ANSWER_BYTES}]
    save_file = os.path.join(d.dir, "a.chat")
    with d, d.connect() as held, d.connect() as c:
        held.send_raw(_line(1, "prepare_prompt", {"messages": big, "strategies": "none"}))
        wait_for(lambda: _counts(c)["queued_response_bytes"] > 64 * 1024, WAIT, "the answer held")
        held.send_raw(_line(2, "session.open", {"save_file": save_file}))
        time.sleep(0.5)
        assert _counts(c)["sessions"] == 0  # held back: its client reads nothing
        d.daemon["max_queued_response_bytes"] = 64 << 20
        d.write_config()
        _result(c.call("config.reload"))
        wait_for(lambda: _counts(c)["sessions"] == 1, WAIT, "the held request to run")
        answers = {message["id"]: message for message in _drain(held.sock, WAIT)}
        assert "result" in answers[1] and "result" in answers[2], sorted(answers)
        with contextlib.suppress(OSError):
            _result(held.call("status"))


def test_a_lowered_idle_timeout_drops_a_client_that_stopped_reading_at_once() -> None:
    """An answer its client does not take within ``idle_timeout`` drops the connection.
    Before: the blocked write kept the bound it started with, so after a reload
    lowered ``idle_timeout`` from an hour to 0.5 s the connection of a client that
    never read was still open 10 s later, its answer still held. Now the reload
    wakes the write, which then reads the new bound."""
    d = Daemon(daemon={"idle_timeout": 3600.0})
    big = [{"role": "user", "content": "x" * ANSWER_BYTES}]
    with d, d.connect() as held, d.connect() as c:
        held.send_raw(_line(1, "prepare_prompt", {"messages": big, "strategies": "none"}))
        wait_for(lambda: _counts(c)["queued_response_bytes"] > 0, WAIT, "the answer held")
        time.sleep(0.6)
        assert _counts(c)["connections"] == 2
        d.daemon["idle_timeout"] = 0.5
        d.write_config()
        _result(c.call("config.reload"))
        wait_for(lambda: _counts(c)["connections"] == 1, WAIT, "the reader-less client dropped")
        assert _counts(c)["queued_response_bytes"] == 0
