"""What mutation testing of ``scoutd/inbox/files.py`` showed no test had tried
(docs/TESTING.md, "The thirteenth round"): the read lease's signal and its
release, the path an error names, the inbox of a save file in the working
directory or reached through the caller's own link, an inbox that cannot be
searched, and root's removed directory made aside.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.inbox import files
from scoutd.inbox.files import InboxDirs, being_written, open_dir
from scoutd.inbox.names import inbox_dir, inbox_removed_dir

from ..strategies.test_inbox_fail_closed import require_leases
from ..support.ids import AS_ROOT, NOBODY
from ..support.umask import umask

# A process that holds a read lease while another open for writing breaks it.
_LEASE_BROKEN = """
import fcntl, os, sys
from scoutd.inbox.files import being_written

path = sys.argv[1]
fd = os.open(path, os.O_RDONLY)
real = fcntl.fcntl

def fcntl_with_a_writer(fd_, cmd, arg=0):
    if cmd == fcntl.F_SETLEASE and arg == fcntl.F_UNLCK:  # the lease is held: break it
        try:
            os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except BlockingIOError:
            pass  # the kernel signals this process, the lease's holder, at once
    return real(fd_, cmd, arg)

fcntl.fcntl = fcntl_with_a_writer
print(being_written(fd))
"""


def test_a_writer_that_breaks_the_lease_does_not_end_the_process(tmp_path: pathlib.Path) -> None:
    """The kernel signals the lease's holder when a writer opens the file; SIGIO,
    its default signal, would end the daemon."""
    require_leases(tmp_path)
    path = tmp_path / "notice.txt"
    path.write_text("hi")
    done = subprocess.run(
        [sys.executable, "-c", _LEASE_BROKEN, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != -signal.SIGIO, "the lease break's signal ended the process"
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


@pytest.fixture
def notice(tmp_path: pathlib.Path) -> Iterator[int]:
    require_leases(tmp_path)
    path = tmp_path / "notice.txt"
    path.write_text("hi")
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)


def test_the_lease_is_dropped_at_once(notice: int) -> None:
    assert being_written(notice) is False
    assert fcntl.fcntl(notice, fcntl.F_GETLEASE) == fcntl.F_UNLCK


def _lease_calls(monkeypatch: pytest.MonkeyPatch, taken: int | None, dropped: int | None) -> None:
    """``F_SETLEASE`` fails with ``taken`` (to take it) and ``dropped`` (to drop it)."""
    real = fcntl.fcntl

    def fake(fd: int, cmd: int, arg: int = 0) -> Any:
        if cmd == fcntl.F_SETLEASE:
            err = dropped if arg == fcntl.F_UNLCK else taken
            if err is not None:
                raise OSError(err, os.strerror(err))
        return real(fd, cmd, arg)

    monkeypatch.setattr(fcntl, "fcntl", fake)


@pytest.mark.parametrize(
    ("err", "answer"),
    [(errno.EAGAIN, True), (errno.EACCES, None), (errno.EINVAL, None)],
    ids=["open for writing", "not the owner", "no leases here"],
)
def test_a_lease_refused_tells_only_when_a_writer_holds_the_file(
    notice: int, monkeypatch: pytest.MonkeyPatch, err: int, answer: bool | None
) -> None:
    _lease_calls(monkeypatch, err, None)
    assert being_written(notice) is answer


def test_a_lease_that_cannot_be_dropped_is_still_an_answer(
    notice: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _lease_calls(monkeypatch, None, errno.EBADF)
    assert being_written(notice) is False


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p.write_text("x"), "is not a directory but a regular file"),
        (lambda p: os.mkfifo(p), "is not a directory but a FIFO"),
        (lambda p: os.symlink(".", p), "is a symbolic link, not followed"),
    ],
    ids=["file", "fifo", "symlink"],
)
def test_what_is_no_directory_is_named_as_the_caller_shows_it(
    tmp_path: pathlib.Path, make: Any, words: str
) -> None:
    make(tmp_path / "entry")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as raised:
            open_dir("entry", dir_fd=fd, shown="shown/entry")
    finally:
        os.close(fd)
    error = raised.value
    assert error.errno in (errno.ENOTDIR, errno.ELOOP)
    assert (error.strerror, error.filename) == (words, "shown/entry")


def test_an_inbox_or_removed_directory_in_the_way_is_named_by_its_path(
    tmp_path: pathlib.Path,
) -> None:
    save_file = str(tmp_path / "a.chat")
    pathlib.Path(inbox_dir(save_file)).write_text("not a directory")
    with pytest.raises(OSError) as raised:
        InboxDirs.of(save_file)
    assert raised.value.filename == inbox_dir(save_file)
    os.unlink(inbox_dir(save_file))
    os.mkdir(inbox_dir(save_file))
    pathlib.Path(inbox_removed_dir(save_file)).write_text("not a directory")
    dirs = InboxDirs.of(save_file)
    assert dirs is not None
    try:
        with pytest.raises(OSError) as raised:
            dirs.removed_fd()
        assert raised.value.filename == inbox_removed_dir(save_file)
    finally:
        dirs.close()


def test_a_save_file_in_the_working_directory_and_one_through_the_callers_link(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.mkdir(inbox_dir(str(real / "a.chat")))
    os.symlink(real, tmp_path / "link")
    monkeypatch.chdir(real)
    for save_file in ("a.chat", str(tmp_path / "link" / "a.chat")):
        dirs = InboxDirs.of(save_file)
        assert dirs is not None, save_file
        dirs.close()
    with pytest.raises(OSError):  # the daemon's own resolved path: no link followed
        InboxDirs.of(str(tmp_path / "link" / "a.chat"), exact=True)


@AS_ROOT
def test_an_inbox_its_user_may_open_but_not_search_is_unusable() -> None:
    """Run as the inbox's user (the effective uid, put back at once after), in a
    directory every user may search."""
    top = tempfile.mkdtemp(prefix="scoutd-search-", dir="/tmp")
    try:
        os.chmod(top, 0o755)
        save_file = os.path.join(top, "a.chat")
        inbox = inbox_dir(save_file)
        os.mkdir(inbox)
        os.chown(inbox, NOBODY, NOBODY)
        os.chmod(inbox, 0o600)  # read, so it opens; no search
        os.setegid(NOBODY)
        os.seteuid(NOBODY)
        try:
            with pytest.raises(PermissionError) as raised:
                InboxDirs.of(save_file)
        finally:
            os.seteuid(0)
            os.setegid(0)
        assert raised.value.errno == errno.EACCES
        os.chmod(inbox, 0o700)  # searchable: the same user opens it
        os.setegid(NOBODY)
        os.seteuid(NOBODY)
        try:
            dirs = InboxDirs.of(save_file)
        finally:
            os.seteuid(0)
            os.setegid(0)
        assert dirs is not None
        dirs.close()
    finally:
        shutil.rmtree(top)


@AS_ROOT
def test_roots_removed_directory_is_made_private_and_leaves_nothing_when_it_fails(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root makes another user's removed directory aside, mode 0700 whatever the
    umask, then gives it the inbox's owner and mode; when it cannot be put in
    place, the aside one goes."""
    save_file = str(tmp_path / "a.chat")
    os.mkdir(inbox_dir(save_file), 0o750)
    os.chown(inbox_dir(save_file), NOBODY, NOBODY)
    seen: list[int] = []
    real_open_dir = files.open_dir

    def looked(path: str, **kwargs: Any) -> int:
        if path.startswith(".inbox_removed-"):
            seen.append(os.stat(path, dir_fd=kwargs["dir_fd"]).st_mode & 0o7777)
        return real_open_dir(path, **kwargs)

    monkeypatch.setattr(files, "open_dir", looked)
    with umask(0):
        dirs = InboxDirs.of(save_file)
        assert dirs is not None
        try:
            dirs.removed_fd()
        finally:
            dirs.close()
    assert seen == [0o700]
    made = os.stat(inbox_removed_dir(save_file))
    assert (made.st_uid, made.st_gid, made.st_mode & 0o7777) == (NOBODY, NOBODY, 0o750)
    os.rmdir(inbox_removed_dir(save_file))
    pathlib.Path(inbox_removed_dir(save_file)).write_text("in the way")
    monkeypatch.chdir(tmp_path.parent)  # the aside directory is in the chat's, not here
    dirs = InboxDirs.of(save_file)
    assert dirs is not None
    try:
        with pytest.raises(OSError):
            dirs.removed_fd()
    finally:
        dirs.close()
    assert sorted(os.listdir(tmp_path)) == ["a.inbox", "a.inbox_removed"]


def test_an_interrupt_while_the_inbox_opens_leaks_no_descriptor(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = str(tmp_path / "a.chat")
    os.mkdir(inbox_dir(save_file))

    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "open_dir", interrupted)
    before = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        InboxDirs.of(save_file)
    assert sorted(os.listdir("/proc/self/fd")) == before
