"""One connection's refusals and bounds (scoutd/server/connection.py), each exact.

Every line the connection shell writes on its own, for a connection it refuses
or a line it cannot take, is compared whole with what docs/PROTOCOL.md shows,
with the error count it adds to ``status`` and what it logs; and the bytes it
held are released when the connection ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd import protocol
from scoutd.server import handlers
from scoutd.server.connection import MAX_PRODUCING, PeerConnection

from ..support.daemon import InProcessDaemon, LineClient, wait_for


def errors_by_code(d: InProcessDaemon) -> dict[int, int]:
    found: dict[int, int] = d.call(lambda: dict(d.server.metrics.errors_by_code))
    return found


def at_rest(d: InProcessDaemon) -> dict[str, Any]:
    """What the daemon holds for connections, which all fall back once they end."""

    def read() -> dict[str, Any]:
        shared = d.server.shared
        return {
            "connections": d.server.metrics.connections,
            "by_uid": dict(shared.connections_by_uid),
            "in_flight": shared.in_flight,
            "pending": shared.pending_request_bytes,
            "waits": len(shared.waits),
            "queued": shared.quotas.queued,
            "queued_by_uid": dict(shared.quotas.queued_by_uid),
        }

    found: dict[str, Any] = d.call(read)
    return found


REST = {
    "connections": 0,
    "by_uid": {},
    "in_flight": 0,
    "pending": 0,
    "waits": 0,
    "queued": 0,
    "queued_by_uid": {},
}


def settles(d: InProcessDaemon) -> None:
    """Every count falls back once the connections are gone."""
    wait_for(lambda: at_rest(d) == REST or None, 10, "the counts to fall back")


def echo_line(rid: int, chars: int) -> bytes:
    """A request whose answer holds its ``chars`` characters again (strategy ``none``)."""
    params = {"messages": [{"role": "user", "content": "e" * chars}], "strategies": "none"}
    call = {"jsonrpc": "2.0", "id": rid, "method": "prepare_prompt", "params": params}
    return json.dumps(call).encode() + b"\n"


def echoed(answer: dict[str, Any], chars: int) -> bool:
    return bool(answer["result"]["messages"] == [{"role": "user", "content": "e" * chars}])


@contextlib.contextmanager
def sending(client: LineClient, data: bytes) -> Iterator[None]:
    """``data`` written from another thread, as a client does while the daemon does
    not read it (a write the client's end cuts short ends quietly)."""

    def send() -> None:
        with contextlib.suppress(OSError):
            client.send_raw(data)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        yield
    finally:
        sender.join(30)
    assert not sender.is_alive()


def refusal(line: bytes, code: int, message: str, data: Any = None) -> None:
    """``line`` is the one error line of a request that never was: ``id`` null."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    assert json.loads(line) == {"jsonrpc": "2.0", "id": None, "error": error}


@pytest.mark.parametrize("limit", [1, 2])
@pytest.mark.parametrize("key", ["max_connections", "max_connections_per_uid"])
def test_a_connection_past_a_bound_gets_one_line_and_the_others_go_on(key: str, limit: int) -> None:
    if key == "max_connections":
        message = f"too many connections (max_connections = {limit})"
    else:
        message = f"too many connections of uid {os.getuid()} (max_connections_per_uid = {limit})"
    with InProcessDaemon(daemon={key: limit}) as d:
        with contextlib.ExitStack() as admitted:
            clients = [admitted.enter_context(d.connect()) for _ in range(limit)]
            assert all("result" in c.call("status") for c in clients)
            with LineClient(d.socket_path) as refused:
                data = {"limit": limit, "key": key}
                refusal(refused.read_line(10), -32004, message, data)
                assert refused.read_line(10) == b""  # then closed
            assert all("result" in c.call("status") for c in clients)
            assert at_rest(d)["connections"] == limit
        assert errors_by_code(d) == {protocol.TOO_LARGE: 1}
        settles(d)


def test_a_peer_not_allowed_gets_one_line_and_is_logged() -> None:
    """The daemon's own uid is not let in when ``allowed_uids`` leaves it out."""
    with InProcessDaemon(daemon={"allowed_uids": [os.getuid() + 4242]}) as d:
        reason = f"peer uid {os.getuid()} (gid {os.getgid()}, pid {os.getpid()}) is not allowed"
        with LineClient(d.socket_path) as client:
            refusal(client.read_line(10), -32003, f"forbidden: {reason}", {"reason": reason})
            assert client.read_line(10) == b""
        assert errors_by_code(d) == {protocol.FORBIDDEN: 1}
        assert at_rest(d)["connections"] == 0
        assert f"WARNING scoutd.server: refused connection: {reason}\n" in d.log()


def test_a_line_over_max_request_bytes_is_refused_and_the_connection_goes_on() -> None:
    with InProcessDaemon(daemon={"max_request_bytes": 4096}) as d, d.connect() as c:
        # the line after it, in the same write, is read and answered too
        status = b'{"jsonrpc": "2.0", "id": 7, "method": "status"}\n'
        c.send_raw(b"x" * 5000 + b"\n" + status)
        refusal(
            c.read_line(10),
            -32004,
            "request line longer than max_request_bytes (4096)",
            {"limit": 4096, "key": "max_request_bytes"},
        )
        assert "result" in c.response(7, 10)
        assert errors_by_code(d) == {protocol.TOO_LARGE: 1}


def test_a_line_not_finished_in_time_is_refused_and_its_bytes_released() -> None:
    with InProcessDaemon(daemon={"read_timeout": 0.5}) as d:
        with d.connect() as c:
            c.send_raw(b'{"jsonrpc": "2.0", "id": 1, "met')
            message = "read timeout: request line not completed within 0.5 s; closing"
            refusal(c.read_line(10), -32600, message)
            assert c.read_line(10) == b""
        assert errors_by_code(d) == {protocol.INVALID_REQUEST: 1}
        settles(d)


def test_lines_held_past_the_pending_bound_close_the_connection() -> None:
    """The connection whose bytes take the daemon-wide count past
    ``max_pending_request_bytes`` is refused and closed; the count falls back."""
    with InProcessDaemon(daemon={"max_pending_request_bytes": 4096}) as d:
        with d.connect() as other, d.connect() as c:
            c.send_raw(b"y" * 4096)  # at the bound: held
            wait_for(lambda: at_rest(d)["pending"] == 4096 or None, 10, "the bytes counted")
            assert errors_by_code(d) == {} and at_rest(d)["connections"] == 2
            c.send_raw(b"y")
            message = (
                "too large: request lines not yet complete or not yet answered on all"
                " connections exceed max_pending_request_bytes (4096); closing"
            )
            data = {"limit": 4096, "key": "max_pending_request_bytes"}
            refusal(c.read_line(10), -32004, message, data)
            assert c.read_line(10) == b""
            assert wait_for(lambda: at_rest(d)["pending"] == 0 or None, 10, "the bytes released")
            assert "result" in other.call("status")
        assert errors_by_code(d) == {protocol.TOO_LARGE: 1}
        logged = f"WARNING scoutd.server: closing a connection of pid {os.getpid()}:"
        assert f"{logged} request lines held too large\n" in d.log()
        settles(d)


def test_a_client_gone_mid_line_leaves_nothing_counted() -> None:
    with InProcessDaemon() as d:
        with d.connect() as c:
            for _ in range(20):
                assert "result" in c.call("status")
            c.send_raw(b"z" * 1000)
            wait_for(lambda: at_rest(d)["pending"] == 1000 or None, 10, "the bytes counted")
        settles(d)


def test_a_client_gone_with_requests_waiting_for_their_turn_leaves_nothing_counted() -> None:
    """Hundreds of requests in one write take every slot of the connection (64)
    and wait for theirs; the client leaves without reading one answer."""
    with InProcessDaemon() as d:
        with d.connect() as c:
            line = b'{"jsonrpc": "2.0", "id": 1, "method": "status"}\n'
            c.send_raw(line * 500)
            wait_for(lambda: at_rest(d)["in_flight"] > 0 or None, 10, "requests read")
        settles(d)


def test_notifications_read_leave_nothing_counted() -> None:
    """A ``session.aborted`` push counts as an unread answer until it is written."""
    with InProcessDaemon() as d:
        chat = os.path.join(d.dir, "chats", "a.chat")
        inbox = os.path.join(d.dir, "chats", "a.inbox")
        os.makedirs(inbox)
        with d.connect() as c:
            for _ in range(3):
                assert "result" in c.call("session.open", {"save_file": chat})
            with open(os.path.join(inbox, "abort.tmp"), "w") as handle:
                handle.write("stop")
            os.rename(os.path.join(inbox, "abort.tmp"), os.path.join(inbox, "abort"))
            pushed = [c.notification("session.aborted", 10) for _ in range(3)]
            assert [p["params"]["reason"] for p in pushed] == ["stop"] * 3
            assert "result" in c.call("status")
            assert at_rest(d)["queued"] == 0 and at_rest(d)["queued_by_uid"] == {}
        settles(d)


def test_answers_read_late_arrive_whole_and_leave_nothing_counted() -> None:
    """An answer larger than the socket takes waits for the client to read it, and
    the next request waits for room (its connection holds unread answers past
    ``max_queued_response_bytes``); read at last, both arrive whole."""
    chars = 1_000_000
    with InProcessDaemon(daemon={"max_queued_response_bytes": 65536}) as d:
        with d.connect(30) as c, sending(c, echo_line(1, chars) + echo_line(2, chars)):
            wait_for(lambda: at_rest(d)["queued"] > 65536 or None, 10, "an answer waiting")
            assert echoed(c.response(1, 30), chars) and echoed(c.response(2, 30), chars)
        settles(d)


def test_many_answers_never_read_stop_at_the_connections_bound() -> None:
    """Answers smaller than ``max_queued_response_bytes`` add up: once the ones
    the socket did not take reach it, the connection is not read (and its
    requests not answered) until the client reads."""
    bound, count, chars = 65536, 40, 20_000
    line = echo_line(3, chars)
    with InProcessDaemon(daemon={"max_queued_response_bytes": bound}) as d:
        with d.connect(30) as c, sending(c, line * count):
            wait_for(lambda: at_rest(d)["queued"] >= bound or None, 10, "answers waiting")
            peak = 0
            for _ in range(20):  # look a while: without the bound they pile up meanwhile
                peak = max(peak, at_rest(d)["queued"])
                time.sleep(0.05)
            # the bound, plus the answers of the requests computing (MAX_PRODUCING)
            assert peak <= bound + (MAX_PRODUCING + 1) * len(line), peak
            for _ in range(count):
                assert echoed(c.response(3, 30), chars)
        settles(d)


def test_a_connection_idle_after_requests_read_together_is_closed() -> None:
    """Requests read in one piece are each in flight until answered; once all are,
    a silent connection is closed after ``idle_timeout``."""
    limits = {"idle_timeout": 0.5, "log_level": "debug"}
    with InProcessDaemon(daemon=limits) as d, d.connect() as c:
        line = b'{"jsonrpc": "2.0", "id": 1, "method": "status"}\n'
        c.send_raw(line * 5)
        for _ in range(5):
            assert "result" in c.response(1, 10)
        assert c.read_line(timeout=10) == b""
        settles(d)
        assert f"DEBUG scoutd.server: closing idle connection of pid {os.getpid()}\n" in d.log()


def test_a_client_that_stops_reading_is_dropped_after_idle_timeout() -> None:
    """An answer the client does not take within ``idle_timeout`` ends its connection."""
    with InProcessDaemon(daemon={"idle_timeout": 1.0}) as d, d.connect() as c:
        c.send_raw(echo_line(1, 1_000_000))
        wait_for(lambda: at_rest(d)["queued"] > 0 or None, 10, "the answer waiting")
        settles(d)
        assert "ERROR" not in d.log()  # the reader's own idle check (a request in flight)


def test_a_client_gone_with_answers_unread_leaves_nothing_counted() -> None:
    """Requests waiting for room behind unread answers are cancelled with their
    connection: the bytes of their lines are released too."""
    with InProcessDaemon(daemon={"max_queued_response_bytes": 65536}) as d:
        with d.connect(30) as c, sending(c, echo_line(3, 20_000) * 40):
            wait_for(lambda: at_rest(d)["queued"] >= 65536 or None, 10, "answers waiting")
            c.sock.shutdown(socket.SHUT_RDWR)  # gone, answers unread: the write ends too
        settles(d)


class Fault(Exception):
    """What no handler raises: a defect, injected."""


def test_a_request_failing_unexpectedly_ends_only_its_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = handlers.dispatch

    async def failing(server: Any, conn: Any, line: bytes, late: bool) -> bytes | None:
        if b'"fail"' in line:
            raise Fault
        return await real(server, conn, line, late)

    monkeypatch.setattr(handlers, "dispatch", failing)
    with InProcessDaemon() as d:
        with d.connect() as other, d.connect() as c:
            c.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "fail"}\n')
            assert c.read_line(timeout=10) == b""  # no answer: the connection is closed
            assert "result" in other.call("status")
        assert errors_by_code(d) == {protocol.INTERNAL_ERROR: 1}
        logged = f"ERROR scoutd.server: request of pid {os.getpid()} failed unexpectedly;"
        assert f"{logged} closing its connection\n" in d.log()
        settles(d)


def test_a_connection_failing_unexpectedly_leaves_the_daemon_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = PeerConnection.serve
    calls: list[int] = []

    async def serve(self: PeerConnection) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise Fault
        await real(self)

    monkeypatch.setattr(PeerConnection, "serve", serve)
    with InProcessDaemon() as d:
        with LineClient(d.socket_path) as first:
            assert first.read_line(timeout=10) == b""
        with d.connect() as second:
            assert "result" in second.call("status")
        logged = f"ERROR scoutd.server: connection of pid {os.getpid()} ended by an unexpected"
        assert f"{logged} Fault\n" in d.log()
        settles(d)
