"""The clients under a careless or hostile caller, against a real daemon subprocess.

A cancelled asyncio task, a session whose connection is gone, a wait with no
time left, a forked child and a client closed under a reader: each leaves the
client usable, or fails with the documented :class:`~scoutd.errors.DaemonUnavailable`.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import time
from typing import Any

import pytest

from scoutd.client import AsyncClient, Client
from scoutd.errors import DaemonUnavailable
from scoutd.strategies.inbox import write_abort

from ..support.daemon import Daemon, wait_for
from .helpers import ABORT_WAIT, chat_path

# Far more than a Unix socket's buffer: sending it takes many waits for the
# daemon to read, where a cancellation can land.
BIG = 8_000_000


def one(tag: str, size: int = 0) -> list[dict[str, Any]]:
    return [{"role": "user", "content": tag + "x" * size}]


def test_an_asyncio_cancel_mid_send_keeps_the_connection_and_its_sessions(
    daemon: Daemon,
) -> None:
    """``Task.cancel()`` (``asyncio.wait_for``, ``asyncio.timeout``), which no anyio
    shield stops, used to cut the line and drop the connection, and with it
    every session on it; the line now goes out whole, then the task is cancelled."""

    async def run() -> None:
        save_file = chat_path(daemon, "cancel-send")
        async with (
            AsyncClient(daemon.socket_path, timeout=10) as client,
            client.session(save_file) as session,
        ):
            conn = client._conn
            assert conn is not None
            conversation = one("task")
            assert await session.prepare_prompt(conversation, "none") == conversation
            for attempt in range(4):
                task = asyncio.ensure_future(client.prepare_prompt(one("big", BIG), "none"))
                for _ in range(1000):  # until it is sending (bounded)
                    if conn.send_lock._lock.locked() or task.done():
                        break
                    await asyncio.sleep(0)
                await asyncio.sleep(0.001 * (attempt + 1))  # some of it is out
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert client._conn is conn and conn.state.lost is None, attempt
                conversation = [*conversation, *one(f"next{attempt}")]
                assert await session.prepare_prompt(conversation, "none") == conversation
                tag = f"k{attempt}"
                assert await client.prepare_prompt(one(tag), "none") == one(tag)

    asyncio.run(run())


def test_a_session_whose_connection_is_gone_says_so(daemon: Daemon) -> None:
    """Its calls went out on the client's new connection, to come back as an
    "unknown session" RemoteError; now they fail with why, sending nothing."""
    with Client(daemon.socket_path, timeout=10) as client:
        session = client.open_session(chat_path(daemon, "gone"))
        assert session.prepare_prompt(one("a"), "none") == one("a")
        client.reconnect()
        requests = client.status()["counts"]["requests"]
        for call in (
            lambda: session.prepare_prompt(one("a") + one("b"), "none"),
            lambda: session.recall(search="a"),
            lambda: client.prepare_prompt(one("c"), "none", session=session),
        ):
            with pytest.raises(DaemonUnavailable, match=f"session {session.id} ended"):
                call()
        assert client.status()["counts"]["requests"] == requests + 1  # the status only
        session.close()


def test_wait_aborted_with_no_time_left_sees_a_push_already_there(daemon: Daemon) -> None:
    """``wait_aborted(0)`` answered False while ``aborted`` said True."""
    save_file = chat_path(daemon, "wait-zero")
    with Client(daemon.socket_path) as client, client.session(save_file) as session:
        assert session.wait_aborted(0) is False
        write_abort(save_file, "stop")
        assert client._conn is not None
        sock = client._conn.stream._sock
        wait_for(lambda: select.select([sock], [], [], 0)[0], ABORT_WAIT, "the push")
        assert session.wait_aborted(0) is True
        assert session.reason == "stop"


def test_a_forked_child_gets_a_connection_of_its_own(daemon: Daemon) -> None:
    """Parent and child read the one socket: each took the other's answers and
    both timed out (or paired an answer with the other's request of the same id).
    The child now connects anew; its close leaves the parent's connection alone."""
    client = Client(daemon.socket_path, timeout=5)
    session = client.open_session(chat_path(daemon, "fork"))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        outcome = "ok"
        try:
            for n in range(100):
                if client.prepare_prompt(one(f"child{n}"), "none") != one(f"child{n}"):
                    outcome = f"wrong answer {n}"
            try:
                _ = session.aborted
                session.prepare_prompt(one("child"), "none")
                outcome = "the parent's session answered the child"
            except DaemonUnavailable:
                pass
            client.close()
        except BaseException as exc:
            outcome = repr(exc)
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    try:
        for n in range(100):
            assert client.prepare_prompt(one(f"parent{n}"), "none") == one(f"parent{n}")
        deadline = time.monotonic() + 20
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            assert time.monotonic() < deadline, "the child did not finish"
            time.sleep(0.01)
        pid = 0
        assert os.read(read, 1000).decode() == "ok"
        # the child has exited: a shutdown of the socket by it would fail these at once
        assert client.prepare_prompt(one("after"), "none") == one("after")
        assert session.prepare_prompt(one("mine"), "none") == one("mine")
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(read)
        client.close()


def test_a_reader_of_a_socket_closed_under_it_gets_daemon_unavailable(daemon: Daemon) -> None:
    """A thread closing the client between another's check of the connection and
    its poll made the poll raise ValueError (a closed socket's descriptor is -1)."""
    with Client(daemon.socket_path) as client, client.session(chat_path(daemon, "c")) as s:
        assert client._conn is not None
        client._conn.stream.close()  # as `lose` does, before the reader notices
        with pytest.raises(DaemonUnavailable):
            s.wait_aborted(0.5)
        assert s.lost
