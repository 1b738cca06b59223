"""What stands at the socket's path, its directory and its group, in process, with
every refusal's words (the operator reads them as ``scoutd serve``'s one line).

``open_listener`` on real paths: a file that is no socket, a stale socket, a
live one, a path past ``sun_path``, a missing directory, a directory of
another uid (as root), a group by name or number; and which file a listener
removes when it closes.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import subprocess
import threading
from pathlib import Path

import msgspec
import pytest

from scoutd.config import Config, DaemonConfig
from scoutd.errors import StartupError
from scoutd.server import listener as listener_module
from scoutd.server.listener import SUN_PATH_MAX, Listener, bind_listener, open_listener

from ..reliability.harness import GROUP
from ..support.ids import AS_ROOT
from .test_listener import _connects
from .test_listener_leftovers import AGED, _left_socket


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """A private directory for the socket (pytest's may be group-writable)."""
    directory = tmp_path / "run"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    return directory


def test_a_file_that_is_no_socket_is_refused_and_left(place: Path) -> None:
    path = place / "s.sock"
    path.write_text("the operator's notes")
    with pytest.raises(StartupError) as raised:
        open_listener(str(path), 0o660, None)
    assert str(raised.value) == f"{path} exists and is not a socket; refusing to replace it"
    assert path.read_text() == "the operator's notes"


def test_a_stale_socket_is_replaced_and_said(place: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = place / "s.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: a daemon that died
    assert not _connects(str(path))
    with caplog.at_level(logging.INFO, logger="scoutd.server"):
        listener = open_listener(str(path), 0o660, None)
    try:
        assert f"replacing stale socket {path}" in caplog.messages
        assert _connects(str(path))
    finally:
        listener.close()


def test_a_live_socket_is_left_serving(place: Path) -> None:
    path = place / "s.sock"
    live = open_listener(str(path), 0o660, None)
    try:
        with pytest.raises(StartupError) as raised:
            open_listener(str(path), 0o660, None)
        assert str(raised.value) == f"another scoutd is already serving on {path}; not starting"
        assert _connects(str(path))
    finally:
        live.close()


def test_a_path_past_sun_path_and_a_missing_directory_are_refused_in_words(
    place: Path,
) -> None:
    long = place / ("d" * (SUN_PATH_MAX - len(str(place)))) / "s.sock"
    with pytest.raises(StartupError) as raised:
        open_listener(str(long), 0o660, None)
    assert str(raised.value) == f"socket path is longer than {SUN_PATH_MAX} bytes: {long}"
    with pytest.raises(StartupError) as raised:
        open_listener(str(place / "gone" / "s.sock"), 0o660, None)
    assert str(raised.value) == f"socket directory {place / 'gone'} does not exist"
    with pytest.raises(StartupError) as raised:
        open_listener(str(place / "s.sock"), 0o660, "no-such-group-here")
    assert str(raised.value) == "socket_group 'no-such-group-here' does not exist"


@AS_ROOT
def test_a_directory_of_another_uid_is_refused_even_uid_1(place: Path) -> None:
    """uid 1 (``daemon`` on most systems) is no more root than any other."""
    os.chown(place, 1, 1)
    with pytest.raises(StartupError) as raised:
        open_listener(str(place / "s.sock"), 0o660, None)
    assert str(raised.value) == (
        f"socket directory {place} belongs to uid 1, who could replace the socket;"
        " use a directory of this user or root"
    )
    assert os.listdir(place) == []


def test_a_directory_others_may_write_is_refused_unless_sticky(place: Path) -> None:
    place.chmod(0o775)
    with pytest.raises(StartupError) as raised:
        open_listener(str(place / "s.sock"), 0o660, None)
    assert str(raised.value) == (
        f"socket directory {place} is writable by other users (mode 0o775) without the"
        " sticky bit: they could replace the socket; use a directory only its owner may write"
    )
    place.chmod(0o1777)  # /tmp's way: only the socket's owner may move it
    open_listener(str(place / "s.sock"), 0o660, None).close()


@AS_ROOT
@pytest.mark.parametrize("group", ["root", "0"])
def test_the_group_is_set_even_to_gid_0(place: Path, group: str) -> None:
    """A directory whose set-group-id bit gives new files another group: the socket
    gets the group asked for, root's too."""
    os.chown(place, 0, GROUP)
    place.chmod(0o2755)
    listener = open_listener(str(place / "s.sock"), 0o660, group)
    try:
        made = os.lstat(place / "s.sock")
        assert (made.st_gid, stat.S_IMODE(made.st_mode)) == (0, 0o660)
        assert made.st_uid == os.geteuid()  # the owner is left alone
    finally:
        listener.close()
    # without a group, the file keeps what the directory gave it
    listener = open_listener(str(place / "s.sock"), 0o660, None)
    try:
        assert os.lstat(place / "s.sock").st_gid == GROUP
    finally:
        listener.close()


def test_a_listener_removes_only_the_file_it_made(place: Path) -> None:
    path = place / "s.sock"
    listener = open_listener(str(path), 0o660, None)
    listener.sock.close()
    made = listener.created
    assert made is not None
    Listener(listener.sock, str(path), None).remove_file()  # not ours (systemd's)
    assert path.exists()
    Listener(listener.sock, None, made).remove_file()  # no path
    assert path.exists()
    Listener(listener.sock, str(path), (made[0], made[1] + 1)).remove_file()  # another file
    assert path.exists()
    listener.remove_file()
    assert not path.exists()
    listener.remove_file()  # gone already: nothing to do, no error


@AS_ROOT
def test_the_configured_group_reaches_the_socket(place: Path) -> None:
    daemon = msgspec.structs.replace(
        DaemonConfig(), socket_path=str(place / "s.sock"), socket_group=str(GROUP)
    )
    made = bind_listener(Config(daemon=daemon))
    try:
        assert os.lstat(place / "s.sock").st_gid == GROUP
    finally:
        made.close()


@pytest.mark.parametrize("order", [sorted, lambda names: sorted(names, reverse=True)])
def test_every_leftover_is_looked_at_whatever_the_listing_order(
    place: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    order: object,
) -> None:
    """Names that stay (a file, a young socket) listed before or after the one that
    goes: each is passed over, none ends the look."""
    (place / ".s.sock.00000000").write_text("an operator's file")
    _left_socket(place / ".s.sock.11111111", 0)
    stale = place / ".s.sock.ffffffff"
    _left_socket(stale, AGED)
    listing = os.listdir
    assert callable(order)
    monkeypatch.setattr(os, "listdir", lambda directory: order(listing(directory)))
    with caplog.at_level(logging.INFO, logger="scoutd.server"):
        open_listener(str(place / "s.sock"), 0o660, None).close()
    assert sorted(listing(place)) == [".s.sock.00000000", ".s.sock.11111111"]
    assert f"removed {stale}, left by a daemon killed while binding" in caplog.messages


def test_a_path_without_a_directory_is_bound_in_the_working_directory(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``socket_path = "s.sock"``: the directory is the working one, for its checks and
    its leftovers too."""
    stale = place / ".s.sock.0123abcd"
    _left_socket(stale, AGED)
    monkeypatch.chdir(place)
    made = open_listener("s.sock", 0o660, None)
    try:
        assert _connects(str(place / "s.sock"))
        assert not stale.exists()
    finally:
        made.close()


def test_a_socket_too_busy_to_answer_is_neither_replaced_nor_waited_on(place: Path) -> None:
    """A live daemon whose queue is full does not accept the probe: that is no stale
    socket. The probe, which never blocks, meets the full queue at once (``EAGAIN``
    on a Unix socket) and says so; a probe that blocked would wait for the daemon
    (bounded here to 30 s)."""
    path = place / "s.sock"
    busy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    busy.bind(str(path))
    busy.listen(0)
    waiting = []
    try:
        for _ in range(64):  # fill the queue: connects that are never accepted
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            waiting.append(client)
            try:
                client.connect(str(path))
            except BlockingIOError:
                break
        else:
            pytest.fail("the listen queue never filled")
        found: list[BaseException] = []

        def probe() -> None:
            try:
                open_listener(str(path), 0o660, None).close()
            except StartupError as exc:
                found.append(exc)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        prober.join(30)
        assert not prober.is_alive(), "the probe waited without end"
        full = f"[Errno {errno.EAGAIN}] {os.strerror(errno.EAGAIN)}"
        assert [str(exc) for exc in found] == [f"cannot check the existing socket {path}: {full}"]
        assert stat.S_ISSOCK(os.lstat(path).st_mode)  # left in place
    finally:
        for client in waiting:
            client.close()
        busy.close()


def test_a_hidden_name_of_exactly_sun_path_is_used(place: Path) -> None:
    """The hidden name is ``.s.sock.`` and 8 hex digits beside the path: at exactly
    ``sun_path`` bytes it fits; one byte more and the path is bound in place."""
    fill = SUN_PATH_MAX - len(os.fsencode(str(place))) - len("/.s.sock.01234567") - 1
    if fill < 1:
        pytest.skip("the test directory's path is too long for this socket")
    near = place / ("d" * fill)
    aside = listener_module._aside_name(str(near / "s.sock"))
    assert len(os.fsencode(aside)) == SUN_PATH_MAX
    assert os.path.basename(aside).startswith(".s.sock.")
    longer = place / ("d" * (fill + 1)) / "s.sock"
    assert listener_module._aside_name(str(longer)) == str(longer)


@AS_ROOT
def test_a_socket_that_cannot_be_bound_is_refused_with_the_systems_words(place: Path) -> None:
    """A read-only file system refuses root too."""
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755,ro", "tmpfs", str(place)],
        check=True,
        timeout=30,
    )
    try:
        with pytest.raises(StartupError) as raised:
            open_listener(str(place / "s.sock"), 0o660, None)
        assert str(raised.value) == f"cannot listen on {place / 's.sock'}: Read-only file system"
    finally:
        subprocess.run(["umount", str(place)], check=True, timeout=30)
