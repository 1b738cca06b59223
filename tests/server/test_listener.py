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

    bound = ""
    victim = ""

    def bind(self, address: object) -> None:
        super().bind(address)  # type: ignore[arg-type]
        assert isinstance(address, str)
        type(self).bound = address
        os.rename(address, address + ".moved")
        os.symlink(self.victim, address)


def test_a_link_put_in_place_of_the_socket_while_binding_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix, ``chmod`` and ``chown`` by path after the bind followed the link:
    the victim file became mode 0666 (and of the socket's group)."""
    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    before = victim.stat()
    _SwappedWhileBinding.victim = str(victim)
    monkeypatch.setattr(listener.socket, "socket", _SwappedWhileBinding)
    group = str(NOBODY) if os.geteuid() == 0 else None
    path = tmp_path / "s.sock"
    with pytest.raises(StartupError, match="replaced while binding"):
        listener.open_listener(str(path), 0o666, group)
    after = victim.stat()
    assert stat.S_IMODE(after.st_mode) == 0o600
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert victim.read_text() == "secret"
    assert os.path.islink(_SwappedWhileBinding.bound)  # not ours: left in place
    assert not os.path.lexists(path)  # nothing was published


def _connects(path: str) -> bool | None:
    """Whether ``path`` accepts a connection; None when there is no such file."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except FileNotFoundError:
        return None
    except ConnectionRefusedError:
        return False
    finally:
        probe.close()
    return True


@pytest.mark.parametrize("group", [None, "own"])
def test_the_socket_path_appears_only_once_it_accepts_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: str | None
) -> None:
    """A client, or a script waiting for the file, that finds the socket must be
    able to connect. Every file-system step of the bind is watched: at each, the
    path is either absent or accepting. Before the fix the file was bound at its
    path and listened on after its ``lstat`` (and ``chown``): refused meanwhile, as
    a client starting beside a loaded daemon met it."""
    path = str(tmp_path / "s.sock")
    seen: list[bool | None] = []
    for name in ("lstat", "chown", "link", "unlink"):
        real = getattr(os, name)

        def watched(*args: object, _real: object = real, **kwargs: object) -> object:
            seen.append(_connects(path))
            return _real(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(listener.os, name, watched)
    gid = str(os.getegid()) if group else None
    made = listener.open_listener(path, 0o600, gid)
    monkeypatch.undo()
    try:
        assert False not in seen, seen
        assert None in seen  # the steps before publishing were watched
        assert _connects(path) is True
        assert sorted(os.listdir(tmp_path)) == ["s.sock"]  # no hidden name left
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    finally:
        made.close()
    assert not os.path.lexists(path)


def test_a_path_taken_while_binding_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process that creates the path between the probe and the publishing
    keeps it: the daemon stops with one line and removes only its own file."""
    path = tmp_path / "s.sock"
    real_listen = socket.socket.listen

    def listen_then_taken(self: socket.socket, backlog: int = 128) -> None:
        real_listen(self, backlog)
        path.write_text("someone else's")

    monkeypatch.setattr(socket.socket, "listen", listen_then_taken)
    with pytest.raises(StartupError, match="appeared while binding"):
        listener.open_listener(str(path), 0o600, None)
    assert path.read_text() == "someone else's"
    assert sorted(os.listdir(tmp_path)) == ["s.sock"]


def test_a_path_too_close_to_the_limit_for_a_hidden_name_is_bound_in_place(
    tmp_path: Path,
) -> None:
    """Within a few bytes of ``sun_path`` no hidden name fits beside the path:
    the socket is then bound at the path itself, as before, and still serves."""
    fill = listener.SUN_PATH_MAX - len(os.fsencode(str(tmp_path))) - len("/s.sock") - 1
    if fill < 1:
        pytest.skip("the test directory's path is too long for this socket")
    near = tmp_path / ("d" * fill)
    near.mkdir()
    path = str(near / "s.sock")
    assert len(os.fsencode(path)) == listener.SUN_PATH_MAX
    assert listener._aside_name(path) == path
    made = listener.open_listener(path, 0o600, None)
    try:
        assert _connects(path) is True
        assert os.listdir(near) == ["s.sock"]
    finally:
        made.close()
    assert not os.path.lexists(path)


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
