"""Claiming one inbox file: check in place, wait until complete, move, read, record.

The machinery behind :mod:`scoutd.strategies.inbox` (its module docstring
lists the steps). Every function works relative to directory descriptors
opened with ``O_NOFOLLOW``, so a symlink swapped in cannot redirect a move.

Two rules of this module keep an operator in control of a hostile agent:

* *Complete files only* (docs/STRATEGIES.md, "inbox"): a file written in place
  is taken once it has not changed for :data:`SETTLE_TIME` (or its writer
  closed it, which the daemon's watcher sees); a file that arrived by rename
  or link is complete at once (the watcher sees the rename; the library sees
  an inode changed after its last write, ``ctime`` later than ``mtime``). A
  file still changing after :data:`MAX_SETTLE_WAIT` is left for the next
  pickup, except an ``abort``, which is taken as it is.
* *An abort fails closed*: when the removed directory cannot take the claim
  (a regular file or dangling symlink in its place, another file system, any
  rename error), the abort is claimed under a hidden name in the inbox itself
  and, if even that fails, read where it is and left there. Either way it
  aborts, and the failure is logged at error level. An ``abort`` that is not a
  regular file (directory, symlink, FIFO, socket, device) aborts too, at once
  and with a generic reason naming its kind: it is moved like any abort but
  never opened, followed or read.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import errno
import logging
import os
import stat
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from .inbox_entries import entry_kind

log = logging.getLogger("scoutd.inbox")

ABORT_NAME = "abort"

# A file written in place is complete once it has not changed for this long. Short,
# because an abort's push waits for it; long enough for a writer between two writes.
SETTLE_TIME = 0.05
# A file still changing after this long: a notice waits for the next pickup, an
# abort is taken as it is (an agent rewriting it must not delay its own abort).
MAX_SETTLE_WAIT = 2.0

# O_NONBLOCK: a FIFO swapped in after the listing opens at once, never waiting for
# a writer (regular files ignore the flag). O_NOFOLLOW: a symlink is never followed.
# O_NOCTTY: a terminal never becomes the process's controlling terminal.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# The inbox and removed directories themselves: a symlink there is refused, never followed.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# Names tried for one record or notice: far beyond any real inbox, but bounded so
# that a misbehaving filesystem cannot keep a caller looping.
MAX_NAMES = 100_000

# link() errors that mean "no hard links here" (FAT, some FUSE and network mounts).
_NO_LINK = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS})


def numbered(name: str, n: int) -> str:
    """The ``n``-th collision name: ``note.txt`` -> ``note.1.txt``, ``abort`` -> ``abort.1``."""
    if n == 0:
        return name
    root, ext = os.path.splitext(name)
    return f"{root}.{n}{ext}"


def open_dir(path: str) -> int:
    """Open the directory ``path`` without following a symlink in its last component.

    Raises ``OSError``; a symlink fails with ``ENOTDIR`` (or ``ELOOP``), reported
    as such.
    """
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.islink(path):
            raise OSError(exc.errno, "is a symbolic link, not followed", path) from None
        raise


class InboxDirs:
    """The inbox (open) and removed directory (opened at the first claim) of one pickup."""

    def __init__(self, inbox_path: str, removed: str) -> None:
        self.inbox = inbox_path
        self.removed = removed
        self.ifd = open_dir(inbox_path)
        self._rfd: int | None = None

    def removed_fd(self) -> int:
        """The removed directory, created now if missing (lazily: a file is about to move)."""
        if self._rfd is None:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.removed)
            self._rfd = open_dir(self.removed)
        return self._rfd

    def close(self) -> None:
        os.close(self.ifd)
        if self._rfd is not None:
            os.close(self._rfd)


def _open_regular(name: str, dir_fd: int) -> tuple[int, os.stat_result]:
    """Open ``name`` in ``dir_fd`` for reading without following, blocking or opening non-files.

    The ``lstat`` comes first so that a FIFO or device is never opened at all (an
    open, even non-blocking, releases a writer waiting on a FIFO and may have side
    effects on a device); ``fstat`` then checks what was actually opened, in case
    the entry was swapped in between.
    """
    if not stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", name)
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _lexists(name: str, dir_fd: int | None) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def _read(fd: int, size: int, max_bytes: int) -> str:
    """At most ``max_bytes`` as text, with a visible note when there was more."""
    data = bytearray()  # grows in place: linear in what is read
    while len(data) <= max_bytes:
        chunk = os.read(fd, min(max_bytes + 1 - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    if len(data) <= max_bytes:
        return data.decode("utf-8", "replace")
    # final=False holds back a character cut in half by the limit instead of
    # turning it into a replacement character.
    head = codecs.getincrementaldecoder("utf-8")("replace").decode(data[:max_bytes], final=False)
    total = max(size, len(data))
    return f"{head}\n[scoutd: notice truncated at {max_bytes} of {total} bytes]"


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _renameat2_function() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28, not Linux
        return None


_renameat2 = _renameat2_function()


def _rename_noreplace(source: str, target: str, dir_fd: int | None) -> bool:
    """Rename ``source`` to ``target`` unless ``target`` exists: False when unsupported here.

    Raises ``FileExistsError`` when ``target`` exists, ``OSError`` otherwise.
    """
    if _renameat2 is None:
        return False
    fd = _AT_FDCWD if dir_fd is None else dir_fd
    result = _renameat2(
        fd, os.fsencode(source), fd, os.fsencode(target), ctypes.c_uint(_RENAME_NOREPLACE)
    )
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # this kernel or file system cannot: link below
    raise OSError(err, os.strerror(err), target)


def place(
    source: str,
    directory: str,
    names: Iterable[str],
    *,
    keep: bool = False,
    dir_fd: int | None = None,
    by_rename: bool = False,
) -> str:
    """Give ``source`` the first free name of ``names`` in ``directory``, never replacing one.

    With ``dir_fd`` (the directory, open), ``source`` and the names are relative to
    it; otherwise ``source`` is a path. With ``keep``, an existing entry of the
    first name is the answer instead. ``by_rename``: move with a rename that
    never replaces (``renameat2``) where the system has one, so that a watcher
    sees the file arrive whole (inotify ``IN_MOVED_TO``), not created; link
    otherwise. ``source`` is gone on success; returns the path of the new name;
    raises ``OSError`` otherwise.
    """
    for name in names:
        target = name if dir_fd is not None else os.path.join(directory, name)
        if by_rename:
            try:
                if _rename_noreplace(source, target, dir_fd):
                    return os.path.join(directory, name)
                by_rename = False  # unsupported: link from now on
            except FileExistsError:
                if keep:
                    os.unlink(source, dir_fd=dir_fd)
                    return os.path.join(directory, name)
                continue
        try:
            os.link(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno != errno.EEXIST and exc.errno not in _NO_LINK:
                raise
            if exc.errno == errno.EEXIST or _lexists(target, dir_fd):
                if keep:
                    os.unlink(source, dir_fd=dir_fd)
                    return os.path.join(directory, name)
                continue
            # no hard links here: best effort, see above
            os.rename(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return os.path.join(directory, name)
        with contextlib.suppress(OSError):  # at worst a stray dotfile remains
            os.unlink(source, dir_fd=dir_fd)
        return os.path.join(directory, name)
    raise FileExistsError(errno.EEXIST, "no free name", directory)


def _put_back(dirs: InboxDirs, claim: str, name: str) -> None:
    """Return a claimed but undelivered entry to the inbox, never over a newer file."""
    rfd = dirs.removed_fd()
    try:
        os.link(claim, name, src_dir_fd=rfd, dst_dir_fd=dirs.ifd, follow_symlinks=False)
        os.unlink(claim, dir_fd=rfd)
        return
    except FileExistsError:
        pass
    except OSError:  # a directory, or no hard links: rename unless the name is taken
        with contextlib.suppress(OSError):
            if not _lexists(name, dirs.ifd):
                os.rename(claim, name, src_dir_fd=rfd, dst_dir_fd=dirs.ifd)
                return
    log.warning(
        "could not return %r to %r; it stays in the removed directory",
        os.path.join(dirs.removed, claim),
        os.path.join(dirs.inbox, name),
    )


class NotSettled(Exception):
    """The file changed less than :data:`SETTLE_TIME` ago, and the caller would not wait."""


class Taken(NamedTuple):
    """One claimed inbox entry: where it is recorded and what it said.

    ``unread`` names the kind of an ``abort`` that is not a regular file ("a
    directory", "a FIFO", ...): it aborts all the same but is never opened,
    followed or read, so ``text`` is empty.
    """

    record: str
    text: str
    unread: str | None = None


def take(
    dirs: InboxDirs, name: str, max_bytes: int, *, complete: bool = False, wait: bool = True
) -> Taken | None:
    """Claim, read and record one inbox file (steps 1-5 of the inbox module).

    ``complete``: the caller knows the file is whole (its writer closed it, or
    it arrived by rename), so the settle wait is skipped. ``wait=False``:
    raise :class:`NotSettled` instead of waiting (the caller retries later,
    and may learn meanwhile that the file is complete). Returns the
    :class:`Taken` entry, or None when the file stays in (or went back to)
    the inbox or another consumer took it. Raises ``OSError`` for a failure
    before the claim; the file is then still in the inbox. An ``abort`` goes
    to :func:`_take_abort`: it never stays in the inbox unclaimed.
    """
    if name == ABORT_NAME:
        return _take_abort(dirs, max_bytes, complete=complete, wait=wait)
    source = os.path.join(dirs.inbox, name)
    try:
        fd, st = _open_regular(name, dirs.ifd)
    except FileNotFoundError:
        log.debug("inbox file %r was taken by another consumer", source)
        return None
    os.close(fd)
    if not complete and not wait and not settled(st):
        raise NotSettled(source)
    if not complete and not wait_complete(name, dirs.ifd, st):
        log.info("inbox file %r is still being written: left for the next pickup", source)
        return None
    claim = f".claim-{os.getpid()}-{os.urandom(8).hex()}"
    try:
        rfd = dirs.removed_fd()
        os.rename(name, claim, src_dir_fd=dirs.ifd, dst_dir_fd=rfd)
    except FileNotFoundError:
        if _lexists(name, dirs.ifd):
            raise
        log.debug("inbox file %r was taken by another consumer", source)
        return None
    try:
        fd, st = _open_regular(claim, rfd)
        try:
            text = _read(fd, st.st_size, max_bytes)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("inbox file %r not delivered: %s", source, exc)
        _put_back(dirs, claim, name)
        return None
    return Taken(_record(dirs, claim, name, rfd), text)


def _record(dirs: InboxDirs, claim: str, name: str, rfd: int, *, by_rename: bool = False) -> str:
    """Give the claimed entry its record name (``name``, ``name.1``, ...); its path."""
    names = (numbered(name, n) for n in range(MAX_NAMES))
    try:
        return place(claim, dirs.removed, names, dir_fd=rfd, by_rename=by_rename)
    except OSError as exc:
        record = os.path.join(dirs.removed, claim)
        log.warning("inbox file %r delivered, recorded as %r: %s", name, record, exc)
        return record


def _take_abort(
    dirs: InboxDirs, max_bytes: int, *, complete: bool, wait: bool, retries: int = 3
) -> Taken | None:
    """Claim the ``abort`` entry, whatever its type: it always aborts (fails closed).

    A regular file is read once complete (or after MAX_SETTLE_WAIT, as it is).
    Anything else (directory, symlink, FIFO, socket, device) has nothing to
    settle and is claimed at once without being opened, followed or read:
    a rename moves the entry itself, never a symlink's target.
    """
    source = os.path.join(dirs.inbox, ABORT_NAME)
    try:
        st = os.lstat(ABORT_NAME, dir_fd=dirs.ifd)
    except FileNotFoundError:
        log.debug("abort file %r was taken by another consumer", source)
        return None
    regular = entry_kind(st.st_mode) is None
    if regular and not complete:
        if not wait and not settled(st):
            raise NotSettled(source)
        wait_complete(ABORT_NAME, dirs.ifd, st)  # still changing: taken as it is
    claim = f".claim-{os.getpid()}-{os.urandom(8).hex()}"
    try:
        rfd = dirs.removed_fd()
        os.rename(ABORT_NAME, claim, src_dir_fd=dirs.ifd, dst_dir_fd=rfd)
    except OSError as exc:
        if not _lexists(ABORT_NAME, dirs.ifd):
            log.debug("abort file %r was taken by another consumer", source)
            return None
        if isinstance(exc, FileNotFoundError) and retries > 0:
            # taken by another consumer and a new abort already in its place (or the
            # removed directory went meanwhile): claim the new one like any other
            return _take_abort(dirs, max_bytes, complete=complete, wait=wait, retries=retries - 1)
        return _claim_abort_in_inbox(dirs, max_bytes, exc)
    text, unread = _read_abort(claim, rfd, max_bytes, source)
    return Taken(_record(dirs, claim, ABORT_NAME, rfd, by_rename=unread is not None), text, unread)


def settled(st: os.stat_result) -> bool:
    """Whether the file is complete as far as its times tell.

    Renamed or linked in after its last write (its inode changed later than
    its content: ``ctime`` after ``mtime``), or last modified at least
    :data:`SETTLE_TIME` ago.
    """
    return st.st_ctime_ns > st.st_mtime_ns or time.time() - st.st_mtime >= SETTLE_TIME


def wait_complete(name: str, dir_fd: int, st: os.stat_result) -> bool:
    """Whether ``name`` is complete: unchanged for :data:`SETTLE_TIME`.

    A file last modified at least SETTLE_TIME ago is complete at once (no wait);
    a fresher one is watched, at most :data:`MAX_SETTLE_WAIT` seconds, until one
    SETTLE_TIME passes without a change of size, modification time or inode.
    False: it was still changing when the wait ran out.
    """
    if settled(st):
        return True
    deadline = time.monotonic() + MAX_SETTLE_WAIT
    seen = _signature(st)
    while True:
        time.sleep(SETTLE_TIME)
        try:
            now = _signature(os.lstat(name, dir_fd=dir_fd))
        except FileNotFoundError:
            return True  # gone: the claim reports who took it
        if now == seen:
            return True
        if time.monotonic() >= deadline:
            return False
        seen = now


def _signature(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _read_abort(name: str, dir_fd: int, max_bytes: int, shown: str) -> tuple[str, str | None]:
    """The text of abort entry ``name`` and, when it is not a regular file, its kind.

    ``shown``: the entry's inbox path, for the log.

    A non-regular entry is never opened. A regular one that cannot be read
    gives "" (logged): it aborts all the same.
    """
    try:
        kind = entry_kind(os.lstat(name, dir_fd=dir_fd).st_mode)
        if kind is not None:
            log.error("abort entry %r is %s: it aborts all the same, unread", shown, kind)
            return "", kind
        fd, st = _open_regular(name, dir_fd)
        try:
            return _read(fd, st.st_size, max_bytes), None
        finally:
            os.close(fd)
    except OSError as exc:
        log.error("abort file %r could not be read (it aborts all the same): %s", shown, exc)
        return "", None


def _claim_abort_in_inbox(dirs: InboxDirs, max_bytes: int, problem: OSError) -> Taken | None:
    """Claim an abort that cannot go to the removed directory; it aborts all the same.

    First choice: rename it to a hidden ``.abort-<ns>-<pid>`` name in the
    inbox itself (a rename inside one directory cannot cross file systems, and
    readers skip hidden names, so the claim stays exactly-once). If even that
    fails, the file is read where it is and left there: every pickup aborts
    until an operator removes it. Both are logged at error level.
    """
    source = os.path.join(dirs.inbox, ABORT_NAME)
    hidden = f".abort-{time.time_ns()}-{os.getpid()}"
    try:
        os.rename(ABORT_NAME, hidden, src_dir_fd=dirs.ifd, dst_dir_fd=dirs.ifd)
    except FileNotFoundError:
        log.debug("abort file %r was taken by another consumer", source)
        return None
    except OSError as exc:
        log.error(
            "abort file %r cannot be moved (to %r: %s; within the inbox: %s): it stays in"
            " place and aborts every call until an operator removes it",
            source,
            dirs.removed,
            problem,
            exc,
        )
        return Taken(source, *_read_abort(ABORT_NAME, dirs.ifd, max_bytes, source))
    record = os.path.join(dirs.inbox, hidden)
    log.error(
        "abort file %r could not be moved to %r (%s): the agent is aborted and the abort"
        " is recorded as %r",
        source,
        dirs.removed,
        problem,
        record,
    )
    return Taken(record, *_read_abort(hidden, dirs.ifd, max_bytes, source))
