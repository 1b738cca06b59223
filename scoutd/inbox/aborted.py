"""An aborted chat stays aborted: the durable abort marker (docs/RELIABILITY.md).

An ``abort`` entry is consumed once (moved into the record before it is
read), so on its own it stops only the call that consumed it. Consuming one
therefore leaves a *marker*, a file holding the reason beside the chat:
``D/<stem>.inbox_aborted`` for the save file ``D/<stem>.chat`` (a sibling of
its inbox and record directory, inside neither), or ``<stem>.inbox/.aborted``
(a dotfile, which no pickup delivers) when ``D`` cannot take it. While a
marker exists the chat is aborted: every later prepare of that chat fails
with :class:`~scoutd.errors.Aborted` and that reason, in any process, after
any restart, for the library, the daemon and every framework hook, as if the
abort were still waiting. Only an operator lifts it: :func:`clear`
(``scoutd clear SAVE_FILE``), or removing the file.

* :func:`held` tells whether a chat is aborted, and why; an entry of any kind
  under a marker's name counts (fail closed), but only a regular file is read.
  One that exists but cannot be reached or read aborts with a generic
  reason: never "not aborted".
* :func:`mark` writes the marker; a marker already there is kept with its
  first reason. It never raises: a marker that cannot be written anywhere
  (a full disk) is logged at error level, and None tells the consumer so.
* the consumers mark the chat *before* the abort leaves the inbox (the
  ``before_abort`` of :func:`~scoutd.inbox.pickup.pick_up` and
  :func:`~scoutd.inbox.pickup.claim_abort`, read in place): at every moment
  the entry or the marker exists, so a hook that looks meanwhile aborts. An
  abort no marker could be written for is not consumed at all: it stays in
  the inbox, and every call aborts (:class:`~scoutd.errors.AbortNotTaken`,
  its own reason) until a marker can be written or an operator clears it;
* nothing marks the chat *after* the abort has left: an operator's
  :func:`clear` in between stands (the marker was written before the move);
* :func:`claim_and_mark` marks the chat and consumes a waiting ``abort``;
  :func:`check` is what a hook asks before each model call: the marker, else a
  waiting abort.

A marker's directory is reached as every consumer reaches the inbox
(:meth:`InboxDirs.of <scoutd.inbox.files.InboxDirs.of>`): the chat directory
one component at a time, following a symlink only when root or the caller
made it (:mod:`scoutd.inbox.walk`), the inbox within it never followed, and
the marker itself never followed. So a chat named through the operator's own
symlink (``~/chats`` to ``/data/chats``) has the marker the daemon wrote
through the resolved path, while a symlink the agent planted leads nowhere.
The daemon, on a path it resolved itself, follows no symlink at all
(``exact=True``, :mod:`scoutd.inbox.walk`): one there was swapped in.
A marker is as safe as the directory holding it: whoever may delete
entries there can clear it (docs/OPERATIONS.md, "An aborted chat stays
aborted", says who can).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from functools import partial
from typing import NamedTuple

from ..errors import AbortNotTaken
from .entries import entry_kind
from .files import WRITE_FLAGS, lexists, open_dir, open_regular, place, read_text
from .names import ABORT_NAME, inbox_dir
from .pickup import claim_abort
from .walk import open_directory

__all__ = [
    "MARKER",
    "SUFFIX",
    "Cleared",
    "check",
    "claim_and_mark",
    "clear",
    "held",
    "mark",
    "marker_paths",
]

log = logging.getLogger("scoutd.inbox")

# The marker beside the chat is named after its inbox with this suffix; the one in
# the inbox is MARKER.
SUFFIX = "_aborted"
MARKER = ".aborted"
# A marker's reason is an abort's, already cut to inbox_max_bytes; this bounds a forged one.
_MAX_REASON_BYTES = 1 << 20


def marker_paths(save_file: str | os.PathLike[str]) -> tuple[str, str]:
    """Where the marker of ``save_file``'s chat may be: beside the chat, then in its inbox."""
    inbox = inbox_dir(save_file)
    return inbox + SUFFIX, os.path.join(inbox, MARKER)


def _reach(directory: str, *, inbox: bool, exact: bool = False) -> int:
    """``directory``, open as every consumer reaches an inbox (:meth:`InboxDirs.of`).

    A chat directory (``inbox`` False) is walked, its trusted symlinks followed
    (:func:`~scoutd.inbox.walk.open_directory`: an ``O_PATH`` descriptor, enough
    for the ``*at`` calls); an inbox is opened within its walked chat
    directory, never followed itself. ``exact``: a path the daemon resolved
    itself, no symlink on it followed. Raises ``OSError``.
    """
    if not inbox:
        return open_directory(directory or ".", exact=exact).fd
    chat, name = os.path.split(directory)
    walked = open_directory(chat or ".", exact=exact)
    try:
        return open_dir(name, dir_fd=walked.fd, shown=directory)
    finally:
        os.close(walked.fd)


# What the kernel's lstat of a marker says when there is none: a missing entry, a file
# on the way, a name longer than any file system allows (as InboxDirs.of judges).
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG})


