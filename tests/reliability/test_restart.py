"""Daemon restarts with sessions open: a clean drop, then a reconnect when asked.

Clients must see the connection end as :class:`DaemonUnavailable` (never a hang,
a decode error or half a line), sessions must report the loss, and a client made
with ``reconnect=True`` (or calling ``reconnect()``) must come back to the new
daemon with bounded exponential backoff.
"""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import signal
import socket
import struct
import termios
import threading
import time
from collections.abc import Iterator

import anyio
import pytest

from scoutd.client import AsyncClient, Client
from scoutd.errors import DaemonUnavailable
from scoutd.testing.daemon import STOP_TIMEOUT
from tests.support.daemon import Daemon, wait_for

LOSS = 5.0  # seconds for a client to notice that the daemon is gone

GATE = '''
import os, time

def gate(messages):
    """Hold the request until gate.release exists (bounded), after creating gate.started."""
    here = os.path.dirname(os.path.abspath(__file__))
    open(os.path.join(here, "gate.started"), "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(here, "gate.release")) and time.monotonic() < deadline:
        time.sleep(0.01)
    return messages
'''


def gated_daemon(shutdown_timeout: float = 2.0) -> Daemon:
    """A daemon (not started) with the ``gate`` strategy."""
    d = Daemon(plugins={"gate": "gate:gate"}, daemon={"shutdown_timeout": shutdown_timeout})
    with open(os.path.join(d.dir, "gate.py"), "w") as handle:
        handle.write(GATE)
    return d


@pytest.fixture
def daemon(request: pytest.FixtureRequest) -> Iterator[Daemon]:
    """The gated daemon; a test may name its ``shutdown_timeout`` (indirect)."""
    with gated_daemon(getattr(request, "param", 2.0)) as d:
        yield d


def unread_by_peer(sock: socket.socket) -> int:
    """Bytes sent on a Unix stream socket that its peer has not read yet (``SIOCOUTQ``)."""
    queued = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
    count: int = struct.unpack("i", queued)[0]
    return count


def restart_later(d: Daemon, delay: float) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        d.start()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_sessions_and_raw_clients_see_a_clean_drop(daemon: Daemon, how: signal.Signals) -> None:
    save_file = os.path.join(daemon.dir, "agent.chat")
    with Client(daemon.socket_path, timeout=10) as client, daemon.connect() as raw:
        session = client.open_session(save_file)
        assert "result" in raw.call("session.open", {"save_file": save_file})
        daemon.signal(how)
        daemon.wait(10)
        with pytest.raises(DaemonUnavailable, match="lost"):  # told, not timed out
            session.wait_aborted(LOSS)
        assert session.lost and not session.aborted
        assert raw.read_line(LOSS) == b""  # an end of stream, not half a line
        with pytest.raises(DaemonUnavailable, match="cannot connect"):
            client.status()


def test_a_request_in_flight_fails_cleanly_when_the_daemon_is_killed(daemon: Daemon) -> None:
    failure: list[BaseException] = []

    def call() -> None:
        with Client(daemon.socket_path, timeout=20) as client:
            try:
                client.prepare_prompt([{"role": "user", "content": "x"}], "gate")
            except BaseException as exc:
                failure.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    wait_for(lambda: os.path.exists(os.path.join(daemon.dir, "gate.started")), 10, "the gate")
    daemon.signal(signal.SIGKILL)
    caller.join(LOSS)
    assert not caller.is_alive()
    [error] = failure
    assert isinstance(error, DaemonUnavailable)


def test_reconnect_waits_for_the_restarted_daemon_with_backoff(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "again.chat")
    with Client(daemon.socket_path, timeout=15, reconnect=True) as client:
        old = client.open_session(save_file)
        daemon.signal(signal.SIGKILL)
        daemon.wait(10)
        restarter = restart_later(daemon, 1.0)
        started = time.monotonic()
        try:
            status = client.status()  # waits for the new daemon instead of failing
        finally:
            restarter.join(30)
        assert time.monotonic() - started > 0.9  # it waited for the restart
        assert status["counts"]["sessions"] == 0  # sessions do not survive their daemon
        assert old.lost
        with client.session(save_file) as new:
            assert not new.lost
            assert client.status()["counts"]["sessions"] == 1


