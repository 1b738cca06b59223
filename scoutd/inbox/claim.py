"""Claiming one inbox entry: check in place, wait until complete, move, read, record.

The steps are listed in :mod:`scoutd.inbox`. Two rules of this module keep an
operator in control of a hostile agent:

* *Complete files only* (docs/OPERATIONS.md, "Files written in place"): a
  file that some process holds open for writing is never taken (the kernel
  tells, through a read lease: :func:`~scoutd.inbox.files.being_written`);
  where the kernel cannot tell, a file is complete once it arrived by rename
  or link (its inode changed after its last write, ``ctime`` later than
  ``mtime``) or has not changed for :data:`SETTLE_TIME` (or is dated that far
  ahead of the clock, which no write in progress is). Nothing here sleeps
  unless a caller asks to (``wait=True``, only for an abort, in a caller's
  own thread): a notice not complete is left for the next pickup, an abort
  not complete raises :class:`NotSettled` and the caller decides (the
  pickup aborts at once without reading it; the daemon's watcher retries
  from its event loop, then takes it as it is after :data:`MAX_SETTLE_WAIT`).
* *An abort fails closed*: when the removed directory cannot take the claim
  (a regular file or dangling symlink in its place, another file system, any
  rename error), the abort is claimed under a hidden name in the inbox itself
  and, if even that fails, read where it is and left there. Either way it
  aborts, and the failure is logged at error level. An ``abort`` that is not a
  regular file (directory, symlink, FIFO, socket, device) aborts too, at once
  and with a generic reason naming its kind: it is moved like any abort but
  never opened, followed or read. An abort is never moved before the
  caller's ``before_claim`` has made it durable: when that raises (no marker
  could be written), the abort stays where it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import NamedTuple

from .entries import entry_kind
from .files import (
    MAX_SETTLE_WAIT,
    SETTLE_TIME,
    InboxDirs,
    being_written,
    lexists,
    open_regular,
    place,
    read_text,
)
from .names import ABORT_NAME, MAX_NAMES, numbered

__all__ = [
    "MAX_SETTLE_WAIT",
    "SETTLE_TIME",
    "NotSettled",
    "Taken",
    "is_complete",
    "settled",
    "take",
]

log = logging.getLogger("scoutd.inbox")


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
            if not lexists(name, dirs.ifd):
                os.rename(claim, name, src_dir_fd=rfd, dst_dir_fd=dirs.ifd)
                return
    log.warning(
        "could not return %r to %r; it stays in the removed directory",
        os.path.join(dirs.removed, claim),
        os.path.join(dirs.inbox, name),
    )


class NotSettled(Exception):
    """The file is still being written (or changed less than :data:`SETTLE_TIME` ago)."""


class Taken(NamedTuple):
    """One claimed inbox entry: where it is recorded and what it said.

    ``unread`` names the kind of an ``abort`` that is not a regular file ("a
    directory", "a FIFO", ...): it aborts all the same but is never opened,
    followed or read, so ``text`` is empty.
    """

    record: str
    text: str
    unread: str | None = None


# Told an abort's text and, when not a regular file, its kind, just before it is
# claimed: the caller makes the abort durable first (scoutd.inbox.aborted), so
# that at every moment its entry or its marker exists (an abort always aborts).
# What it raises reaches take's caller with the abort still in place, unmoved: a
# caller that could not make it durable raises (scoutd.inbox.pickup._reasoned).
BeforeClaim = Callable[[str, "str | None"], object]


def take(
    dirs: InboxDirs,
    name: str,
    max_bytes: int,
    *,
    complete: bool = False,
    wait: bool = False,
    before_claim: BeforeClaim | None = None,
) -> Taken | None:
    """Claim, read and record one inbox file (steps 1-5 of the inbox module).

    ``complete``: the caller knows the file is whole (its writer closed it, or
    it arrived by rename). Otherwise a notice being written is left for the
    next pickup, never waited for; an ``abort`` being written raises
    :class:`NotSettled`, or with ``wait`` is waited for (at most
    :data:`MAX_SETTLE_WAIT`, then taken as it is). Returns the
    :class:`Taken` entry, or None when the file stays in (or went back to)
    the inbox or another consumer took it. Raises ``OSError`` for a failure
    before the claim; the file is then still in the inbox. An ``abort`` goes
    to :func:`_take_abort`: it never stays in the inbox unclaimed; ``before_claim``
    is told what it says before it leaves its place, and what it raises
    leaves the abort in place and reaches the caller.
    """
    if name == ABORT_NAME:
        return _take_abort(dirs, max_bytes, complete=complete, wait=wait, before=before_claim)
    source = os.path.join(dirs.inbox, name)
    try:
        fd, st = open_regular(name, dirs.ifd)
    except FileNotFoundError:
        log.debug("inbox file %r was taken by another consumer", source)
        return None
    try:
        done = complete or is_complete(fd, st)
    finally:
        os.close(fd)
    if not done:
        log.info("inbox file %r is still being written: left for the next pickup", source)
        return None
    claim = f".claim-{os.getpid()}-{os.urandom(8).hex()}"  # pragma: no mutate (any fresh name)
    try:
        rfd = dirs.removed_fd()
        os.rename(name, claim, src_dir_fd=dirs.ifd, dst_dir_fd=rfd)
    except FileNotFoundError:
        if lexists(name, dirs.ifd):
            raise
        log.debug("inbox file %r was taken by another consumer", source)
        return None
    try:
        fd, st = open_regular(claim, rfd, rights_of=dirs.ifd)  # what the inbox's owner may read
        try:
            text = read_text(fd, st.st_size, max_bytes)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("inbox file %r not delivered: %s", source, exc)
        _put_back(dirs, claim, name)
        return None
    return Taken(_record(dirs, claim, name, rfd), text)


def _record(dirs: InboxDirs, claim: str, name: str, rfd: int, *, by_rename: bool = False) -> str:
    """Give the claimed entry its record name (``name``, ``name.1``, ...); its path."""
    names = (numbered(name, n) for n in range(_first_free(name, rfd), MAX_NAMES))
    try:
        return place(claim, dirs.removed, names, dir_fd=rfd, by_rename=by_rename)
    except OSError as exc:
        record = os.path.join(dirs.removed, claim)
        log.warning("inbox file %r delivered, recorded as %r: %s", name, record, exc)
        return record


def _first_free(name: str, rfd: int) -> int:
    """About the first free record number of ``name``, in O(log n) looks.

    Records of one name are numbered from 0 without gaps, as a rule: found by
    doubling, then halving, it costs 2 log n looks where trying each number
    in turn cost n (0.4 s a delivery with 50,000 records of one name). A gap
    an operator made, or a record made meanwhile, only moves where
    :func:`~scoutd.inbox.files.place` starts trying: it never replaces one.
    """
    if not lexists(numbered(name, 0), rfd):
        return 0
    # Not mutated (the lines so marked): another first probe or step only changes
    # which numbers are looked at, not the number found.
    taken, free = 0, 1  # pragma: no mutate
    while free < MAX_NAMES and lexists(numbered(name, free), rfd):
        taken, free = free, min(free * 2, MAX_NAMES)  # pragma: no mutate
    while taken + 1 < free:
        middle = (taken + free) // 2
        if lexists(numbered(name, middle), rfd):
            taken = middle
        else:
            free = middle
    return free


def _take_abort(
    dirs: InboxDirs,
    max_bytes: int,
    *,
    complete: bool,
    wait: bool,
    before: BeforeClaim | None = None,
    retries: int = 3,
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
    if regular and not complete and not _abort_complete(dirs.ifd, st):
        if not wait:
            raise NotSettled(source)
        _wait_for_abort(dirs.ifd)  # still changing after it: taken as it is
    if before is not None:  # read in place, as it will be claimed: durable before it moves
        # (raises, the abort unmoved, when it cannot be made durable)
        before(*_read_abort(ABORT_NAME, dirs.ifd, max_bytes, source))
    claim = f".claim-{os.getpid()}-{os.urandom(8).hex()}"  # pragma: no mutate (any fresh name)
    try:
        rfd = dirs.removed_fd()
        os.rename(ABORT_NAME, claim, src_dir_fd=dirs.ifd, dst_dir_fd=rfd)
    except OSError as exc:
        if not lexists(ABORT_NAME, dirs.ifd):
            log.debug("abort file %r was taken by another consumer", source)
            return None
        if isinstance(exc, FileNotFoundError) and retries > 0:
            # taken by another consumer and a new abort already in its place (or the
            # removed directory went meanwhile): claim the new one like any other
            return _take_abort(
                dirs, max_bytes, complete=complete, wait=wait, before=before, retries=retries - 1
            )
        return _claim_abort_in_inbox(dirs, max_bytes, exc)
    text, unread = _read_abort(claim, rfd, max_bytes, source, rights_of=dirs.ifd)
    return Taken(_record(dirs, claim, ABORT_NAME, rfd, by_rename=unread is not None), text, unread)


def is_complete(fd: int, st: os.stat_result) -> bool:
    """Whether the open regular file ``fd`` (``fstat`` result ``st``) is complete.

    Nobody holds it open for writing, where the kernel can tell
    (:func:`~scoutd.inbox.files.being_written`); else :func:`settled`.
    """
    writing = being_written(fd)
    return settled(st) if writing is None else not writing


def _abort_complete(dir_fd: int, st: os.stat_result) -> bool:
    """:func:`is_complete` for the regular ``abort``; :func:`settled` if it cannot be opened."""
    try:
        fd, opened = open_regular(ABORT_NAME, dir_fd)
    except OSError:  # unreadable here (or swapped): what its times tell
        return settled(st)
    try:
        return is_complete(fd, opened)
    finally:
        os.close(fd)


def settled(st: os.stat_result) -> bool:
    """Whether the file is complete as far as its times tell.

    Renamed or linked in after its last write (its inode changed later than
    its content: ``ctime`` after ``mtime``), or last modified at least
    :data:`SETTLE_TIME` before the clock, or dated at least that far ahead of
    it: the kernel dates a write with the current time, so a file dated in the
    future had its date set after its last write (``cp -p``, ``rsync -a``,
    ``tar``, ``touch -d``, another machine's clock) and is no write in
    progress. Waiting for that date would hold it for as long as the date is
    ahead (docs/RELIABILITY.md, "A time is its writer's word").
    """
    since = time.time() - st.st_mtime
    return st.st_ctime_ns > st.st_mtime_ns or since >= SETTLE_TIME or since <= -SETTLE_TIME


def _wait_for_abort(dir_fd: int) -> None:
    """Wait, at most :data:`MAX_SETTLE_WAIT` seconds, until the regular ``abort`` is complete.

    Sleeps in the caller's thread: only for a caller that asked to wait
    (``wait=True``), never in the daemon. Complete: nobody holds it open for
    writing (where the kernel tells), else its times say so (:func:`settled`).
    Still changing when the wait runs out, or gone: the claim goes on all the
    same (an abort is taken as it is; one taken meanwhile is reported so).
    """
    deadline = time.monotonic() + MAX_SETTLE_WAIT
    while True:
        time.sleep(SETTLE_TIME)
        try:
            now = os.lstat(ABORT_NAME, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        if _abort_complete(dir_fd, now) or time.monotonic() >= deadline:
            return


def _read_abort(
    name: str, dir_fd: int, max_bytes: int, shown: str, *, rights_of: int | None = None
) -> tuple[str, str | None]:
    """The text of abort entry ``name`` and, when it is not a regular file, its kind.

    ``shown``: the entry's inbox path, for the log; ``rights_of``: as for
    :func:`~scoutd.inbox.files.open_regular`.

    A non-regular entry is never opened. A regular one that cannot be read
    gives "" (logged): it aborts all the same.
    """
    try:
        kind = entry_kind(os.lstat(name, dir_fd=dir_fd).st_mode)
        if kind is not None:
            log.error("abort entry %r is %s: it aborts all the same, unread", shown, kind)
            return "", kind
        fd, st = open_regular(name, dir_fd, rights_of=rights_of)
        try:
            return read_text(fd, st.st_size, max_bytes), None
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