def _unreachable(path: str, exc: OSError) -> str | None:
    """What a marker the kernel sees but the consumers' way cannot look at means.

    It aborts, unread, with a generic reason: it lies behind what no consumer
    follows (a symlink another user made, a symlink in the inbox's place), or
    cannot be examined. None (no abort) only when it is gone meanwhile
    (``ENOENT``).
    """
    if exc.errno == errno.ENOENT:  # not ENOTDIR: open_dir's "a symlink here"
        return None
    log.error("abort marker %r cannot be examined (the chat is aborted): %s", path, exc)
    return f"aborted by operator (the abort marker {path} cannot be read: {exc.strerror or exc})"


def _read_marker(path: str, *, inbox: bool, exact: bool) -> str | None:
    """The reason the marker at ``path`` gives; None when there is none.

    ``inbox``: the marker in the inbox (else the one beside the chat). An entry
    the kernel sees there that cannot be reached the way consumers reach it, or
    examined, or read, aborts with a generic reason (fails closed; see
    :func:`_unreachable`). One the kernel cannot tell about (no search
    permission, a symlink loop, a failing disk) is none: the consumers' way
    needs the same searches and meets the same error, and every pickup and
    claim fails closed on such a directory itself, with a reason naming it
    (:meth:`InboxDirs.of <scoutd.inbox.files.InboxDirs.of>`).
    """
    try:  # the common case, one system call: no marker
        os.lstat(path)
    except OSError as exc:
        if exc.errno not in _ABSENT:
            log.debug("abort marker %r cannot be examined: %s", path, exc)
        return None
    try:
        dfd = _reach(os.path.dirname(path), inbox=inbox, exact=exact)
    except OSError as exc:
        return _unreachable(path, exc)
    try:
        name = os.path.basename(path)
        try:
            kind = entry_kind(os.lstat(name, dir_fd=dfd).st_mode)
        except OSError as exc:
            return _unreachable(path, exc)
        if kind is not None:  # made by hand, or by the agent: aborted all the same, unread
            return f"aborted by operator (the abort marker {path} is {kind}; not read)"
        try:
            fd, st = open_regular(name, dfd)
            try:
                text = read_text(fd, st.st_size, _MAX_REASON_BYTES).strip()
            finally:
                os.close(fd)
        except OSError as exc:  # there but unreadable: fail closed
            log.warning("abort marker %r cannot be read (the chat is aborted): %s", path, exc)
            text = ""  # pragma: no mutate (None reads the same below)
        return text or f"aborted by operator (abort marker {path})"
    finally:
        os.close(dfd)


def held(save_file: str | os.PathLike[str] | None, *, exact: bool = False) -> str | None:
    """The reason ``save_file``'s chat was aborted with, while its marker exists; else None.

    Never raises ``OSError``. A marker that exists but cannot be reached the
    way every consumer reaches the inbox (a symlink another user made on the
    way, a symlink in the inbox's place), examined or read gives a generic
    reason: it aborts all the same, unread. ``exact``: ``save_file`` is a path
    the daemon resolved itself, where any symlink, root's too, was swapped in
    after its check (:mod:`scoutd.inbox.walk`).
    """
    if save_file is None or not os.fspath(save_file).strip():
        return None
    try:
        paths = marker_paths(save_file)
    except ValueError:  # no file name: no inbox
        return None
    in_inbox = (False, True)  # of each path
    # not mutated: marker_paths gives two paths (strict= changes nothing)
    for path, inbox in zip(paths, in_inbox, strict=True):  # pragma: no mutate
        reason = _read_marker(path, inbox=inbox, exact=exact)
        if reason is not None:
            return reason
    return None


# not mutated: O_DIRECTORY and O_CLOEXEC only make sure; each mutant opens the same directory
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC  # pragma: no mutate