def test_reconnect_is_bounded_by_the_timeout(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "no-such-daemon.sock")
    started = time.monotonic()
    with pytest.raises(DaemonUnavailable, match=r"after \d+ attempts"):
        Client(path, timeout=1.0, reconnect=True).status()
    assert time.monotonic() - started > 0.7  # it kept trying until the timeout
    with pytest.raises(DaemonUnavailable) as caught:  # without reconnect: one attempt
        Client(path, timeout=1.0).status()
    assert "attempts" not in str(caught.value)


def test_explicit_reconnect(daemon: Daemon) -> None:
    with Client(daemon.socket_path, timeout=15) as client:
        for _ in range(5):
            client.status()
        before = client.status()["counts"]["requests"]
        daemon.stop()
        restarter = restart_later(daemon, 0.5)
        try:
            client.reconnect()
        finally:
            restarter.join(30)
        # a new daemon answers: its count of requests started again
        assert client.status()["counts"]["requests"] < before
        wait_for(lambda: client.status()["counts"]["connections"] == 1, 10, "one connection")


@pytest.mark.anyio
async def test_async_client_drop_and_reconnect(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "async.chat")
    async with AsyncClient(daemon.socket_path, timeout=15, reconnect=True) as client:
        async with client.session(save_file) as session:
            daemon.signal(signal.SIGKILL)
            await anyio.to_thread.run_sync(daemon.wait, 10)
            with pytest.raises(DaemonUnavailable):
                await session.wait_aborted(LOSS)
            assert session.lost
            restarter = restart_later(daemon, 1.0)
            try:
                status = await client.status()
            finally:
                await anyio.to_thread.run_sync(restarter.join, 30)
            assert status["counts"]["sessions"] == 0
        await client.reconnect()
        assert (await client.status())["counts"]["connections"] >= 1


@pytest.mark.parametrize("daemon", [30.0], indirect=True)
def test_a_shutdown_runs_every_request_read_before_it_and_refuses_later_ones(
    daemon: Daemon,
) -> None:
    """SIGTERM: each request already read runs to its answer, even one still
    waiting for a slot (64 run at once on a connection); one read after the
    shutdown began gets ``SHUTTING_DOWN``. None is left without an answer.

    Within a ``shutdown_timeout`` long enough for all of them on a loaded machine:
    under 2 s, the test's own steps between the signal and the gate's release
    took longer there, and the daemon rightly dropped what was still running."""
    save_file = os.path.join(daemon.dir, "agent.chat")
    count = 100
    params = {"messages": [{"role": "user", "content": "x"}], "save_file": save_file}
    gated = params | {"strategies": "gate"}
    lines = [
        json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "prepare_prompt", "params": gated}
        ).encode()
        + b"\n"
        for i in range(count)
    ]
    with daemon.connect() as raw, daemon.connect() as later:
        raw.send_raw(b"".join(lines))
        wait_for(lambda: os.path.exists(os.path.join(daemon.dir, "gate.started")), 10, "the gate")
        wait_for(lambda: unread_by_peer(raw.sock) == 0, 10, "every line read by the daemon")
        daemon.signal(signal.SIGTERM)
        wait_for(lambda: "shutting down" in daemon.log(), 10, "the shutdown")
        assert f"shutting down ({count} request(s) in flight)" in daemon.log()
        refused = later.call("prepare_prompt", params)
        assert refused["error"]["code"] == -32007
        open(os.path.join(daemon.dir, "gate.release"), "w").close()
        answers = [json.loads(raw.read_line(LOSS)) for _ in range(count)]
        assert sorted(answer["id"] for answer in answers) == list(range(count))
        assert all("result" in answer for answer in answers), answers
        assert raw.read_line(LOSS) == b""
    assert daemon.wait(STOP_TIMEOUT) == 0
