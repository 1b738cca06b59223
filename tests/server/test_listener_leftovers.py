"""A hidden socket name left by a daemon killed while binding is swept at the next start.

The socket is bound under a hidden name and linked to its path once it
listens (docs/OPERATIONS.md, the socket). A daemon killed between the two
leaves that name behind; the next daemon removes it, and only it: a name that
is young, listening, not a socket, another user's, or not exactly of that
form stays.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scoutd.server import listener

from ..support.daemon import Daemon
from ..support.ids import NOBODY

AGED = listener.STALE_ASIDE_SECONDS + 50

# A child that binds its socket and is killed by SIGKILL just before linking it.
KILLED_BEFORE_LINK = """
import os, signal, sys
from scoutd.server import listener

def link(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

listener.os.link = link
listener.open_listener(sys.argv[1], 0o600, None)
"""


def _left_socket(path: Path, age: float) -> None:
    """A socket file at ``path`` that nothing listens on, last changed ``age`` s ago."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()
    then = time.time() - age
    os.utime(path, (then, then), follow_symlinks=False)


def test_a_name_left_by_a_daemon_killed_while_binding_goes_at_the_next_start() -> None:
    d = Daemon()
    try:
        run = subprocess.run(
            [sys.executable, "-c", KILLED_BEFORE_LINK, d.socket_path],
            capture_output=True,
            timeout=30,
        )
        assert run.returncode == -signal.SIGKILL, run.stderr
        left = [n for n in os.listdir(d.dir) if n.startswith(".s.sock.")]
        assert len(left) == 1 and not os.path.lexists(d.socket_path), os.listdir(d.dir)
        aside = Path(d.dir, left[0])
        then = time.time() - AGED
        os.utime(aside, (then, then), follow_symlinks=False)
        with d, d.connect() as client:
            assert "result" in client.call("status")
            assert not aside.exists()
            assert f"removed {aside}, left by a daemon killed while binding" in d.log()
    finally:
        d.cleanup()


def test_only_an_old_refusing_socket_of_this_user_of_exactly_that_name_goes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sock"
    stale = tmp_path / ".s.sock.0123abcd"
    _left_socket(stale, AGED)
    kept = {
        ".s.sock.4567cdef": "young",
        ".s.sock.89ABCDEF": "upper case",
        ".s.sock.0123abc": "seven digits",
        ".s.sock.0123abcde": "nine digits",
        ".t.sock.0123abcd": "another socket's",
        "s.sock.0123abcd": "not hidden",
    }
    for name, why in kept.items():
        _left_socket(tmp_path / name, 0 if why == "young" else AGED)
    regular = tmp_path / ".s.sock.00000000"
    regular.write_text("an operator's file")
    then = time.time() - AGED
    os.utime(regular, (then, then))
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live_path = tmp_path / ".s.sock.11111111"
    live.bind(str(live_path))
    live.listen(1)
    os.utime(live_path, (then, then), follow_symlinks=False)
    try:
        made = listener.open_listener(str(path), 0o600, None)
        made.close()
    finally:
        live.close()
    assert not stale.exists()
    left = set(os.listdir(tmp_path))
    assert left == {*kept, regular.name, live_path.name}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file away")
def test_another_users_socket_of_that_name_stays(tmp_path: Path) -> None:
    theirs = tmp_path / ".s.sock.0123abcd"
    _left_socket(theirs, AGED)
    os.chown(theirs, NOBODY, NOBODY, follow_symlinks=False)
    made = listener.open_listener(str(tmp_path / "s.sock"), 0o600, None)
    made.close()
    assert theirs.exists()


def test_an_unlistable_directory_leaves_binding_to_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep is best effort: a listing that fails is not an error of its own."""

    def unlistable(*args: object) -> list[str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "listdir", unlistable)
    made = listener.open_listener(str(tmp_path / "s.sock"), 0o600, None)
    try:
        assert made.path == str(tmp_path / "s.sock") and (tmp_path / "s.sock").is_socket()
    finally:
        made.close()