def _sync(dfd: int) -> None:
    """Make the entries of directory ``dfd`` (``O_PATH`` too) durable, best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(".", _DIRECTORY_FLAGS, dir_fd=dfd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write(path: str, reason: str, *, inbox: bool, exact: bool) -> str:
    """Write the marker ``path``, or keep the one there; its path. Raises ``OSError``.

    ``inbox``: the marker in the inbox (else the one beside the chat);
    ``exact``: as for :func:`_reach`.
    """
    directory, name = os.path.split(path)
    dfd = _reach(directory, inbox=inbox, exact=exact)
    try:
        if lexists(name, dfd):  # kept as it is, with nothing to write (a full disk too)
            return path
        temp = f".tmp-{os.getpid()}-{os.urandom(8).hex()}"  # pragma: no mutate (any fresh name)
        fd = os.open(temp, WRITE_FLAGS, 0o666, dir_fd=dfd)
        try:
            try:
                data = memoryview(reason.encode(errors="surrogateescape"))
                while data:
                    data = data[os.write(fd, data) :]
                # Seen first, made durable after: a hook that looks between the
                # abort's consumption and the marker finds it a few writes sooner.
                written = place(temp, directory, [name], keep=True, dir_fd=dfd)
                with contextlib.suppress(OSError):  # best effort, as for the directory
                    os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dfd)
        _sync(dfd)
    finally:
        os.close(dfd)
    return written


def mark(save_file: str | os.PathLike[str], reason: str, *, exact: bool = False) -> str | None:
    """Mark ``save_file``'s chat aborted with ``reason``; the marker's path, or None.

    Beside the chat, else in its inbox; a marker already in either place
    stays as it is (the first reason is kept). None, logged at error level,
    when neither can take it (a full disk): the consumers then leave the
    abort in the inbox, where it aborts every call (docs/RELIABILITY.md, "An
    abort fails closed"). ``exact``: as for :func:`held`.
    """
    problems: list[str] = []
    in_inbox = (False, True)  # of each path
    # not mutated: marker_paths gives two paths (strict= changes nothing)
    for path, inbox in zip(marker_paths(save_file), in_inbox, strict=True):  # pragma: no mutate
        try:
            written = _write(path, reason, inbox=inbox, exact=exact)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        if problems:
            # not mutated: one place failed before this one, so the separator is never used
            log.error(
                "abort marker written to %r instead (%s)",
                written,
                "; ".join(problems),  # pragma: no mutate
            )
        return written
    log.error(
        "the chat of %r is aborted, but no abort marker could be written (%s)",
        os.fspath(save_file),
        "; ".join(problems),
    )
    return None


def claim_and_mark(
    save_file: str,
    *,
    max_bytes: int = 1 << 20,
    complete: bool = False,
    wait: bool = True,
    exact: bool = False,
) -> str | None:
    """:func:`~scoutd.inbox.pickup.claim_abort`, the chat marked before the abort leaves.

    ``exact``: the daemon's, on a path it resolved itself (:func:`held`).

    Raises:
        InboxUnusable: as :func:`~scoutd.inbox.pickup.claim_abort`.
        AbortNotTaken: as :func:`~scoutd.inbox.pickup.claim_abort`; also when no
            marker could be written (the abort stays in place, with its reason).
    """
    return claim_abort(
        save_file,
        max_bytes=max_bytes,
        complete=complete,
        wait=wait,
        before_abort=partial(mark, save_file, exact=exact),
        exact=exact,
    )


def check(save_file: str | None, *, max_bytes: int = 1 << 20) -> str | None:
    """Why ``save_file``'s chat is aborted: its marker, else a waiting abort.

    The waiting abort is consumed now, or, when it cannot be taken (no marker
    could be written, an entry that cannot be examined), left in place: its
    reason is returned all the same, so that the hook asking remembers it
    (an object that saw an abort stays aborted for its life).

    Raises:
        InboxUnusable: the inbox exists but cannot be used (nothing seen to remember).
    """
    if save_file is None:
        return None
    reason = held(save_file)
    if reason is not None:
        return reason
    try:
        return claim_and_mark(save_file, max_bytes=max_bytes)
    except AbortNotTaken as exc:
        return exc.reason


class Cleared(NamedTuple):
    """What :func:`clear` did: the entries it removed, those it could not, and
    the reason the chat is still aborted for (None: it is not)."""

    removed: list[str]
    failed: list[tuple[str, str]]
    still: str | None


def _remove(path: str, *, inbox: bool) -> bool:
    """Remove the entry ``path``, never following it; False: it was not there.

    ``inbox``: an entry of the inbox (else one beside the chat), reached as
    :func:`_reach` does. Raises ``OSError`` when it is there and cannot be
    removed (a directory is removed only when empty), or when a symlink on the
    way was made by another user than root or the caller
    (:mod:`scoutd.inbox.walk`: the agent cannot point an operator's clear at
    another agent's chat), or the inbox is one. A name longer than the file
    system allows names nothing, as :func:`held` judges: not there.
    """
    directory, name = os.path.split(path)
    try:
        dfd = _reach(directory, inbox=inbox)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return False
        raise
    try:
        try:
            os.unlink(name, dir_fd=dfd)
        except IsADirectoryError:
            os.rmdir(name, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):
            return False
        raise
    finally:
        os.close(dfd)
    return True


def clear(save_file: str | os.PathLike[str]) -> Cleared:
    """Lift ``save_file``'s abort: remove a waiting ``abort`` entry, then both markers.

    Follows no symlink another user made on the way (:func:`_reach`), never
    the entries it removes; a directory is removed only when empty. ``still``
    says whether the chat is aborted after all (an entry that could not be
    removed, or an abort consumed meanwhile).

    Raises:
        ValueError: ``save_file`` has no file name.
    """
    beside, in_inbox = marker_paths(save_file)
    abort = os.path.join(inbox_dir(save_file), ABORT_NAME)
    entries = [(abort, True), (beside, False), (in_inbox, True)]
    removed: list[str] = []
    failed: list[tuple[str, str]] = []
    for path, inbox in entries:
        try:
            if _remove(path, inbox=inbox):
                removed.append(path)
                log.info("abort entry %r removed by an operator's clear", path)
        except OSError as exc:
            failed.append((path, exc.strerror or str(exc)))
    still = held(save_file)
    if still is None and os.path.lexists(abort):
        still = f"an abort entry is still waiting: {abort}"
    return Cleared(removed, failed, still)
