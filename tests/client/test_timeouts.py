"""A client's timeout of any size: a long one waits, a NaN is refused at once.

``poll`` takes its wait in milliseconds as a C int (about 24.8 days) and a
lock's wait is bounded too (``threading.TIMEOUT_MAX``): ``Client(timeout=1e9)``
once raised ``OverflowError`` from inside its first call, and ``timeout=nan``
a ``ValueError`` about a lock. A library caller sees neither: a timeout past
what the waits can take is held to their longest wait, and a NaN is refused
by the constructor.
"""

from __future__ import annotations

import math
import select
import socket
import threading

import anyio
import pytest

from scoutd.client import AsyncClient, Client, _sockets
from scoutd.client._sockets import wait_ready
from scoutd.inbox import write_abort

from ..support.daemon import Daemon
from .helpers import ABORT_WAIT, chat_path

# Past poll's longest wait (2**31 - 1 ms), past threading.TIMEOUT_MAX, and infinite.
LONG = [3e6, 1e9, 1e10, 1e300, math.inf]
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("timeout", LONG)
def test_a_long_timeout_waits_in_the_blocking_client(daemon: Daemon, timeout: float) -> None:
    save_file = chat_path(daemon, f"long-sync-{timeout:g}")
    outcome: list[object] = []

    def run() -> None:
        try:
            with Client(daemon.socket_path, timeout=timeout) as client:
                assert client.timeout == timeout  # the caller's value, as given
                assert client.status()["version"]
                assert client.prepare_prompt(MESSAGES, "none") == MESSAGES
                session = client.open_session(save_file)
                write_abort(save_file, "stop")
                outcome.append(session.wait_aborted(timeout))
        except BaseException as exc:  # reported below, from the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(ABORT_WAIT)
    assert not worker.is_alive(), "the client did not return"
    assert outcome == [True]


@pytest.mark.parametrize("timeout", LONG)
def test_a_long_timeout_waits_in_the_async_client(daemon: Daemon, timeout: float) -> None:
    save_file = chat_path(daemon, f"long-async-{timeout:g}")

    async def run() -> bool:
        with anyio.fail_after(ABORT_WAIT):
            async with AsyncClient(daemon.socket_path, timeout=timeout) as client:
                assert (await client.status())["version"]
                assert await client.prepare_prompt(MESSAGES, "none") == MESSAGES
                session = await client.open_session(save_file)
                write_abort(save_file, "stop")
                return await session.wait_aborted(timeout)

    assert anyio.run(run) is True


@pytest.mark.parametrize("make", [Client, AsyncClient], ids=["Client", "AsyncClient"])
def test_a_nan_timeout_is_refused_by_the_constructor(make: type) -> None:
    with pytest.raises(ValueError, match="timeout"):
        make("/nonexistent/scoutd.sock", timeout=math.nan)


def test_a_nan_wait_for_an_abort_is_refused(daemon: Daemon) -> None:
    with Client(daemon.socket_path, timeout=ABORT_WAIT) as client:
        session = client.open_session(chat_path(daemon, "nan-wait"))
        with pytest.raises(ValueError, match="timeout"):
            session.wait_aborted(math.nan)
        session.close()


def test_wait_ready_takes_any_length() -> None:
    """Ready at once whatever the limit; not ready within a short one. The
    longest single poll is ``MAX_WAIT``."""
    left, right = socket.socketpair()
    with left, right:
        right.sendall(b"x")
        longest = _sockets.MAX_WAIT
        for seconds in [*LONG, longest, longest + 0.001, None]:
            assert wait_ready(left, select.POLLIN, seconds) is True
        assert left.recv(1) == b"x"
        assert wait_ready(left, select.POLLIN, 0) is False
        assert wait_ready(left, select.POLLIN, 0.01) is False
    assert longest == (2**31 - 1) / 1000
