"""Writing into an inbox: notices and aborts, atomically, never replacing an entry.

A writer reaches the chat directory one component at a time and follows a
symlink on the way only when root or the writer's own user made it
(:mod:`scoutd.inbox.walk`): an agent that swaps its chat directory for a
symlink to another agent's cannot redirect an operator's abort. It creates
the inbox if needed (with at least the group access of its chat directory, so
that a daemon sharing that group can list it whatever the writer's umask;
files get the read bits of their inbox),
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

from ..errors import AbortNotWritten
from .entries import entry_kind
from .files import SETTLE_TIME, WRITE_FLAGS, open_dir, place
from .names import ABORT_NAME, MAX_NAMES, inbox_dir, notice_names
from .walk import open_directory

__all__ = ["AbortNotWritten", "write_abort", "write_notice"]

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
    ``chmod``.
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
                if mine.st_gid != chat.st_gid:
                    os.chown(tfd, -1, chat.st_gid)
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
    whatever the writer's umask.
    """
    with contextlib.suppress(OSError):
        inbox, mine = os.fstat(dfd), os.fstat(fd)
        wanted = inbox.st_mode & _READ_BITS & ~mine.st_mode
        if wanted:
            os.chmod(fd, stat.S_IMODE(mine.st_mode) | wanted)
        if mine.st_gid != inbox.st_gid:
            os.chown(fd, -1, inbox.st_gid)


def _drop(
    save_file: str, text: str, names: Callable[[int], Iterable[str]], *, keep: bool = False
) -> tuple[str, str | None]:
    """Write ``text`` to a dotfile in the inbox, fsync it, then give it a final name.

    ``names`` gives the names to try, from the inbox's open descriptor.
    Returns the final entry's real path and its kind (None: a regular file;
    with ``keep``, an entry already there may be of another kind).
    """
    inbox_path = inbox_dir(save_file)
    chat = open_directory(os.path.dirname(inbox_path) or ".", create=True)
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
                data = memoryview(text.encode("utf-8"))
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
            kind = entry_kind(os.lstat(os.path.basename(final), dir_fd=dfd).st_mode)
        except FileNotFoundError:  # consumed already: it was what we wrote
            kind = None
    finally:
        os.close(dfd)
    return final, kind


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


def write_notice(save_file: str, text: str, *, name: str | None = None) -> str:
    """Drop ``text`` into ``save_file``'s inbox atomically; return the final path.

    ``name`` defaults to a unique name that sorts in drop order. A ``name``
    already pending is never replaced: the notice gets a name that sorts after
    every pending one of that name (``note.txt``, then ``note~00001.txt``, ...),
    so notices of one name are delivered in the order they were written. The
    path returned is the real one (a symlink on the way resolved).

    Raises:
        ValueError: ``name`` is not a plain, visible file name, or is ``abort``.
        OSError: the inbox cannot be created or written; ``ELOOP`` for a
            symlink on the way that neither root nor the caller made.
    """
    if name is None:
        return _drop(save_file, text, _fresh_names)[0]
    if not name or name.startswith(".") or "/" in name or "\0" in name or name == ABORT_NAME:
        raise ValueError(f"invalid notice name {name!r}: a plain file name, not hidden nor 'abort'")
    return _drop(save_file, text, _arrival_names(name))[0]


def write_abort(save_file: str, reason: str = "") -> str:
    """Drop an ``abort`` file into ``save_file``'s inbox; an abort already waiting is kept.

    Returns the real path of the ``abort`` file. When a regular abort is
    already waiting, it stays as it is and ``reason`` is dropped: the agent is
    aborted once, with the first reason (docs/OPERATIONS.md, "Aborting an agent").

    Raises:
        AbortNotWritten: the waiting ``abort`` is not a regular file (it aborts,
            with a generic reason).
        OSError: as :func:`write_notice`.
    """
    path, kind = _drop(save_file, reason, lambda dfd: [ABORT_NAME], keep=True)
    if kind is not None:
        raise AbortNotWritten(path, kind)
    return path
