"""``Session.aborted`` is live: the daemon's push shows without any other call.

Against a real daemon subprocess: an ``abort`` file is dropped into a
session's inbox and only the attribute is read, in a bounded loop.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import anyio
import pytest

from scoutd.client import AsyncClient, Client
from scoutd.errors import DaemonUnavailable
from scoutd.strategies.inbox import write_abort

from ..support.daemon import Daemon, wait_for

ABORT_WAIT = 10.0  # the daemon pushes aborts within milliseconds; this bounds a failure


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


def chat(daemon: Daemon, name: str) -> str:
    os.makedirs(os.path.join(daemon.dir, "chats"), exist_ok=True)
    return os.path.join(daemon.dir, "chats", f"{name}.chat")


def test_reading_the_attribute_sees_the_push(daemon: Daemon) -> None:
    save_file = chat(daemon, "live")
    with Client(daemon.socket_path) as client, client.session(save_file) as session:
        assert not session.aborted and session.reason is None
        write_abort(save_file, "stop now")
        deadline = time.monotonic() + ABORT_WAIT
        reads = 0
        while not session.aborted and time.monotonic() < deadline:  # no other call
            reads += 1
            time.sleep(0.005)
        assert session.aborted, f"not seen after {reads} reads"
        assert session.reason == "stop now"
        assert not session.lost


def test_the_attribute_sees_the_push_on_the_async_client_too(daemon: Daemon) -> None:
    save_file = chat(daemon, "live-async")

    async def run() -> None:
        async with AsyncClient(daemon.socket_path) as client, client.session(save_file) as s:
            assert not s.aborted
            write_abort(save_file, "async stop")
            with anyio.fail_after(ABORT_WAIT):
                # polling the attribute is the point: no event, no other call
                while not s.aborted:  # noqa: ASYNC110
                    await anyio.sleep(0.005)
            assert s.reason == "async stop"

    anyio.run(run)


def test_a_thread_waiting_for_the_abort_reads_for_the_others(daemon: Daemon) -> None:
    """One thread blocks in wait_aborted; another's calls still get their answers,
    routed by whichever thread reads."""
    save_file = chat(daemon, "shared")
    with Client(daemon.socket_path, timeout=ABORT_WAIT) as client:
        session = client.open_session(save_file)
        outcome: list[bool] = []
        waiter = threading.Thread(
            target=lambda: outcome.append(session.wait_aborted(ABORT_WAIT)), daemon=True
        )
        waiter.start()
        try:
            for n in range(20):
                prompt = client.prepare_prompt([{"role": "user", "content": f"m{n}"}], "none")
                assert prompt == [{"role": "user", "content": f"m{n}"}]
            assert waiter.is_alive()  # still waiting: nothing aborted it
            write_abort(save_file, "done")
        finally:
            waiter.join(ABORT_WAIT + 5)
        assert outcome == [True] and session.reason == "done"
        session.close()


def _reading(client: Client | AsyncClient) -> bool:
    """Whether a caller holds the client's connection's read lock."""
    conn = client._conn
    return conn is not None and conn.read_lock.held


def test_closing_the_client_wakes_a_thread_waiting_without_limit(daemon: Daemon) -> None:
    client = Client(daemon.socket_path)
    session = client.open_session(chat(daemon, "closing"))
    outcome: list[BaseException | bool] = []

    def wait() -> None:
        try:
            outcome.append(session.wait_aborted(None))
        except DaemonUnavailable as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    # closing must wake a waiter already in its read, not one that has not started
    wait_for(lambda: _reading(client), ABORT_WAIT, "the waiter reading")
    client.close()
    waiter.join(ABORT_WAIT)
    assert not waiter.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], DaemonUnavailable)
    assert "the client closed the connection" in str(outcome[0])
    assert session.lost


def test_closing_the_async_client_wakes_a_task_waiting_without_limit(daemon: Daemon) -> None:
    async def run() -> None:
        client = AsyncClient(daemon.socket_path)
        session = await client.open_session(chat(daemon, "closing-async"))
        outcome: list[BaseException | bool] = []

        async def wait() -> None:
            try:
                outcome.append(await session.wait_aborted(None))
            except DaemonUnavailable as exc:
                outcome.append(exc)

        with anyio.fail_after(ABORT_WAIT):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wait)
                for _ in range(2000):  # at most 10 s; fail_after bounds it too
                    if _reading(client):
                        break
                    await anyio.sleep(0.005)
                await client.aclose()
        assert len(outcome) == 1 and isinstance(outcome[0], DaemonUnavailable)
        assert session.lost

    anyio.run(run)
