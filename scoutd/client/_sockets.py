"""Non-blocking looks at a connected socket, shared by both backends."""

from __future__ import annotations

import errno
import math
import numbers
import select
import socket
import time

from ._reconnect import deadline_after

# One recv() asks for this much: a multi-megabyte prompt comes back in few
# system calls, and it costs nothing per idle connection.
RECV_SIZE = 256 * 1024

# A request line is never cut short by cancellation (a partial line would
# corrupt the stream for every other request on the connection); a send stuck
# this long, when the client has no timeout, means the daemon stopped reading.
SEND_GRACE = 30.0

# The longest wait poll takes (milliseconds in a C int: about 24.8 days); a lock's
# wait is bounded too (threading.TIMEOUT_MAX). A client's timeout past it is held
# to it: longer than any agent's call, and no OverflowError from inside a call.
_POLL_MAX_MS = 2**31 - 1
MAX_WAIT = _POLL_MAX_MS / 1000


def checked_timeout(timeout: float | None) -> float | None:
    """``timeout`` as given, once it is seconds or None; raised here, not in a call.

    Raises:
        ValueError: NaN (it would wait no time, or for ever, as the wait fell).
        TypeError: not a number.
    """
    if timeout is None:
        return None
    if not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout must be seconds (a number) or None, not {timeout!r}")
    if math.isnan(timeout):
        raise ValueError("timeout must be seconds or None, not NaN")
    return timeout


def deadline_in(timeout: float | None) -> float | None:
    """The deadline of a wait of ``timeout`` seconds (None: none), a timeout past
    :data:`MAX_WAIT` held to it."""
    checked = checked_timeout(timeout)
    return deadline_after(None if checked is None else min(checked, MAX_WAIT))


def wait_ready(sock: socket.socket, events: int, seconds: float | None) -> bool:
    """Whether ``sock`` becomes ready for ``events`` within ``seconds`` (None: no limit;
    a wait longer than poll takes is several polls).

    poll, not select: a daemon's many descriptors may number past FD_SETSIZE.

    Raises:
        OSError: ``sock`` is closed (another thread closed the client meanwhile):
            the error every caller already handles as a lost connection.
    """
    fd = sock.fileno()
    if fd < 0:  # poll would raise ValueError for it
        raise OSError(errno.EBADF, "the connection was closed")
    poller = select.poll()
    poller.register(fd, events)
    if seconds is None:
        return bool(poller.poll(-1))
    end = time.monotonic() + seconds
    while True:  # once, unless the wait is longer than poll takes
        longer = seconds * 1000 > _POLL_MAX_MS
        if poller.poll(_POLL_MAX_MS if longer else int(seconds * 1000 + 0.999)):
            return True
        if not longer:
            return False
        seconds = max(end - time.monotonic(), 0.0)


def read_nowait(sock: socket.socket) -> bytes | None:
    """Bytes already received (``b""``: end of stream), None when there are none.

    Raises:
        OSError: the connection broke.
    """
    if not wait_ready(sock, select.POLLIN, 0):
        return None
    try:
        return sock.recv(RECV_SIZE, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return None


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the daemon has closed this connection (end of stream waiting to be read).

    Pending lines (a notification) mean it is still open; only a bare end of
    stream, or an error, counts as closed. Never blocks, never consumes.
    """
    try:
        if not wait_ready(sock, select.POLLIN, 0):
            return False  # nothing to read: open and quiet
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset, or already closed
        return True
