"""Writing into an inbox: notices and aborts, atomically, never replacing an entry.

A writer reaches the chat directory one component at a time and follows a
symlink on the way only when root or the writer's own user made it
(:mod:`scoutd.inbox.walk`): an agent that swaps its chat directory for a
symlink to another agent's cannot redirect an operator's abort. It creates
the inbox if needed (with at least the group access of its chat directory, so
that a daemon sharing that group can list it whatever the writer's umask;
made by root, the chat directory's owner too, so that the agent can empty it;
files get the read bits and group of their inbox, and written by root its owner),
writes and fsyncs a dotfile there (readers ignore dotfiles) and renames it to
its final name without replacing one (``renameat2``; a hard link where that is
missing): no partial notice is ever visible, and the daemon's watcher sees it
arrive complete. A symlinked inbox is refused. The writers return the real
path written (symlinks resolved) and raise ``OSError`` to their caller.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from ..errors import AbortNotWritten
from ..paths import safe_text
from .entries import entry_kind
from .files import SETTLE_TIME, WRITE_FLAGS, open_dir, place
from .names import ABORT_NAME, MAX_NAMES, check_notice_name, inbox_dir, notice_names
from .walk import open_directory

__all__ = ["AbortNotWritten", "AbortPlaced", "place_abort", "write_abort", "write_notice"]

# The group bits of the chat directory an inbox created here gets too.
_GROUP_RWX = 0o070
# The read bits of the inbox a file written there gets too.
_READ_BITS = 0o044


def _make_inbox(name: str, chat_fd: int, shown: str) -> int:
    """Open the inbox ``name`` of the chat directory (never followed), creating it if missing.

    A new inbox appears whole, by a rename, with at least the group bits and
    the group of its chat directory (best effort): an operator's umask of 077
    must not lock a daemon of the shared group out, which would stop the chat
    (it fails closed), not even for the moment between a ``mkdir`` and a
    ``chmod``. Made by root, it gets the owner of its chat directory too: a
    root-owned inbox in an agent's directory is one the agent's own claims may
    not empty, so its notices would never be delivered.
    """
    try:
        return open_dir(name, dir_fd=chat_fd, shown=shown)
    except FileNotFoundError:
        pass
    temp = f".inbox-{os.getpid()}-{os.urandom(8).hex()}"
    os.mkdir(temp, 0o777, dir_fd=chat_fd)
    try:
        tfd = open_dir(temp, dir_fd=chat_fd)
        try:
            with contextlib.suppress(OSError):
                chat, mine = os.fstat(chat_fd), os.fstat(tfd)
                if chat.st_mode & _GROUP_RWX & ~mine.st_mode:
                    os.chmod(tfd, stat.S_IMODE(mine.st_mode) | (chat.st_mode & _GROUP_RWX))
                # On the descriptor (fchown): a name swapped meanwhile is never followed.
                owner = chat.st_uid if os.geteuid() == 0 else -1
                if mine.st_gid != chat.st_gid or owner not in (-1, mine.st_uid):
                    os.chown(tfd, owner, chat.st_gid)
        finally:
            os.close(tfd)
        with contextlib.suppress(FileExistsError):  # made meanwhile: that one is used
            place(temp, shown, [name], dir_fd=chat_fd, by_rename=True)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(temp, dir_fd=chat_fd)
    return open_dir(name, dir_fd=chat_fd, shown=shown)


def _readable_like(fd: int, dfd: int) -> None:
    """Let whoever may list the inbox read the new file too (best effort).

    The read bits the inbox grants its group and others, and its group: a
    daemon of the shared group must read a notice or an abort's reason,
    whatever the writer's umask. Written by root, the file gets the inbox's
    owner too (as :func:`_make_inbox` gives the inbox its chat directory's):
    a root file of mode 0600 (umask 077) in an agent's inbox is one the
    agent's own pickup cannot read, so the notice would never be delivered.
    Owning it gives the agent nothing new: it owns the inbox, so it can
    already remove or replace any entry. No bit is granted to others.
    """
    with contextlib.suppress(OSError):
        inbox, mine = os.fstat(dfd), os.fstat(fd)
        wanted = inbox.st_mode & _READ_BITS & ~mine.st_mode
        if wanted:
            os.chmod(fd, stat.S_IMODE(mine.st_mode) | wanted)
        # On the descriptor (fchown): a name swapped meanwhile is never followed.
        owner = inbox.st_uid if os.geteuid() == 0 and mine.st_uid != inbox.st_uid else -1
        if owner != -1 or mine.st_gid != inbox.st_gid:
            os.chown(fd, owner, inbox.st_gid)


def _encoded(text: str) -> bytes:
    """``text`` as the bytes the operator gave: undecodable bytes of the command line
    (``surrogateescape``) are written as they came, as the abort markers do.

    Any other lone surrogate (only a library caller can pass one) is escaped
    (``\\uNNNN``) rather than refused: an abort must always be written.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return safe_text(text).encode("utf-8", "surrogateescape")


class _Dropped(NamedTuple):
    path: str  # the final entry's real path
    kind: str | None  # None: a regular file (with ``keep``, one there may be of another kind)
    written: bool  # False: ``keep`` kept an entry already there; ours was dropped


def _drop(
    save_file: str,
    text: str,
    names: Callable[[int], Iterable[str]],
    *,
    keep: bool = False,
    exact: bool = False,
) -> _Dropped:
    """Write ``text`` to a dotfile in the inbox, fsync it, then give it a final name.

    ``names`` gives the names to try, from the inbox's open descriptor;
    ``exact``: a path the daemon resolved itself, no symlink on it followed
    (:mod:`scoutd.inbox.walk`).
    Whether the final entry is the one written is told by its inode, not its
    text: a waiting abort may hold the same reason, or only start with it.
    """
    inbox_path = inbox_dir(save_file)
    chat = open_directory(os.path.dirname(inbox_path) or ".", create=True, exact=exact)
    try:
        directory = os.path.join(chat.path, os.path.basename(inbox_path))
        dfd = _make_inbox(os.path.basename(inbox_path), chat.fd, directory)
    finally:
        os.close(chat.fd)
    try:
        temp = f".tmp-{os.getpid()}-{os.urandom(8).hex()}"
        fd = os.open(temp, WRITE_FLAGS, 0o666, dir_fd=dfd)
        try:
            try:
                _readable_like(fd, dfd)
                ours = os.fstat(fd)
                data = memoryview(_encoded(text))
                while data:
                    data = data[os.write(fd, data) :]
                # Dated back past the settle time: a reader that finds the file by a
                # scan, before any event, sees it complete at once, however coarse
                # the filesystem's timestamps (docs/OPERATIONS.md, files written in place).
                past = time.time_ns() - 2 * int(SETTLE_TIME * 1e9)
                os.utime(fd, ns=(past, past))
                os.fsync(fd)
            finally:
                os.close(fd)
            final = place(temp, directory, names(dfd), keep=keep, dir_fd=dfd, by_rename=True)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dfd)
        with contextlib.suppress(OSError):  # make the new entry durable (best effort)
            os.fsync(dfd)
        try:
            found = os.lstat(os.path.basename(final), dir_fd=dfd)
        except FileNotFoundError:  # consumed already: it was what we wrote
            kind, written = None, True
        else:
            kind = entry_kind(found.st_mode)
            written = (found.st_dev, found.st_ino) == (ours.st_dev, ours.st_ino)
    finally:
        os.close(dfd)
    return _Dropped(final, kind, written)


