"""Socket activation as systemd does it: the real daemon started with a descriptor
on fd 3 and ``LISTEN_PID``/``LISTEN_FDS`` naming it. It serves on a listening
Unix stream socket, and refuses anything else in one line (docs/OPERATIONS.md)."""

from __future__ import annotations

import contextlib
import os
import socket

import pytest

from tests.support.daemon import Daemon

O_CLOEXEC_FLAG = 0o2000000  # as /proc/PID/fdinfo prints a descriptor's flags


def _activated(d: Daemon, descriptor: int, listen_fds: str = "1") -> Daemon:
    """``d``, to be started with ``descriptor`` as its fd 3, as systemd passes it."""
    d.pass_fds = (descriptor,)
    d.argv_prefix = [
        "bash",
        "-c",
        f'exec 3<&{descriptor} {descriptor}<&-; export LISTEN_PID=$$ LISTEN_FDS="$1"; '
        'shift; exec "$@"',
        "sh",
        listen_fds,
    ]
    return d


def _descriptor(kind: str, directory: str, stack: contextlib.ExitStack) -> int:
    """An open descriptor of ``kind``, closed with ``stack``."""
    if kind == "a regular file":
        fd = os.open(os.path.join(directory, "not-a-socket"), os.O_RDWR | os.O_CREAT, 0o600)
        stack.callback(os.close, fd)
        return fd
    sockets: dict[str, tuple[int, int, str | tuple[str, int]]] = {
        "a TCP socket": (socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0)),
        "a Unix seqpacket socket": (
            socket.AF_UNIX,
            socket.SOCK_SEQPACKET,
            os.path.join(directory, "seq.sock"),
        ),
        "a Unix datagram socket": (
            socket.AF_UNIX,
            socket.SOCK_DGRAM,
            os.path.join(directory, "dgram.sock"),
        ),
        "a Unix stream socket not listening": (
            socket.AF_UNIX,
            socket.SOCK_STREAM,
            os.path.join(directory, "bound.sock"),
        ),
    }
    family, sock_type, address = sockets[kind]
    sock = stack.enter_context(socket.socket(family, sock_type))
    sock.bind(address)
    if sock_type != socket.SOCK_DGRAM and kind != "a Unix stream socket not listening":
        sock.listen(4)  # listening: only what it is makes it unfit
    return sock.fileno()


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("a regular file", "fd 3 passed by socket activation is not a socket"),
        ("a TCP socket", "is not a listening AF_UNIX stream socket"),
        ("a Unix seqpacket socket", "is not a listening AF_UNIX stream socket"),
        ("a Unix datagram socket", "is not a listening AF_UNIX stream socket"),
        ("a Unix stream socket not listening", "is not a listening AF_UNIX stream socket"),
    ],
)
def test_anything_but_a_listening_unix_stream_socket_is_refused(kind: str, said: str) -> None:
    with contextlib.ExitStack() as stack:
        d = Daemon()
        stack.callback(d.cleanup)
        _activated(d, _descriptor(kind, d.dir, stack))
        d.start(wait=False)
        assert d.wait(30) == 1
        log = d.log()
        assert said in log, log
        assert "Traceback" not in log
        assert not os.path.exists(d.socket_path)  # nor did it serve on its own


def _flags(pid: int, fd: int) -> int:
    """The open flags of ``pid``'s descriptor ``fd``."""
    with open(f"/proc/{pid}/fdinfo/{fd}") as info:
        return next(int(line.split()[1], 8) for line in info if line.startswith("flags"))


def test_of_two_passed_sockets_the_first_serves_and_the_other_is_named() -> None:
    with contextlib.ExitStack() as stack:
        listening = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        unused = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        d = _activated(Daemon(), listening.fileno(), listen_fds="2")
        stack.callback(d.cleanup)
        # the second socket becomes fd 4, inheritable as systemd passes it
        d.pass_fds = (listening.fileno(), unused.fileno())
        d.argv_prefix[2] = f"exec 4<&{unused.fileno()}; " + d.argv_prefix[2]
        path = os.path.join(d.dir, "passed.sock")
        listening.bind(path)
        listening.listen(4)
        unused.bind(os.path.join(d.dir, "unused.sock"))
        unused.listen(4)
        own, d.socket_path = d.socket_path, path
        with d:
            listening.close()  # the daemon's alone now
            with d.connect() as client:
                assert "result" in client.call("status")
            assert "passed 2 sockets; only fd 3 is used" in d.log()
            assert not os.path.exists(own)
            # neither is handed on to anything the daemon runs
            assert _flags(d.pid, 3) & O_CLOEXEC_FLAG
            assert os.readlink(f"/proc/{d.pid}/fd/4").startswith("socket:")
            assert _flags(d.pid, 4) & O_CLOEXEC_FLAG
