"""The memory counts follow what the daemon really holds, also while requests wait.

``pending_request_bytes`` counts a request line from its first byte until it is
answered; ``session_bytes`` counts a session's conversation from the round that
stores it until it is dropped (closed, or forgotten while idle), never a closed
session's (docs/PROTOCOL.md, "Limits"). Each test holds requests at the gate
plugin of a real daemon process and orders the steps by the daemon's own
counters (``status``, ``metrics``), never by sleeping.
"""

from __future__ import annotations

import json
import os
from typing import Any

from scoutd import protocol
from scoutd.server.connection import MAX_IN_FLIGHT

from ..support.daemon import Daemon, LineClient, wait_for
from ..test_server import gated_daemon, release
from .test_metrics import parse_exposition
from .test_quotas import MIB, _counts, _error, _held, _open, _turns

HELLO = [{"role": "user", "content": "hello"}]


def _lines(first: int, count: int, params: dict[str, Any]) -> bytes:
    """``count`` ``prepare_prompt`` request lines with ids from ``first``, joined."""
    return b"".join(
        json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "prepare_prompt", "params": params}
        ).encode()
        + b"\n"
        for rid in range(first, first + count)
    )


def _counted(data: bytes) -> int:
    """What ``pending_request_bytes`` counts of whole lines: their bytes, no newline."""
    return len(data) - data.count(b"\n")


def _text(size: int) -> dict[str, Any]:
    """``prepare_prompt`` params whose line is about ``size`` bytes (no plugin: it
    runs as soon as it gets a slot)."""
    return {"messages": [{"role": "user", "content": "x" * size}], "strategies": "none"}


def _gate_started(d: Daemon) -> None:
    wait_for(lambda: os.path.exists(os.path.join(d.dir, "gate.started")), 10, "the gate")


def _requests(client: LineClient, method: str) -> int:
    """Requests of ``method`` the daemon has decoded (its ``metrics``)."""
    samples = parse_exposition(client.call("metrics")["result"]["text"])
    return int(samples[f'scoutd_requests_total{{method="{method}"}}'])


def test_a_complete_line_waiting_for_a_request_slot_is_counted() -> None:
    """A complete line stays counted until it is answered, also while it waits for
    one of its connection's request slots: a client that keeps its 64 slots busy
    (with answers it does not read; here, with requests held at the gate) cannot
    park a line beside ``max_pending_request_bytes`` on every connection it opens.
    The connection whose data crosses the bound is refused (and read no more); the
    other keeps its parked line, and every request is answered."""
    bound = MIB
    limits = {"max_request_bytes": bound, "max_pending_request_bytes": bound}
    held = _lines(0, MAX_IN_FLIGHT, {"messages": HELLO, "strategies": "gate"})
    parked = _lines(MAX_IN_FLIGHT, 1, _text(bound * 2 // 3))
    # b's line crosses the bound 32 KiB before its end: the rest fits in the socket's
    # buffer, so sending it never blocks once the daemon stops reading b
    crossing = _lines(MAX_IN_FLIGHT, 1, _text(bound - 2 * len(held) - len(parked) + 32 * 1024))
    d = gated_daemon(daemon=limits)
    # the status request asked on a new connection (id 1), counted while it is answered
    asking = len(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "status"}))
    with d, d.connect(30) as a, d.connect(30) as b:

        def pending() -> int:
            count: int = d.status()["counts"]["pending_request_bytes"]
            return count - asking

        a.send_raw(held)
        wait_for(lambda: pending() == _counted(held), 10, "a's requests to take every slot")
        a.send_raw(parked)  # complete, it waits for a slot: counted all the same
        wait_for(
            lambda: pending() == _counted(held + parked), 10, "a's parked line to stay counted"
        )
        b.send_raw(held)
        wait_for(lambda: pending() == _counted(held * 2 + parked), 10, "b's requests")
        b.send_raw(crossing)
        refused = _error(b.recv(timeout=10))
        assert refused["code"] == protocol.TOO_LARGE and refused["data"]["limit"] == bound
        assert "max_pending_request_bytes" in refused["message"]
        release(d)
        for rid in range(MAX_IN_FLIGHT + 1):  # a's parked line is answered too
            assert "result" in a.response(rid, timeout=30)
        for rid in range(MAX_IN_FLIGHT):  # b's requests already read are answered,
            assert "result" in b.response(rid, timeout=30)
        assert b.read_line(timeout=10) == b""  # then b is closed
        wait_for(lambda: pending() == 0, 10, "every line to be uncounted")