def _fresh_names(dfd: int) -> Iterator[str]:
    """Names that sort in drop order: nanoseconds, strictly increasing, then the pid."""
    last = 0
    for _ in range(MAX_NAMES):
        last = max(time.time_ns(), last + 1)
        yield f"{last:020d}-{os.getpid()}.txt"


def _arrival_names(name: str) -> Callable[[int], Iterator[str]]:
    """Names for a notice called ``name`` that sort after every pending one of that name."""

    def names(dfd: int) -> Iterator[str]:
        return notice_names(name, os.listdir(dfd))

    return names


def write_notice(save_file: str, text: str, *, name: str | None = None, exact: bool = False) -> str:
    """Drop ``text`` into ``save_file``'s inbox atomically; return the final path.

    ``name`` defaults to a unique name that sorts in drop order. A ``name``
    already pending is never replaced: the notice gets a name that sorts after
    every pending one of that name (``note.txt``, then ``note~00001.txt``, ...),
    so notices of one name are delivered in the order they were written. The
    path returned is the real one (a symlink on the way resolved). ``exact``:
    ``save_file`` is a path the daemon resolved itself (the fleet's): no
    symlink on it is followed, root's neither (:mod:`scoutd.inbox.walk`).

    Raises:
        ValueError: ``name`` is not a plain, visible file name, is ``abort``, or is
            longer than :data:`~.names.MAX_NOTICE_NAME` bytes (249).
        OSError: the inbox cannot be created or written; ``ELOOP`` for a
            symlink on the way that neither root nor the caller made (any, ``exact``).
    """
    if name is None:
        return _drop(save_file, text, _fresh_names, exact=exact).path
    check_notice_name(name)
    return _drop(save_file, text, _arrival_names(name), exact=exact).path


class AbortPlaced(NamedTuple):
    """What :func:`place_abort` did."""

    path: str  # the real path of the ``abort`` file
    written: bool  # False: an abort was already waiting, and kept (``reason`` dropped)


def place_abort(save_file: str, reason: str = "", *, exact: bool = False) -> AbortPlaced:
    """:func:`write_abort`, telling also whether this reason was written or one was waiting.

    Raises:
        AbortNotWritten: as :func:`write_abort`.
        OSError: as :func:`write_notice`.
    """
    dropped = _drop(save_file, reason, lambda dfd: [ABORT_NAME], keep=True, exact=exact)
    if dropped.kind is not None:
        raise AbortNotWritten(dropped.path, dropped.kind)
    return AbortPlaced(dropped.path, dropped.written)


def write_abort(save_file: str, reason: str = "", *, exact: bool = False) -> str:
    """Drop an ``abort`` file into ``save_file``'s inbox; an abort already waiting is kept.

    Returns the real path of the ``abort`` file. When a regular abort is
    already waiting, it stays as it is and ``reason`` is dropped: the agent is
    aborted once, with the first reason (docs/OPERATIONS.md, "Aborting an agent").
    Undecodable bytes of ``reason`` (``surrogateescape``) are written as they are.
    ``exact``: as for :func:`write_notice`.

    Raises:
        AbortNotWritten: the waiting ``abort`` is not a regular file (it aborts,
            with a generic reason).
        OSError: as :func:`write_notice`.
    """
    return place_abort(save_file, reason, exact=exact).path
