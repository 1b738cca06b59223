"""Inbox entries that are not regular files, and the witnesses that they were never opened.

A FIFO is the witness that nothing opened it: a writer blocked in ``open()`` on
it is released by any reader's ``open()``, even a non-blocking one. A symlink
pointing at such a FIFO proves that it was never followed; one pointing at a
file proves that the file was neither changed nor moved.
"""

from __future__ import annotations

import os
import socket
import stat
import threading

import pytest

from tests.support.daemon import wait_for

SECRET = "the secret"

# Every kind of non-regular entry, and how the daemon names it in a generic reason.
KIND_WORDS = {
    "symlink": "a symbolic link",
    "symlink-to-fifo": "a symbolic link",
    "fifo": "a FIFO",
    "dir": "a directory",
    "socket": "a socket",
    "device": "a character device",
}
KINDS = sorted(KIND_WORDS)


# where the kernel shows a task blocked opening a FIFO without a partner
FIFO_OPEN_WAITS = frozenset(("wait_for_partner", "fifo_open"))


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read().strip()


class FifoWitness:
    """A writer blocked opening ``path``; ``opened`` is set once anyone opens it to read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._opening = path  # kept: ``path`` may follow the FIFO when it is moved
        self.opened = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()
        # the writer must be inside open() before anyone looks, or an open of the
        # FIFO would go unseen
        wchan = f"/proc/self/task/{self._thread.native_id}/wchan"
        wait_for(lambda: _read(wchan) in FIFO_OPEN_WAITS, 10, "the writer to block in open()")

    def _write(self) -> None:
        fd = os.open(self._opening, os.O_WRONLY)  # blocks until a reader opens the FIFO
        self.opened.set()
        os.close(fd)

    def release(self) -> None:
        """Unblock the writer ourselves (the test is over); ``path`` is where the FIFO is now."""
        if not self.opened.is_set():
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self._thread.join(5)
            os.close(fd)


def make_socket_file(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    return sock


class OddEntry:
    """An entry at ``path`` of one non-regular ``kind``; its helpers live in ``scratch``.

    Skips the test for a device node where creating one is not permitted.
    """

    def __init__(self, path: str, kind: str, scratch: str) -> None:
        self.path = path
        self.kind = kind
        self.words = KIND_WORDS[kind]
        self.witness: FifoWitness | None = None
        self.listener: socket.socket | None = None
        self.target = ""
        self.secret = os.path.join(scratch, f"secret-{kind}")
        os.makedirs(scratch, exist_ok=True)
        with open(self.secret, "w") as handle:
            handle.write(SECRET)
        # made under a hidden name (readers skip it), then renamed into place
        staged = os.path.join(os.path.dirname(path), f".staged-{kind}")
        if kind == "symlink":
            self.target = self.secret
            os.symlink(self.secret, staged)
        elif kind == "symlink-to-fifo":
            target = os.path.join(scratch, f"target-{kind}.fifo")
            os.mkfifo(target)
            self.target = target
            os.symlink(target, staged)
            self.witness = FifoWitness(target)
        elif kind == "fifo":
            os.mkfifo(staged)
            self.witness = FifoWitness(staged)
            self.witness.path = path  # where it will be released
        elif kind == "dir":
            os.mkdir(staged)
            with open(os.path.join(staged, "inside"), "w") as handle:
                handle.write("kept")
        elif kind == "socket":
            self.listener = make_socket_file(staged)
        else:
            try:
                os.mknod(staged, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            except PermissionError:
                pytest.skip("creating a device node needs CAP_MKNOD")
        os.rename(staged, path)  # appears whole, its witness already waiting

    def assert_untouched(self) -> None:
        """Nothing opened the FIFO, the symlink's target is unchanged and in place."""
        if self.witness is not None:
            assert not self.witness.opened.is_set(), "a FIFO was opened"
        with open(self.secret) as handle:
            assert handle.read() == SECRET

    def assert_moved_to(self, record: str) -> None:
        """The entry itself (not a target, not a copy) now lives at ``record``."""
        assert not os.path.lexists(self.path)
        mode = os.lstat(record).st_mode
        if self.kind.startswith("symlink"):
            assert stat.S_ISLNK(mode)
            assert os.readlink(record) == self.target
        elif self.kind == "fifo":
            assert stat.S_ISFIFO(mode)
            assert self.witness is not None
            self.witness.path = record  # release it where it is now
        elif self.kind == "dir":
            assert stat.S_ISDIR(mode)
            assert os.listdir(record) == ["inside"]
        elif self.kind == "socket":
            assert stat.S_ISSOCK(mode)
        else:
            assert stat.S_ISCHR(mode)

    def close(self) -> None:
        if self.witness is not None:
            self.witness.release()
        if self.listener is not None:
            self.listener.close()