def test_the_idle_sweep_leaves_a_round_in_flight_counted() -> None:
    """The idle sweep releases exactly the conversations it drops. A round that
    stores a conversation in a session that held none stays counted while it
    runs, though a sweep passes meanwhile (it used to infer "holds nothing" from
    the session's old, empty conversation and stop counting the new one)."""
    running, idle = _turns(300, "running"), _turns(100, "idle")
    d = gated_daemon(daemon={"session_idle_timeout": 0.2})  # a sweep every 0.05 s
    with d, d.connect(30) as c:
        session, witness = _open(c, d, "running.chat"), _open(c, d, "idle.chat")
        params = {"session": session, "messages": running, "strategies": "gate"}
        round_id = c.request("prepare_prompt", params)
        _gate_started(d)
        assert _counts(c)["session_bytes"] == _held(running)  # counted before the gate
        assert "result" in c.call("prepare_prompt", {"session": witness, "messages": idle})
        # a sweep after that round drops the witness's conversation (idle), not the
        # running session's (its round holds it)
        both = _held(running) + _held(idle)
        wait_for(lambda: _counts(c)["session_bytes"] < both, 10, "the witness to be dropped")
        assert _counts(c)["session_bytes"] == _held(running)
        release(d)
        assert c.response(round_id, timeout=30)["result"]["messages"] == running
        # idle in turn, its conversation is dropped and exactly its bytes released
        wait_for(lambda: _counts(c)["session_bytes"] == 0, 10, "the conversation to be dropped")


def test_calls_waiting_on_a_closed_session_are_refused_and_count_nothing() -> None:
    """``session.close`` does not wait for the calls in flight on the session: a
    round holding its lock but not yet counted (waiting for a prepare slot), and a
    round and a recall waiting for its lock, get ``-32006`` once it is closed, and
    nothing stays counted for it."""
    first, second, other = _turns(200), _turns(300, "second"), _turns(150, "other")
    d = gated_daemon(daemon={"max_prepares_per_uid": 1})
    with d, d.connect(30) as a, d.connect(30) as b, d.connect() as closer:
        session, busy = _open(a, d, "closed.chat"), _open(a, d, "busy.chat")
        assert "result" in a.call("prepare_prompt", {"session": session, "messages": first})
        params = {"session": busy, "messages": other, "strategies": "gate"}
        blocker = a.request("prepare_prompt", params)
        _gate_started(d)  # it holds the uid's one prepare slot
        prepares = _requests(closer, "prepare_prompt")
        # decoded, a call holds or waits for the session's lock in the same step
        slotless = b.request("prepare_prompt", {"session": session, "messages": second})
        wait_for(lambda: _requests(closer, "prepare_prompt") > prepares, 10, "the lock taken")
        append = {"session": session, "append": second, "base": len(first)}
        waiting = b.request("prepare_prompt", append)
        wait_for(lambda: _requests(closer, "prepare_prompt") > prepares + 1, 10, "a waiter")
        recall = b.request("session.recall", {"session": session, "search": "tiny"})
        wait_for(lambda: _requests(closer, "session.recall") == 1, 10, "a recall waiting")
        assert "result" in closer.call("session.close", {"session": session})
        assert _counts(closer)["session_bytes"] == _held(other)
        release(d)
        assert "result" in a.response(blocker, timeout=30)
        for rid in (slotless, waiting, recall):
            assert _error(b.response(rid, timeout=30))["code"] == protocol.UNKNOWN_SESSION
        counts = _counts(closer)
        assert (counts["sessions"], counts["session_bytes"]) == (1, _held(other))
