"""Non-blocking looks at a connected socket, shared by both backends."""

from __future__ import annotations

import errno
import select
import socket

# One recv() asks for this much: a multi-megabyte prompt comes back in few
# system calls, and it costs nothing per idle connection.
RECV_SIZE = 256 * 1024

# A request line is never cut short by cancellation (a partial line would
# corrupt the stream for every other request on the connection); a send stuck
# this long, when the client has no timeout, means the daemon stopped reading.
SEND_GRACE = 30.0


def wait_ready(sock: socket.socket, events: int, seconds: float | None) -> bool:
    """Whether ``sock`` becomes ready for ``events`` within ``seconds`` (None: no limit).

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
    return bool(poller.poll(-1 if seconds is None else int(seconds * 1000 + 0.999)))


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
