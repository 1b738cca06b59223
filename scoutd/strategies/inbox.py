"""``inbox`` (docs/STRATEGIES.md): operator notices, delivered at most once.

Operators drop files into ``<stem>.inbox`` beside a chat's save file. Each
regular file is moved into ``<stem>.inbox_removed``, only then read, and
appended to the prompt as a ``user`` message; a file named ``abort`` raises
:class:`~scoutd.errors.Aborted` instead. Claiming one file
(:func:`scoutd.strategies.inbox_files.take`):

1. *Check in place*: open with ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``. A
   symlink fails (``ELOOP``), a FIFO swapped in after the listing opens without
   waiting for a writer; a notice that is not a readable regular file stays
   put (an ``abort`` of any type is claimed, see below). A file written in
   place is taken once complete (unchanged for a short settle time, or closed
   by its writer as the daemon's watcher sees).
2. *Claim*: ``rename`` it to a private ``.claim-<pid>-<random>`` name in the
   removed directory. Of N racing consumers exactly one rename succeeds; the
   others get ``ENOENT`` and skip. The claimed entry is checked again by its
   private name, in case another entry took the name after step 1.
3. *Read* at most ``inbox_max_bytes``.
4. *Record*: ``link`` the private name to ``note.txt``, else ``note.1.txt``, ...
   (link fails with ``EEXIST`` where rename would replace, so no record is
   overwritten, even by a consumer recording the same name at the same
   instant), then unlink the private name. The inode, hence the mtime, is kept.
5. *Put back* an entry that failed step 2's check or step 3: link it to its
   inbox name again (never over a newer file) and unlink the private name.

Only the consumer whose rename succeeded delivers, after its claim: delivery
is at most once. A crash between claim and record leaves a ``.claim-*``
dotfile in the removed directory: consumed, never delivered.

An abort fails closed: when step 2 fails (the removed directory is a regular
file or a dangling symlink, lies on another file system, refuses the rename),
the abort is claimed under a hidden ``.abort-<ns>-<pid>`` name in the inbox
itself, or, if even that fails, read in place and left there. It aborts all
the same, and the failure is logged at error level. An entry named ``abort``
that is not a regular file (directory, symlink, FIFO, socket, device: the
agent can make one in its own chat directory) aborts too, at once, with a
generic reason naming its kind; it is moved like any abort (a rename moves the
entry itself, never a target) and never opened, followed or read.

Both directories are opened once per pickup with ``O_NOFOLLOW | O_DIRECTORY``
and every step names entries relative to those descriptors (``*at`` calls). An
inbox or removed directory that is a symlink is refused (logged), and one
swapped for a symlink after that check cannot redirect a move: otherwise a
client allowed to write beside its save file could make the daemon empty, or
fill, a directory outside ``allowed_roots`` (docs/OPERATIONS.md). Writers refuse a
symlinked inbox the same way.

Resource handling: each descriptor is closed by the function that opened it.
Readers never create the inbox; they create the removed directory just before
the first claim. Writers create the inbox, write and fsync a dotfile there
(readers ignore dotfiles) and rename it to its final name without replacing
one (``renameat2``; a hard link where that is missing): no partial notice is
ever visible, and the daemon's watcher sees it arrive complete.

Error handling: no ``OSError`` escapes :func:`inbox` or :func:`claim_abort`.
Each file stands alone: a failure is logged (logger ``scoutd.inbox``, warning)
and the next file is tried; a file another consumer took first is skipped
(debug). Without hard links (FAT, some FUSE mounts) an existence check and
rename replace link: no overwrite except by two parties racing for one name.
An entry swapped for a device node (root only) may be opened once, never
read. The writers raise ``OSError`` to their caller.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..config import PromptConfig
from ..errors import Aborted, AbortNotWritten  # AbortNotWritten: re-exported
from .inbox_entries import entry_kind, removed_dir_problem
from .inbox_files import (
    ABORT_NAME,
    MAX_NAMES,
    SETTLE_TIME,
    WRITE_FLAGS,
    InboxDirs,
    Taken,
    numbered,
    open_dir,
    place,
    take,
)
from .report import StrategyReport, content_chars

__all__ = [
    "ABORT_NAME",
    "AbortNotWritten",
    "claim_abort",
    "inbox",
    "inbox_dir",
    "inbox_removed_dir",
    "record_problem",
    "write_abort",
    "write_notice",
]

log = logging.getLogger("scoutd.inbox")


def _stem_path(save_file: str | os.PathLike[str], suffix: str) -> str:
    directory, base = os.path.split(os.fspath(save_file))
    stem = os.path.splitext(base)[0]  # a leading dot is not an extension: ".chat"
    if not stem:
        raise ValueError(f"save file {os.fspath(save_file)!r} has no file name")
    return os.path.join(directory, stem + suffix)


def inbox_dir(save_file: str | os.PathLike[str]) -> str:
    """The inbox beside ``save_file``: ``D/a.b.chat`` -> ``D/a.b.inbox``."""
    return _stem_path(save_file, ".inbox")


def inbox_removed_dir(save_file: str | os.PathLike[str]) -> str:
    """Where delivered notices are kept: ``D/a.b.chat`` -> ``D/a.b.inbox_removed``."""
    return _stem_path(save_file, ".inbox_removed")


def record_problem(save_file: str | os.PathLike[str]) -> str | None:
    """Why consumed files of ``save_file``'s inbox cannot be recorded (None: they can).

    An abort still aborts then (docs/OPERATIONS.md, "Aborting an agent"), but
    its record lands in the inbox under a hidden name, or nowhere.
    """
    return removed_dir_problem(inbox_dir(save_file), inbox_removed_dir(save_file))


def _abort_reason(taken: Taken) -> str:
    if taken.unread is not None:  # never opened: no text, and no path to render
        return f"aborted by operator (the abort entry is {taken.unread}; not read)"
    return taken.text.strip() or f"aborted by operator (abort file {taken.record})"


def inbox(
    messages: Sequence[Any], config: PromptConfig, *, save_file: str | None = None
) -> tuple[list[Any], StrategyReport]:
    """Append each pending notice of ``save_file``'s inbox as a ``user`` message.

    Returns a new list (``messages`` is not modified) and the report. Without a
    ``save_file`` or an inbox directory, nothing is touched or created.

    Raises:
        Aborted: the inbox held an ``abort`` file (now consumed); files sorted
            before it were consumed, those after it stay for the next run.
    """
    out = list(messages)
    delivered = 0
    budget = config.inbox_max_total_bytes  # for all notices of this call; aborts always pass
    dirs = _open_inbox(save_file) if save_file is not None else None
    if dirs is not None:
        try:
            for name in _pending(dirs):
                if budget <= 0 and name != ABORT_NAME:
                    continue  # stays for the next call
                try:
                    limit = config.inbox_max_bytes
                    taken = take(dirs, name, limit if name == ABORT_NAME else min(limit, budget))
                except OSError as exc:
                    path = os.path.join(dirs.inbox, name)
                    log.warning("inbox file %r left in place: %s", path, exc)
                    continue
                if taken is None:
                    continue
                if name == ABORT_NAME:
                    raise Aborted(_abort_reason(taken))
                out.append({"role": "user", "content": taken.text})
                delivered += 1
                size = len(taken.text.encode("utf-8"))
                log.info("notice %r delivered (%d bytes), recorded as %r", name, size, taken.record)
                budget -= size
        finally:
            dirs.close()
    return out, StrategyReport(
        strategy="inbox",
        inbox_delivered=delivered,
        chars_before=content_chars(messages),
        chars_after=content_chars(out),
    )


def _open_inbox(save_file: str | os.PathLike[str]) -> InboxDirs | None:
    """The inbox of ``save_file``, open; None (logged unless simply absent) otherwise."""
    if not os.fspath(save_file).strip():
        return None
    try:
        return InboxDirs(inbox_dir(save_file), inbox_removed_dir(save_file))
    except ValueError as exc:
        log.warning("no inbox: %s", exc)
    except FileNotFoundError:  # the common case: nothing was ever dropped
        pass
    except OSError as exc:
        log.warning("cannot list inbox %r: %s", inbox_dir(save_file), exc)
    return None


def _pending(dirs: InboxDirs) -> list[str]:
    """Sorted names of the regular, non-dot files of an open inbox, and ``abort`` of any type."""
    try:
        with os.scandir(dirs.ifd) as entries:
            names = [
                entry.name
                for entry in entries
                if entry.name == ABORT_NAME
                or (not entry.name.startswith(".") and entry.is_file(follow_symlinks=False))
            ]
    except OSError as exc:
        log.warning("cannot list inbox %r: %s", dirs.inbox, exc)
        return []
    return sorted(names)


def claim_abort(
    save_file: str, *, max_bytes: int = 1 << 20, complete: bool = False, wait: bool = True
) -> str | None:
    """Consume only the ``abort`` file of ``save_file``'s inbox; return its reason.

    None when there is no abort entry or another party consumed it first. An
    abort that cannot be moved still returns its reason (it fails closed); one
    that is not a regular file returns a generic reason naming its kind,
    unread. ``complete``: the caller saw its writer close it
    or rename it in, so no settle wait. ``wait=False``: a file modified less
    than the settle time ago raises
    :class:`~scoutd.strategies.inbox_files.NotSettled` instead of being waited
    for. Never raises ``OSError``.
    """
    dirs = _open_inbox(save_file)
    if dirs is None:
        return None
    try:
        taken = take(dirs, ABORT_NAME, max_bytes, complete=complete, wait=wait)
    except OSError as exc:
        log.warning("abort file of %r left in place: %s", save_file, exc)
        return None
    finally:
        dirs.close()
    return None if taken is None else _abort_reason(taken)


def _drop(save_file: str, text: str, names: Iterable[str], *, keep: bool = False) -> str:
    """Write ``text`` to a dotfile in the inbox, fsync it, then give it a final name."""
    directory = inbox_dir(save_file)
    os.makedirs(directory, exist_ok=True)
    dfd = open_dir(directory)
    try:
        temp = f".tmp-{os.getpid()}-{os.urandom(8).hex()}"
        fd = os.open(temp, WRITE_FLAGS, 0o666, dir_fd=dfd)
        try:
            try:
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
            final = place(temp, directory, names, keep=keep, dir_fd=dfd, by_rename=True)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dfd)
        with contextlib.suppress(OSError):  # make the new entry durable (best effort)
            os.fsync(dfd)
    finally:
        os.close(dfd)
    return final


def _fresh_names() -> Iterator[str]:
    """Names that sort in drop order: nanoseconds, strictly increasing, then the pid."""
    last = 0
    for _ in range(MAX_NAMES):
        last = max(time.time_ns(), last + 1)
        yield f"{last:020d}-{os.getpid()}.txt"


def write_notice(save_file: str, text: str, *, name: str | None = None) -> str:
    """Drop ``text`` into ``save_file``'s inbox atomically; return the final path.

    ``name`` defaults to a unique name that sorts in drop order; an existing
    file is never replaced (``note.txt`` becomes ``note.1.txt``, ...).

    Raises:
        ValueError: ``name`` is not a plain, visible file name, or is ``abort``.
        OSError: the inbox cannot be created or written.
    """
    if name is None:
        return _drop(save_file, text, _fresh_names())
    if not name or name.startswith(".") or "/" in name or "\0" in name or name == ABORT_NAME:
        raise ValueError(f"invalid notice name {name!r}: a plain file name, not hidden nor 'abort'")
    return _drop(save_file, text, (numbered(name, n) for n in range(MAX_NAMES)))


def write_abort(save_file: str, reason: str = "") -> str:
    """Drop an ``abort`` file into ``save_file``'s inbox; an abort already waiting is kept.

    Returns the path of the ``abort`` file. When a regular abort is already
    waiting, it stays as it is and ``reason`` is dropped: the agent is aborted
    once, with the first reason (docs/OPERATIONS.md, "Aborting an agent").

    Raises:
        AbortNotWritten: the waiting ``abort`` is not a regular file (it aborts,
            with a generic reason).
        OSError: as :func:`write_notice`.
    """
    path = _drop(save_file, reason, [ABORT_NAME], keep=True)
    try:
        kind = entry_kind(os.lstat(path).st_mode)
    except FileNotFoundError:  # already claimed: it was an abort all the same
        return path
    if kind is not None:
        raise AbortNotWritten(path, kind)
    return path
