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
from scoutd.strategies.inbox import write_abort

from ..support.daemon import Daemon

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
        waiter = threading.Thread(target=lambda: outcome.append(session.wait_aborted(ABORT_WAIT)))
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
