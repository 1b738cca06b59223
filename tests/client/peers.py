"""A peer on a socket path that is no daemon, or a broken one, for the client tests.

Each peer is a real Unix socket served by a thread: it answers every request
line with what the test scripts (its id put where ``%d`` is), then may write
more, without end, as an impostor would.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import threading
from collections.abc import Callable


class Peer:
    """A socket path served by ``script(peer, request_id)`` for every request line.

    ``sent`` counts what the script wrote; it stops at the first write that fails
    (the client let go) or when the test ends.
    """

    def __init__(self, script: Callable[[Peer, socket.socket, int], None]) -> None:
        self.root = tempfile.mkdtemp(prefix="sdh")
        self.path = os.path.join(self.root, "peer.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.script = script
        self.sent = 0
        self.stop = threading.Event()
        self.connection: socket.socket | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def write(self, sock: socket.socket, data: bytes) -> bool:
        """Write ``data``; False once the client is gone or the test ended."""
        if self.stop.is_set():
            return False
        try:
            sock.sendall(data)
        except OSError:
            return False
        self.sent += len(data)
        return True

    def _serve(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        self.connection = sock
        with sock, sock.makefile("rb") as lines:
            sock.settimeout(5.0)  # bounds a peer waiting for a client that fails first
            while not self.stop.is_set():
                try:
                    request = lines.readline()
                except OSError:
                    return
                if not request:
                    return
                self.script(self, sock, int(request.split(b'"id":')[1].split(b",")[0]))

    def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):  # wakes a thread still in accept()
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        if self.connection is not None:
            with contextlib.suppress(OSError):  # wakes the thread in a read or a write
                self.connection.shutdown(socket.SHUT_RDWR)
        self.thread.join(5.0)
        assert not self.thread.is_alive()
        os.unlink(self.path)
        os.rmdir(self.root)


def endless_line(peer: Peer, sock: socket.socket, request_id: int) -> None:
    """The start of an answer, then a string that never ends (no newline, ever)."""
    chunk = b"x" * (256 * 1024)
    if peer.write(sock, b'{"jsonrpc":"2.0","id":%d,"result":"' % request_id):
        while peer.write(sock, chunk):
            pass
