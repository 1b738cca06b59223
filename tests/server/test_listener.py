"""The socket file: bound with its mode, never through a link, never where others write.

A root daemon binding its socket must not change another file through the path
(a link put in the socket's place while binding), and must not listen where
another user may replace the socket with one of their own (docs/OPERATIONS.md,
the socket). The operator meets these as ``scoutd serve`` failing with one line.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from scoutd.errors import StartupError
from scoutd.server import listener

from ..support.daemon import Daemon

NOBODY = 65534


class _SwappedWhileBinding(socket.socket):
    """A socket whose bind is followed at once by a link to ``victim`` in its place:
    the race an attacker who may write the directory can win with inotify."""

    path = ""
    victim = ""

    def bind(self, address: object) -> None:
        super().bind(address)  # type: ignore[arg-type]
        if address == self.path:
            os.rename(self.path, self.path + ".moved")
            os.symlink(self.victim, self.path)


def test_a_link_put_in_place_of_the_socket_while_binding_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix, ``chmod`` and ``chown`` by path after the bind followed the link:
    the victim file became mode 0666 (and of the socket's group)."""
    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    before = victim.stat()
    _SwappedWhileBinding.path = str(tmp_path / "s.sock")
    _SwappedWhileBinding.victim = str(victim)
    monkeypatch.setattr(listener.socket, "socket", _SwappedWhileBinding)
    group = str(NOBODY) if os.geteuid() == 0 else None
    with pytest.raises(StartupError, match="replaced while binding"):
        listener.open_listener(_SwappedWhileBinding.path, 0o666, group)
    after = victim.stat()
    assert stat.S_IMODE(after.st_mode) == 0o600
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert victim.read_text() == "secret"
    assert os.path.islink(_SwappedWhileBinding.path)  # not ours: left in place


def _serve(d: Daemon) -> subprocess.CompletedProcess[str]:
    """``scoutd serve`` with ``d``'s configuration, expected to stop at startup."""
    return subprocess.run(
        [sys.executable, "-m", "scoutd", "serve", "--config", d.config_path],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=d.dir,
    )


def test_a_socket_directory_others_may_write_is_refused() -> None:
    """Whoever may rename entries in the socket's directory may move the daemon's
    socket aside and bind their own: every agent's prompt would reach them.
    Before the fix the daemon served from a directory of mode 0777."""
    d = Daemon()
    try:
        shared = os.path.join(d.dir, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        d.socket_path = os.path.join(shared, "s.sock")
        d.daemon["socket_path"] = d.socket_path
        d.write_config()
        run = _serve(d)
        assert run.returncode == 1, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "writable by other users" in lines[0], run.stderr
        assert not os.path.exists(d.socket_path)
        os.chmod(shared, 0o1777)  # sticky, like /tmp: only the socket's owner may move it
        with d, d.connect() as client:
            assert "result" in client.call("status")
    finally:
        d.cleanup()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_a_socket_directory_of_another_user_is_refused() -> None:
    d = Daemon()
    try:
        theirs = os.path.join(d.dir, "theirs")
        os.mkdir(theirs, 0o755)
        os.chown(theirs, NOBODY, NOBODY)
        d.socket_path = os.path.join(theirs, "s.sock")
        d.daemon["socket_path"] = d.socket_path
        d.write_config()
        run = _serve(d)
        assert run.returncode == 1
        assert f"belongs to uid {NOBODY}" in run.stderr, run.stderr
    finally:
        d.cleanup()
