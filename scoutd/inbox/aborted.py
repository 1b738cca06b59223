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
* :func:`mark` writes the marker; a marker already there is kept with its
  first reason. It never raises: a marker that cannot be written anywhere is
  logged at error level (the process that consumed the abort still stays
  aborted).
* the consumers mark the chat *before* the abort leaves the inbox (the
  ``before_abort`` of :func:`~scoutd.inbox.pickup.pick_up` and
  :func:`~scoutd.inbox.pickup.claim_abort`, read in place): at every moment
  the entry or the marker exists, so a hook that looks meanwhile aborts;
* nothing marks the chat *after* the abort has left: an operator's
  :func:`clear` in between stands (the marker was written before the move);
* :func:`claim_and_mark` marks the chat and consumes a waiting ``abort``;
  :func:`check` is what a hook asks before each model call: the marker, else a
  waiting abort.

Directories are opened without following a symlink, as everywhere in the
inbox. A marker is as safe as the directory holding it: whoever may delete
entries there can clear it (docs/OPERATIONS.md, "An aborted chat stays
aborted", says who can).
"""

from __future__ import annotations

import contextlib
import logging
import os
from functools import partial
from typing import NamedTuple

from .entries import entry_kind
from .files import WRITE_FLAGS, open_dir, open_regular, place, read_text
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


def _open_parent(path: str) -> int | None:
    """The marker's directory, open without following; None when it is not usable."""
    try:
        return open_dir(os.path.dirname(path))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink or a file in its place, no permission
        log.debug("abort marker directory of %r not usable: %s", path, exc)
        return None


def _read_marker(path: str) -> str | None:
    """The reason the marker at ``path`` gives; None when there is none."""
    try:  # the common case, one system call: no marker
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        pass  # looked at again below, without following its directory
    dfd = _open_parent(path)
    if dfd is None:
        return None
    try:
        name = os.path.basename(path)
        try:
            kind = entry_kind(os.lstat(name, dir_fd=dfd).st_mode)
        except FileNotFoundError:
            return None
        except OSError as exc:  # cannot be examined (no search bit, a name too long):
            # as a directory that cannot be opened; a pickup fails closed on such an inbox
            log.debug("abort marker %r cannot be examined: %s", path, exc)
            return None
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
            text = ""
        return text or f"aborted by operator (abort marker {path})"
    finally:
        os.close(dfd)


def held(save_file: str | os.PathLike[str] | None) -> str | None:
    """The reason ``save_file``'s chat was aborted with, while its marker exists; else None.

    Never raises ``OSError``: a directory that cannot be opened holds no marker
    as far as this caller can tell.
    """
    if save_file is None or not os.fspath(save_file).strip():
        return None
    try:
        paths = marker_paths(save_file)
    except ValueError:  # no file name: no inbox
        return None
    for path in paths:
        reason = _read_marker(path)
        if reason is not None:
            return reason
    return None


def _write(path: str, reason: str) -> str:
    """Write the marker ``path``, or keep the one there; its path. Raises ``OSError``."""
    directory = os.path.dirname(path)
    dfd = open_dir(directory)
    try:
        temp = f".tmp-{os.getpid()}-{os.urandom(8).hex()}"
        fd = os.open(temp, WRITE_FLAGS, 0o666, dir_fd=dfd)
        try:
            try:
                data = memoryview(reason.encode("utf-8", "surrogateescape"))
                while data:
                    data = data[os.write(fd, data) :]
                # Seen first, made durable after: a hook that looks between the
                # abort's consumption and the marker finds it a few writes sooner.
                written = place(temp, directory, [os.path.basename(path)], keep=True, dir_fd=dfd)
                with contextlib.suppress(OSError):  # best effort, as for the directory
                    os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dfd)
        with contextlib.suppress(OSError):  # make the new entry durable (best effort)
            os.fsync(dfd)
    finally:
        os.close(dfd)
    return written


def mark(save_file: str | os.PathLike[str], reason: str) -> str | None:
    """Mark ``save_file``'s chat aborted with ``reason``; the marker's path, or None.

    Beside the chat, else in its inbox; a marker already in either place
    stays as it is (the first reason is kept). None, logged at error level,
    when neither can take it: only the processes that saw the abort stay
    aborted then.
    """
    problems: list[str] = []
    for path in marker_paths(save_file):
        try:
            written = _write(path, reason)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        if problems:
            log.error("abort marker written to %r instead (%s)", written, "; ".join(problems))
        return written
    log.error(
        "the chat of %r is aborted, but no abort marker could be written (%s): a later"
        " run will not know; remove the cause and abort it again",
        os.fspath(save_file),
        "; ".join(problems),
    )
    return None


def claim_and_mark(
    save_file: str, *, max_bytes: int = 1 << 20, complete: bool = False, wait: bool = True
) -> str | None:
    """:func:`~scoutd.inbox.pickup.claim_abort`, the chat marked before the abort leaves."""
    return claim_abort(
        save_file,
        max_bytes=max_bytes,
        complete=complete,
        wait=wait,
        before_abort=partial(mark, save_file),
    )


def check(save_file: str | None, *, max_bytes: int = 1 << 20) -> str | None:
    """Why ``save_file``'s chat is aborted: its marker, else a waiting abort (consumed now)."""
    if save_file is None:
        return None
    return held(save_file) or claim_and_mark(save_file, max_bytes=max_bytes)


class Cleared(NamedTuple):
    """What :func:`clear` did: the entries it removed, those it could not, and
    the reason the chat is still aborted for (None: it is not)."""

    removed: list[str]
    failed: list[tuple[str, str]]
    still: str | None


def _remove(directory: str, name: str) -> bool:
    """Remove entry ``name`` of ``directory``, never following it; False: it was not there.

    Raises ``OSError`` when it is there and cannot be removed (a directory is
    removed only when empty), or when a symlink on the way was made by
    another user than root or the caller (:mod:`scoutd.inbox.walk`: the agent
    cannot point an operator's clear at another agent's chat).
    """
    parent, last = os.path.split(directory)
    try:
        chat = open_directory(parent or ".")
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        dfd = open_dir(last, dir_fd=chat.fd, shown=directory)  # never followed itself
    except FileNotFoundError:
        return False
    finally:
        os.close(chat.fd)
    try:
        try:
            os.unlink(name, dir_fd=dfd)
        except IsADirectoryError:
            os.rmdir(name, dir_fd=dfd)
    except FileNotFoundError:
        return False
    finally:
        os.close(dfd)
    return True


def clear(save_file: str | os.PathLike[str]) -> Cleared:
    """Lift ``save_file``'s abort: remove a waiting ``abort`` entry, then both markers.

    Never follows a symlink; a directory is removed only when empty. ``still``
    says whether the chat is aborted after all (an entry that could not be
    removed, or an abort consumed meanwhile).

    Raises:
        ValueError: ``save_file`` has no file name.
    """
    inbox = inbox_dir(save_file)
    entries = [os.path.join(inbox, ABORT_NAME), *marker_paths(save_file)]
    removed: list[str] = []
    failed: list[tuple[str, str]] = []
    for path in entries:
        try:
            if _remove(os.path.dirname(path), os.path.basename(path)):
                removed.append(path)
                log.info("abort entry %r removed by an operator's clear", path)
        except OSError as exc:
            failed.append((path, exc.strerror or str(exc)))
    still = held(save_file)
    if still is None and os.path.lexists(entries[0]):
        still = f"an abort entry is still waiting: {entries[0]}"
    return Cleared(removed, failed, still)
