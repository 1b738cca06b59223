"""The I/O the blocking client needs, on plain sockets and threads.

The same names as ``_backend_anyio.py`` (see there), so that the blocking
client is generated from the async one by dropping ``async`` and ``await``.
The socket stays non-blocking and every wait is a ``poll`` with the time left:
one thread may send while another reads, with no shared socket timeout.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable

from ._reconnect import remaining
from ._sockets import RECV_SIZE, SEND_GRACE, closed_by_peer, read_nowait, wait_ready


class Lock:
    """A lock whose waits end at a deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, deadline: float | None) -> bool:
        """Wait for the lock until ``deadline``; whether it was acquired."""
        left = remaining(deadline)
        return self._lock.acquire(timeout=-1 if left is None else left)

    def try_acquire(self) -> bool:
        """Take the lock if it is free now (never waits)."""
        return self._lock.acquire(blocking=False)

    def release(self) -> None:
        self._lock.release()


def guard() -> threading.Lock:
    """A mutex around the connection's protocol state: a thread sends a request (a
    new id in the table of requests) while another routes the lines it read."""
    return threading.Lock()


class ReadLock:
    """Who reads the connection: one thread at a time, and the others wake at every
    chunk read (:meth:`release`), so a thread whose answer another one read
    stops waiting at once instead of queueing for the socket."""

    def __init__(self) -> None:
        self._held = False
        self._changed = threading.Condition()

    def acquire(self, deadline: float | None, done: Callable[[], bool]) -> bool:
        """Take the lock to read; False when ``done()`` first, or at the deadline."""
        with self._changed:
            while self._held and not done():
                if not self._changed.wait(remaining(deadline)):
                    return False
            if done():
                return False
            self._held = True
            return True

    @property
    def held(self) -> bool:
        """Whether a caller is reading now."""
        return self._held

    def try_acquire(self) -> bool:
        """Take the lock if it is free now (never waits)."""
        with self._changed:
            if self._held:
                return False
            self._held = True
            return True

    def release(self) -> None:
        """Let go, and wake every waiter to look at what was read."""
        with self._changed:
            self._held = False
            self._changed.notify_all()


class Stream:
    """A connected Unix stream socket to the daemon."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock

    def receive(self, deadline: float | None) -> bytes | None:
        """The next bytes; ``b""`` at the end of the stream; None at the deadline.

        Raises:
            OSError: the connection broke.
        """
        while True:
            if not wait_ready(self._sock, select.POLLIN, remaining(deadline)):
                return None
            try:
                return self._sock.recv(RECV_SIZE)
            except BlockingIOError:
                continue  # pragma: no cover - readable, then not: poll again

    def receive_nowait(self) -> bytes | None:
        """Bytes already received (``b""``: end of stream), None when there are none."""
        return read_nowait(self._sock)

    def send_all(self, data: bytes | bytearray, deadline: float | None) -> BaseException | None:
        """Write all of ``data``; None (no cancellation to hold here, see ``_backend_anyio``).

        Raises:
            TimeoutError: not all written by the deadline (or SEND_GRACE without one).
            OSError: the connection broke.
        """
        if deadline is None:
            deadline = time.monotonic() + SEND_GRACE
        view = memoryview(data)
        with contextlib.suppress(BlockingIOError):  # a line usually fits the buffer: no poll
            view = view[self._sock.send(view) :]
        while view:
            if not wait_ready(self._sock, select.POLLOUT, remaining(deadline)):
                raise TimeoutError("the daemon took no request")
            try:
                view = view[self._sock.send(view) :]
            except BlockingIOError:
                continue  # pragma: no cover - writable, then not: poll again
        return None

    def closed_by_peer(self) -> bool:
        return closed_by_peer(self._sock)

    def detach(self) -> None:
        """Close this process's descriptor only: a forked child lets go of the
        socket it shares with its parent without shutting the parent's connection."""
        with contextlib.suppress(OSError):
            self._sock.close()

    def close(self) -> None:
        """Close; a thread waiting in :meth:`receive` wakes (to the end of the stream)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # close() alone would not wake a poll
        with contextlib.suppress(OSError):
            self._sock.close()


def connect_unix(path: str, deadline: float | None) -> Stream:
    """Connect to the daemon's socket.

    Raises:
        OSError: no daemon there (or not allowed).
        TimeoutError: no answer by the deadline.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(remaining(deadline))
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return Stream(sock)


sleep = time.sleep


def close_scope(seconds: float) -> contextlib.nullcontext[None]:
    """Closing a session is bounded by the client's timeout here: nothing to add."""
    return contextlib.nullcontext()
