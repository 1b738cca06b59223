"""The clients against a peer on the socket path that is no daemon, or a broken one
(:mod:`.peers`)."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable

import pytest

from scoutd.client import AsyncClient, Client
from scoutd.client._common import LineTooLong, unfinished_line
from scoutd.errors import DaemonUnavailable

from .peers import Peer, endless_line

MIB = 1024 * 1024
BOUND = MIB  # the clients' max_answer_bytes in these tests


# ---------------------------------------------------------------- an endless line


def test_an_endless_line_is_cut_at_max_answer_bytes(make_peer: Callable[..., Peer]) -> None:
    """Before: the client held the line until its timeout (1.8 GiB in 3 s), or forever."""
    peer = make_peer(endless_line)
    started = time.monotonic()
    with Client(peer.path, timeout=10, max_answer_bytes=BOUND) as client:
        with pytest.raises(DaemonUnavailable, match="max_answer_bytes"):
            client.status()
        assert time.monotonic() - started < 5  # not the timeout
        # what the client took is the bound and one read more, what the socket held aside
        assert peer.sent < BOUND + 4 * MIB


@pytest.mark.anyio
async def test_async_an_endless_line_is_cut_at_max_answer_bytes(
    make_peer: Callable[..., Peer],
) -> None:
    peer = make_peer(endless_line)
    started = time.monotonic()
    async with AsyncClient(peer.path, timeout=10, max_answer_bytes=BOUND) as client:
        with pytest.raises(DaemonUnavailable, match="max_answer_bytes"):
            await client.status()
        assert time.monotonic() - started < 5
        assert peer.sent < BOUND + 4 * MIB


def test_a_session_read_without_waiting_gives_up_an_endless_line(
    make_peer: Callable[..., Peer],
) -> None:
    """``Session.lost`` (and ``aborted``) route what has arrived: an endless line
    pushed after ``session.open`` loses the connection there too."""

    def open_then_endless(peer: Peer, sock: socket.socket, request_id: int) -> None:
        peer.write(sock, b'{"jsonrpc":"2.0","id":%d,"result":{"session":"s1"}}\n' % request_id)
        chunk = b"y" * (64 * 1024)
        if peer.write(sock, b'{"jsonrpc":"2.0","method":"session.aborted","params":"'):
            while peer.write(sock, chunk):
                pass

    peer = make_peer(open_then_endless)
    with Client(peer.path, timeout=10, max_answer_bytes=BOUND) as client:
        session = client.open_session("/tmp/chat.jsonl")
        deadline = time.monotonic() + 5
        while not session.lost and time.monotonic() < deadline:
            time.sleep(0.01)
        assert session.lost and not session.aborted
        with pytest.raises(DaemonUnavailable, match="max_answer_bytes"):
            session.prepare_prompt([{"role": "user", "content": "hi"}])
        assert peer.sent < BOUND + 4 * MIB


def _status_of_size(size: int) -> Callable[[Peer, socket.socket, int], None]:
    """A script answering ``status`` with a line of exactly ``size`` bytes (newline aside)."""

    def answer(peer: Peer, sock: socket.socket, request_id: int) -> None:
        head = b'{"jsonrpc":"2.0","id":%d,"result":{"pad":"' % request_id
        tail = b'"}}'
        pad = b"p" * (size - len(head) - len(tail))
        line = head + pad + tail
        assert len(line) == size
        # in pieces, so that the line spans many reads, its newline in the last one
        for start in range(0, len(line), 100_000):
            peer.write(sock, line[start : start + 100_000])
        peer.write(sock, b"\n")

    return answer


@pytest.mark.parametrize("over", [0, 1])
def test_an_answer_of_max_answer_bytes_is_read_one_more_is_not(
    over: int, make_peer: Callable[..., Peer]
) -> None:
    peer = make_peer(_status_of_size(BOUND + over))
    with Client(peer.path, timeout=10, max_answer_bytes=BOUND) as client:
        if over:
            with pytest.raises(DaemonUnavailable, match="max_answer_bytes"):
                client.status()
        else:
            assert len(client.status()["pad"]) > BOUND - 100


@pytest.mark.anyio
@pytest.mark.parametrize("over", [0, 1])
async def test_async_an_answer_of_max_answer_bytes_is_read_one_more_is_not(
    over: int, make_peer: Callable[..., Peer]
) -> None:
    peer = make_peer(_status_of_size(BOUND + over))
    async with AsyncClient(peer.path, timeout=10, max_answer_bytes=BOUND) as client:
        if over:
            with pytest.raises(DaemonUnavailable, match="max_answer_bytes"):
                await client.status()
        else:
            assert len((await client.status())["pad"]) > BOUND - 100


def test_every_line_counts_against_the_bound_however_it_is_cut() -> None:
    """``unfinished_line`` against a plain oracle: the lines of the bytes joined."""
    rng = random.Random(7)
    for _ in range(3000):
        limit = rng.randint(0, 12)
        chunks = [bytes(rng.choices(b"ab\n", k=rng.randint(0, 20))) for _ in range(4)]
        lines = b"".join(chunks).split(b"\n")
        held = 0
        try:
            for chunk in chunks:
                held = unfinished_line(held, chunk, limit)
        except LineTooLong:
            assert max(map(len, lines)) > limit
        else:
            assert max(map(len, lines)) <= limit and held == len(lines[-1])


# ---------------------------------------------------------------- pushes nobody reads


def _push(session: str, reason: str = "stop") -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"session.aborted","params":{"session":"%s",'
        b'"save_file":"/tmp/c","reason":"%s"}}\n' % (session.encode(), reason.encode())
    )


def test_aborts_pushed_for_sessions_not_open_here_are_bounded(
    make_peer: Callable[..., Peer],
) -> None:
    """A peer pushing aborts for ever new sessions: before, each one was kept for the
    connection's life (20,000 pushes, 20,000 kept); an abort of a session open on the
    connection, and one pushed before the answer to ``session.open``, still count."""
    flood = b"".join(_push(f"stranger-{i}", "r" * 100) for i in range(20_000))

    def script(peer: Peer, sock: socket.socket, request_id: int) -> None:
        if request_id == 1:  # session.open: aborted at once (pushed before the answer)
            peer.write(sock, _push("mine", "why") + b'{"jsonrpc":"2.0","id":1,')
            peer.write(sock, b'"result":{"session":"mine"}}\n')
        else:
            peer.write(sock, flood + b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % request_id)

    peer = make_peer(script)
    with Client(peer.path, timeout=10) as client:
        session = client.open_session("/tmp/c")
        assert client.status() == {}
        assert session.reason == "why"
        state = session._conn.state
        kept = [f"stranger-{i}" for i in range(20_000) if state.abort_reason(f"stranger-{i}")]
        assert 0 < len(kept) <= 4096
        assert kept[-1] == "stranger-19999"  # the newest are kept, the oldest let go


@pytest.mark.anyio
async def test_async_an_abort_pushed_after_its_session_closed_is_let_go(
    make_peer: Callable[..., Peer],
) -> None:
    """A session closed before its abort came (the daemon pushed it before it read the
    close): before, its abort was kept for the connection's life, one for each such
    session of a long-lived client; now it goes with the oldest pushes nobody reads."""
    flood = b"".join(_push(f"stranger-{i}") for i in range(5000))

    def script(peer: Peer, sock: socket.socket, request_id: int) -> None:
        answer = b'{"jsonrpc":"2.0","id":%d,"result":{"session":"s1"}}\n' % request_id
        if request_id == 2:  # session.close: answered, then the abort of the session
            answer += _push("s1")
        elif request_id == 3:
            answer = flood + answer
        peer.write(sock, answer)

    peer = make_peer(script)
    async with AsyncClient(peer.path, timeout=10) as client:
        async with client.session("/tmp/c"):
            pass
        await client.status()
        conn = client._conn
        assert conn is not None
        assert conn.state.abort_reason("stranger-4999") == "stop"
        assert conn.state.abort_reason("s1") is None


# ------------------------------------------------------- a session's answer that is not one

NO_PROMPT = b'{"report":[]}'  # neither the prompt nor a delta of it
NEVER_APPLIES = b'{"report":[],"keep":0,"append":[],"checksum":5,"replace":[]}'


def _session_peer(result: bytes) -> Callable[[Peer, socket.socket, int], None]:
    """Opens session ``s1``, then answers every ``prepare_prompt`` with ``result``."""

    def script(peer: Peer, sock: socket.socket, request_id: int) -> None:
        answer = result if request_id > 1 else b'{"session":"s1"}'
        peer.write(sock, b'{"jsonrpc":"2.0","id":%d,"result":%s}\n' % (request_id, answer))

    return script


@pytest.mark.parametrize("result", [NO_PROMPT, NEVER_APPLIES], ids=["no prompt", "bad delta"])
def test_a_session_answer_with_no_prompt_that_applies_is_daemon_unavailable(
    result: bytes, make_peer: Callable[..., Peer]
) -> None:
    """Before: an answer without a prompt gave the agent an empty prompt, a delta that
    does not apply even to the whole conversation raised ``DeltaMismatch``, and the
    connection went on (docs/PROTOCOL.md: ``DaemonUnavailable``, the connection dropped)."""
    peer = make_peer(_session_peer(result))
    with Client(peer.path, timeout=5) as client:
        session = client.open_session("/tmp/c")
        with pytest.raises(DaemonUnavailable, match="unreadable answer to prepare_prompt"):
            session.prepare_prompt([{"role": "user", "content": "hi"}])
        assert session.lost


@pytest.mark.anyio
@pytest.mark.parametrize("result", [NO_PROMPT, NEVER_APPLIES], ids=["no prompt", "bad delta"])
async def test_async_a_session_answer_with_no_prompt_that_applies_is_daemon_unavailable(
    result: bytes, make_peer: Callable[..., Peer]
) -> None:
    peer = make_peer(_session_peer(result))
    async with AsyncClient(peer.path, timeout=5) as client, client.session("/tmp/c") as session:
        with pytest.raises(DaemonUnavailable, match="unreadable answer to prepare_prompt"):
            await session.prepare_prompt([{"role": "user", "content": "hi"}])
        assert session.lost


def test_a_malformed_abort_push_gives_the_connection_up(make_peer: Callable[..., Peer]) -> None:
    """An abort push that is not this protocol loses the connection (the call
    fails closed), and the agent's log gets no line per push (it got a WARNING
    each, and the session opened as if nothing had come)."""

    def malformed_then_open(peer: Peer, sock: socket.socket, request_id: int) -> None:
        peer.write(sock, b'{"jsonrpc":"2.0","method":"session.aborted","params":{"session":1}}\n')
        peer.write(sock, b'{"jsonrpc":"2.0","id":%d,"result":{"session":"s1"}}\n' % request_id)

    peer = make_peer(malformed_then_open)
    with (
        Client(peer.path, timeout=10) as client,
        pytest.raises(DaemonUnavailable, match="unreadable line"),
    ):
        client.open_session("/tmp/chat.jsonl")
