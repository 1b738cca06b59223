"""What one uid and the whole daemon may hold: prepare slots, unread answers, sessions.

Each bound refuses only the client whose request would pass it, with
``-32004`` naming the bound, before anything changes; every other client goes
on, and nothing stored or owed is lost (docs/RELIABILITY.md, "CPU and memory,
per request, per uid, per daemon"). In-process daemon, real Unix sockets.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import tracemalloc
from typing import Any

import pytest

import scoutd
from scoutd import protocol
from scoutd.config import DaemonConfig
from scoutd.engine.held import held_bytes, json_values
from scoutd.engine.incremental import json_size
from scoutd.protocol.framing import LineReader
from scoutd.server.connection import PeerConnection
from scoutd.server.quotas import MAX_REQUESTS_PER_UID, Quotas

from ..support.daemon import InProcessDaemon, LineClient, wait_for

MIB = 1024 * 1024


def _held(messages: list[Any]) -> int:
    return held_bytes(messages, json_size(messages))


def _error(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, str(reply)[:300]
    error: dict[str, Any] = reply["error"]
    return error


def _counts(client: LineClient) -> dict[str, Any]:
    counts: dict[str, Any] = client.call("status")["result"]["counts"]
    return counts


def test_json_values_counts_every_value() -> None:
    assert json_values([]) == 0
    assert json_values([{"role": "user", "content": "x"}]) == 3
    assert json_values([{"a": [1, {"b": None}, []]}, "s"]) == 7


def test_unread_answers_are_bounded_per_uid_across_its_connections() -> None:
    """One uid's connections that never read hold at most its bound (plus the
    answers being made); its other connections get a clear refusal meanwhile,
    not a stall, and every answer comes once the client reads."""
    bound = MIB
    big = [{"role": "user", "content": "x" * (300 * 1024)}]
    limits = {"max_queued_response_bytes_per_uid": bound, "max_prepares_per_uid": 1}
    with InProcessDaemon(daemon=limits) as d, d.connect(30) as idle, d.connect(30) as other:
        count = 16  # 4.8 MB of answers if all were held
        params = {"messages": big, "strategies": "none"}
        line = {"jsonrpc": "2.0", "method": "prepare_prompt", "params": params}
        lines = b"".join(json.dumps({**line, "id": i}).encode() + b"\n" for i in range(count))
        sender = idle.sock.dup()  # the daemon stops reading: send from a thread of its own
        sender.settimeout(60)
        writer = threading.Thread(target=sender.sendall, args=(lines,))
        writer.start()
        ids = list(range(count))
        wait_for(lambda: _counts(other)["queued_response_bytes"] >= bound, 20, "answers held")
        refused = _error(other.call("prepare_prompt", {"messages": big, "strategies": "none"}))
        assert refused["code"] == -32004
        assert refused["data"] == {"limit": bound, "key": "max_queued_response_bytes_per_uid"}
        assert "max_queued_response_bytes_per_uid" in refused["message"]
        assert "read them first" in refused["message"]
        for _ in range(20):  # look a while: an unbounded daemon keeps queueing meanwhile
            held = _counts(other)["queued_response_bytes"]
            # the bound, plus what one prepare slot made while it was not yet reached
            assert held < bound + 2 * (json_size(big) + 1024), held
            time.sleep(0.02)
        try:
            for rid in ids:  # nothing lost: every answer comes once the client reads
                reply = idle.response(rid, timeout=30)
                assert reply["result"]["messages"] == big
        finally:
            writer.join(60)
            sender.close()
        wait_for(lambda: _counts(other)["queued_response_bytes"] == 0, 10, "answers read")
        reply = other.call("prepare_prompt", {"messages": big, "strategies": "none"})
        assert reply["result"]["messages"] == big


def test_a_uid_computes_at_most_its_share_of_the_workers() -> None:
    """``max_prepares_per_uid`` prepares of one uid compute at once; the others
    wait their turn (and all are answered)."""
    gate = threading.Event()
    lock = threading.Lock()
    running = [0, 0]  # now, most at once

    def blocking(messages: list[Any]) -> list[Any]:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        try:
            gate.wait(20)
        finally:
            with lock:
                running[0] -= 1
        return messages

    scoutd.register_strategy("quota_blocking", blocking)
    try:
        with InProcessDaemon(daemon={"max_prepares_per_uid": 1}) as d:
            clients = [d.connect(30) for _ in range(3)]
            try:
                messages = [{"role": "user", "content": "hi"}]
                params = {"messages": messages, "strategies": "quota_blocking"}
                ids = [c.request("prepare_prompt", params) for c in clients]
                wait_for(lambda: running[0] >= 1, 10, "the first prepare to run")

                def waiting() -> int:
                    count: int = d.call(lambda: d.server.quotas.waiting.get(os.getuid(), 0))
                    return count

                wait_for(lambda: waiting() == 2, 10, "the two others to wait for a slot")
                assert running == [1, 1]
                gate.set()
                for client, rid in zip(clients, ids, strict=True):
                    assert client.response(rid, timeout=20)["result"]["messages"]
                assert running[1] == 1
            finally:
                for client in clients:
                    client.close()
    finally:
        gate.set()
        scoutd.unregister_strategy("quota_blocking")


def _turns(count: int, text: str = "tiny") -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{text} {i}"} for i in range(count)]


def _open(client: LineClient, d: InProcessDaemon, name: str) -> str:
    reply = client.call("session.open", {"save_file": os.path.join(d.dir, name)})
    session: str = reply["result"]["session"]
    return session


def test_sessions_are_bounded_per_uid_by_what_they_hold() -> None:
    first, second = _turns(200), _turns(120, "more")
    bound = _held(first) + _held(second) - 1
    with InProcessDaemon(daemon={"max_session_bytes_per_uid": bound}) as d, d.connect() as c:
        a, b = _open(c, d, "a.chat"), _open(c, d, "b.chat")
        assert c.call("prepare_prompt", {"session": a, "messages": first})["result"]
        assert _counts(c)["session_bytes"] == _held(first)
        refused = _error(c.call("prepare_prompt", {"session": b, "messages": second}))
        assert refused["code"] == -32004
        assert refused["data"] == {"limit": bound, "key": "max_session_bytes_per_uid"}
        assert "max_session_bytes_per_uid" in refused["message"]
        # nothing lost: the first session holds its conversation, the second nothing
        reply = c.call("prepare_prompt", {"session": a, "append": [], "base": len(first)})
        assert reply["result"]["messages"] == first
        assert _counts(c)["session_bytes"] == _held(first)
        c.call("session.close", {"session": a})
        assert _counts(c)["session_bytes"] == 0  # a closed session is no longer counted
        assert c.call("prepare_prompt", {"session": b, "messages": second})["result"]
        assert _counts(c)["session_bytes"] == _held(second)


def test_sessions_are_bounded_in_total_and_freed_with_their_connection() -> None:
    messages = _turns(150)
    bound = 2 * _held(messages) + 10
    with InProcessDaemon(daemon={"max_total_session_bytes": bound}) as d, d.connect() as c:
        with d.connect() as leaving:
            for name in ("a.chat", "b.chat"):
                session = _open(leaving, d, name)
                reply = leaving.call("prepare_prompt", {"session": session, "messages": messages})
                assert reply["result"]
            session = _open(c, d, "c.chat")
            refused = _error(c.call("prepare_prompt", {"session": session, "messages": messages}))
            assert refused["code"] == -32004
            assert refused["data"] == {"limit": bound, "key": "max_total_session_bytes"}
            assert "max_total_session_bytes" in refused["message"]
        wait_for(lambda: _counts(c)["session_bytes"] == 0, 10, "the closed connection's sessions")
        assert c.call("prepare_prompt", {"session": session, "messages": messages})["result"]


def test_a_forgotten_conversation_is_no_longer_counted() -> None:
    with InProcessDaemon(daemon={"session_idle_timeout": 0.05}) as d, d.connect() as c:
        session = _open(c, d, "idle.chat")
        assert c.call("prepare_prompt", {"session": session, "messages": _turns(50)})["result"]
        wait_for(lambda: _counts(c)["session_bytes"] == 0, 10, "the idle conversation to go")


def test_the_session_bound_counts_what_is_held_not_the_json() -> None:
    """Tiny messages hold many times their JSON size: ``max_session_bytes``
    counts what they hold, so a conversation well under it as JSON is refused."""
    messages = _turns(2000, "t")
    assert json_size(messages) * 4 < _held(messages)
    bound = json_size(messages) * 4
    with InProcessDaemon(daemon={"max_session_bytes": bound}) as d, d.connect() as c:
        session = _open(c, d, "tiny.chat")
        refused = _error(c.call("prepare_prompt", {"session": session, "messages": messages}))
        assert refused["code"] == -32004 and "max_session_bytes" in refused["message"]


def test_over_the_total_only_a_uid_holding_unread_answers_is_refused() -> None:
    quotas = Quotas(lambda: DaemonConfig(max_queued_response_bytes_total=100), workers=4)
    quotas.add_queued(1000, 150)  # one uid leaves 150 bytes unread: the total is passed
    quotas.check_answers(1001, 7)  # another, with nothing unread, goes on
    quotas.add_queued(1001, 10)
    for uid in (1000, 1001):
        try:
            quotas.check_answers(uid, 7)
        except protocol.ProtocolError as exc:
            assert exc.code == protocol.TOO_LARGE and exc.id == 7
            assert "max_queued_response_bytes_total = 100" in exc.message
        else:
            raise AssertionError(f"uid {uid} was not refused")
    quotas.add_queued(1000, -150)
    quotas.add_queued(1001, -10)
    assert (quotas.queued, quotas.queued_by_uid) == (0, {})


def test_a_line_trickled_in_byte_by_byte_holds_about_its_bytes() -> None:
    """What ``pending_request_bytes`` counts is what an unfinished line holds, however
    small the pieces it arrives in (one object per piece took 40 bytes a byte)."""
    reader = LineReader(MIB)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            assert reader.feed(b"x", 0.0) == []
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert reader.pending == 100_000
    assert held <= 2 * reader.pending + 64 * 1024, held
    assert reader.feed(b"\n", 0.0) == [b"x" * 100_000]


@pytest.mark.parametrize("key", ["max_queued_response_bytes", "max_queued_response_bytes_per_uid"])
def test_notifications_a_client_never_reads_are_bounded(key: str) -> None:
    """``session.aborted`` pushes to a client that never reads count as unread answers
    and stop at its bound, or its uid's: the connection is then closed. Before, every
    push was a task of its own holding its line: 200 sessions and 200 aborts held
    14 MB of pushes under a 1 MiB bound, and the daemon grew 175 MB."""
    bound = 64 * 1024
    with InProcessDaemon(daemon={key: bound}) as d:
        chat = os.path.join(d.dir, "chats", "a.chat")
        inbox = os.path.join(d.dir, "chats", "a.inbox")
        os.makedirs(inbox)
        with d.connect(30) as agent, d.connect(30) as other:
            for _ in range(100):
                assert "result" in agent.call("session.open", {"save_file": chat})
            assert _counts(other)["connections"] == 2
            closed = False
            for n in range(60):  # the agent never reads again; each abort pushes 100 lines
                with open(os.path.join(inbox, "abort.tmp"), "w") as handle:
                    handle.write(f"stop {n} " + "x" * 1000)
                os.rename(os.path.join(inbox, "abort.tmp"), os.path.join(inbox, "abort"))
                wait_for(
                    lambda: (
                        not os.path.exists(os.path.join(inbox, "abort"))
                        or _counts(other)["connections"] == 1
                    ),
                    10,
                    "the abort claimed",
                )
                counts = _counts(other)
                # the bound, plus one push (a line is counted before it is refused)
                assert counts["queued_response_bytes"] <= bound + 2048, counts
                if counts["connections"] == 1:
                    closed = True
                    break
            assert closed, "the connection of a client that never reads stayed open"
            assert wait_for(lambda: _counts(other)["queued_response_bytes"] == 0 or None, 10, "0")
            closing = f"WARNING scoutd.server: closing a connection of pid {os.getpid()}:"
            pattern = rf"{closing} it does not read its notifications \(\d+ bytes waiting\)\n"
            assert re.search(pattern, d.log())


def test_one_uid_has_at_most_its_share_of_requests_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every request is a turn of the one event loop, even one refused at once: 64
    connections of one uid sending tiny invalid lines (4,096 in flight) made another
    uid's ``status`` take 0.7 s (p50) and up to 12 s; now 42 ms and 130 ms. Counted,
    not timed: over its connections a uid has at most ``MAX_REQUESTS_PER_UID``
    requests running (the others wait, read, for their turn), and every request is
    still answered."""
    running = [0, 0]  # request tasks running now, the most at once
    handle = PeerConnection._handle

    async def counted(self: PeerConnection, line: bytes, late: bool) -> None:
        running[0] += 1
        running[1] = max(running)
        try:
            await handle(self, line, late)
        finally:
            running[0] -= 1

    monkeypatch.setattr(PeerConnection, "_handle", counted)
    conns, per_conn = 8, 64  # 512 requests that wait for the uid's one prepare slot
    big = [{"role": "user", "content": "x" * 70_000}]  # not inline: in a worker, in turn
    params = {"messages": big, "strategies": "none", "answer": "indices"}  # a short answer
    line = {"jsonrpc": "2.0", "method": "prepare_prompt", "params": params}
    lines = b"".join(json.dumps({**line, "id": i}).encode() + b"\n" for i in range(per_conn))
    with InProcessDaemon(daemon={"max_prepares_per_uid": 1}) as d:
        shared = d._server.shared
        clients = [d.connect(60) for _ in range(conns)]
        senders = [client.sock.dup() for client in clients]  # the daemon may stop reading
        try:
            writers = [threading.Thread(target=s.sendall, args=(lines,)) for s in senders]
            for writer in writers:
                writer.start()
            for client in clients:  # nothing lost
                for rid in range(per_conn):
                    assert "result" in client.response(rid, timeout=60)
            assert 0 < running[1] <= MAX_REQUESTS_PER_UID, running
            for writer in writers:
                writer.join(10)
            assert wait_for(lambda: shared.in_flight == 0, 10, "no request in flight")
            assert shared.quotas._requests == {}  # every slot given back
        finally:
            for client, sender in zip(clients, senders, strict=True):
                sender.close()
                client.close()
