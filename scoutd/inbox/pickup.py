"""One pickup of a chat's inbox: list it, take the abort or the notices, never both.

The rule both paths share (the library's ``inbox`` strategy and the daemon,
whose watcher only ever claims aborts): a pickup that finds an ``abort``
takes the abort alone and leaves every notice pending, whatever its name
sorts before or after; the notices reach the model at the first pickup
without an abort (the agent's next run). Without an abort, the notices are
taken in delivery order (:func:`scoutd.inbox.names.delivery_order`) within
the byte budget.

An abort fails closed (docs/RELIABILITY.md, "An abort fails closed"): an inbox
that does not exist holds nothing, but one that exists and cannot be opened,
searched or listed may hold an abort nobody can see, so the pickup raises
:class:`~scoutd.errors.InboxUnusable` (an :class:`~scoutd.errors.Aborted`)
until an operator repairs it; an ``abort`` entry seen but still being
written, or not examinable, raises :class:`~scoutd.errors.AbortNotTaken` (an
``Aborted``) at once with a generic reason and stays in place. So does an
abort the caller could not make durable (``before_abort`` gave None: no marker
could be written, a full disk), with its own reason: consumed, it would stop
this call alone (docs/RELIABILITY.md, "An aborted chat stays aborted"). No
``OSError`` escapes this module, and nothing here sleeps.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Literal, NamedTuple

from ..errors import AbortNotTaken, InboxUnusable
from .claim import BeforeClaim, NotSettled, Taken, take
from .entries import removed_dir_problem
from .files import InboxDirs, lexists
from .gate import Ticket, guarded
from .names import ABORT_NAME, delivery_order, inbox_dir, inbox_removed_dir

__all__ = [
    "BEING_WRITTEN",
    "Pickup",
    "claim_abort",
    "open_inbox",
    "pending_names",
    "pick_up",
    "record_problem",
    "selected",
    "unusable",
]

log = logging.getLogger("scoutd.inbox")


class Pickup(NamedTuple):
    """What one pickup took: notice texts in delivery order, or an abort's reason.

    ``abort`` is set when this pickup claimed an abort; ``notices`` is then
    empty. Both empty: nothing was pending, or another consumer was first.
    """

    notices: list[str]
    abort: str | None = None


def record_problem(save_file: str | os.PathLike[str]) -> str | None:
    """Why consumed files of ``save_file``'s inbox cannot be recorded (None: they can).

    An abort still aborts then (docs/OPERATIONS.md, "Aborting an agent"), but
    its record lands in the inbox under a hidden name, or nowhere.
    """
    return removed_dir_problem(inbox_dir(save_file), inbox_removed_dir(save_file))


# Told the reason of an abort just before it is claimed (see claim.BeforeClaim); gives
# what makes it durable (the marker's path), None when nothing could: it is not claimed.
BeforeAbort = Callable[[str], str | None]


def _reasoned(before: BeforeAbort | None, inbox: str) -> BeforeClaim | None:
    """``before`` told the reason :func:`abort_reason` will give for the text and kind.

    The one rule of every consumer: an abort that ``before`` could not make
    durable is never consumed. The claim raises
    :class:`~scoutd.errors.AbortNotTaken` with its reason, before anything
    moves: it stays in the inbox and aborts every later call, in any process,
    until a marker can be written or an operator clears it.
    """
    if before is None:
        return None
    where = os.path.join(inbox, ABORT_NAME)

    def durable_first(text: str, unread: str | None) -> None:
        reason = abort_reason(Taken(where, text, unread))
        if before(reason) is None:
            log.error(
                "abort file %r left in place, not consumed: it aborts every call until its"
                " marker can be written or an operator clears it",
                where,
            )
            raise AbortNotTaken(reason)

    return durable_first


def abort_reason(taken: Taken) -> str:
    """The reason an abort gives: its text, or a sentence naming what it was."""
    if taken.unread is not None:  # never opened: no text, and no path to render
        return f"aborted by operator (the abort entry is {taken.unread}; not read)"
    return taken.text.strip() or f"aborted by operator (abort file {taken.record})"


# The reasons of an abort seen but not read now: it aborts all the same (fails closed).
BEING_WRITTEN = "aborted by operator (the abort file is still being written; not read yet)"


def unusable(inbox: str, exc: OSError) -> InboxUnusable:
    """The error of an inbox that exists but cannot be used, logged at error level."""
    problem = exc.strerror or str(exc)
    where = exc.filename if isinstance(exc.filename, str) else inbox
    if where != inbox:
        problem = f"{where}: {problem}"
    log.error("inbox %r cannot be used (%s): its chat is not served", inbox, problem)
    return InboxUnusable(inbox, problem)


def open_inbox(save_file: str | os.PathLike[str], *, exact: bool = False) -> InboxDirs | None:
    """The inbox of ``save_file``, open; None when there is none (:meth:`InboxDirs.of`).

    ``exact``: a path the daemon resolved itself, no symlink on it followed.

    Raises:
        InboxUnusable: it exists, or may, but cannot be opened or searched.
    """
    if not os.fspath(save_file).strip():
        return None
    try:
        return InboxDirs.of(save_file, exact=exact)
    except ValueError as exc:
        log.warning("no inbox: %s", exc)
        return None
    except OSError as exc:
        raise unusable(inbox_dir(save_file), exc) from None


def selected(entry: os.DirEntry[str]) -> Literal["abort", "notice"] | None:
    """What a pickup makes of one inbox entry: the abort, a notice, or nothing (None).

    The one selection rule, shared by the pickup and the listing
    (:mod:`scoutd.inbox.listing`): ``abort`` is the abort whatever its type;
    a notice is a regular file (a symlink is not followed) whose name does
    not start with a dot, so hidden files and the writers' ``.tmp-*``
    temporaries are never delivered; directories, FIFOs, sockets and devices
    are left alone. Cheap: the name first, then the type the directory
    listing already gave (an ``lstat`` only where the file system gives none).
    """
    if entry.name == ABORT_NAME:
        return "abort"
    if entry.name.startswith("."):
        return None  # hidden, or a writer's temporary
    regular = entry.is_file(follow_symlinks=False)  # pragma: no mutate (None is false too)
    return "notice" if regular else None


def pending_names(dirs: InboxDirs) -> list[str]:
    """Names of what :func:`selected` takes in an open inbox (notices and ``abort``).

    In delivery order.

    Raises:
        InboxUnusable: the listing failed (it may hide an abort).
    """
    try:
        with os.scandir(dirs.ifd) as entries:
            names = [entry.name for entry in entries if selected(entry) is not None]
    except OSError as exc:
        raise unusable(dirs.inbox, exc) from None
    return sorted(names, key=delivery_order)


def pick_up(
    save_file: str | None,
    *,
    max_bytes: int,
    max_total_bytes: int,
    ticket: Ticket | None = None,
    before_abort: BeforeAbort | None = None,
    exact: bool = False,
) -> Pickup:
    """Take what ``save_file``'s inbox holds for the model (see the module's rule).

    ``max_bytes`` bounds one file (an abort too); ``max_total_bytes`` all the
    notices of this pickup (the rest stays for the next). Without a
    ``save_file`` or an inbox directory nothing is touched or created.
    ``ticket``: the daemon's prepare call this pickup belongs to
    (:mod:`scoutd.inbox.gate`); None in the library. ``before_abort`` is told
    an abort's reason before the abort leaves the inbox (the chat's marker);
    when it gives None, the abort stays (:func:`_reasoned`). ``exact``: the
    daemon's, on a path it resolved itself (:func:`open_inbox`).

    Raises:
        InboxUnusable: the inbox exists but cannot be opened, searched or listed.
        AbortNotTaken: an ``abort`` still being written, or one that cannot be
            examined, or one ``before_abort`` could not make durable (none is
            consumed: see :func:`_take_abort`); in a
            daemon's prepare call, one its watcher took since the call began
            (:class:`~scoutd.errors.StillAborted`, :mod:`scoutd.inbox.gate`).
    """
    dirs = open_inbox(save_file, exact=exact) if save_file is not None else None
    if dirs is None:
        return Pickup([])
    try:
        with guarded(dirs.inbox, ticket):  # in the daemon: one consumer at a time (gate module)
            names = pending_names(dirs)
            if ABORT_NAME in names:
                return Pickup([], _take_abort(dirs, max_bytes, before_abort))
            return Pickup(_take_notices(dirs, names, max_bytes, max_total_bytes))
    finally:
        dirs.close()


def _take_abort(dirs: InboxDirs, max_bytes: int, before: BeforeAbort | None) -> str | None:
    """The reason of the abort this pickup took; None only when another consumer took it.

    Raises:
        AbortNotTaken: an abort still being written, or one that cannot be examined:
            it aborts at once, with a generic reason, and stays in place (not
            consumed: its reason comes with the consumer that takes it); one
            ``before`` could not make durable, with its reason, stays too.
    """
    try:
        taken = take(dirs, ABORT_NAME, max_bytes, before_claim=_reasoned(before, dirs.inbox))
    except NotSettled:
        log.info("abort file in %r is still being written: aborting, not read yet", dirs.inbox)
        raise AbortNotTaken(BEING_WRITTEN) from None
    except OSError as exc:
        raise _unexamined(dirs.inbox, exc) from None
    return None if taken is None else abort_reason(taken)


def _unexamined(inbox: str, exc: OSError) -> AbortNotTaken:
    """The abort of an entry that cannot be examined: generic, and logged at error level."""
    log.error("abort entry in %r cannot be examined (it aborts all the same): %s", inbox, exc)
    return AbortNotTaken(
        f"aborted by operator (the abort entry could not be examined: {exc.strerror or exc})"
    )


def _take_notices(dirs: InboxDirs, names: list[str], max_bytes: int, budget: int) -> list[str]:
    """Take ``names`` in order within ``budget``; stop at once when an ``abort`` arrives.

    An abort dropped meanwhile leaves the rest pending, as one found by the
    listing would: the notices taken are delivered, the abort goes to the
    next pickup, and a claim waiting for this pickup (the daemon's watcher,
    :mod:`scoutd.inbox.gate`) waits one take, not for thousands of empty
    notices (they cost no bytes of the budget).
    """
    notices: list[str] = []
    for name in names:
        if budget <= 0 or _abort_arrived(dirs):
            break  # the rest stays for the next pickup
        try:
            taken = take(dirs, name, min(max_bytes, budget))
        except OSError as exc:
            log.warning("inbox file %r left in place: %s", os.path.join(dirs.inbox, name), exc)
            continue
        if taken is not None:
            notices.append(taken.text)
            size = len(taken.text.encode("utf-8"))
            log.info("notice %r delivered (%d bytes), recorded as %r", name, size, taken.record)
            budget -= size
    return notices


def _abort_arrived(dirs: InboxDirs) -> bool:
    """Whether an ``abort`` is in the inbox now; True when that cannot be told."""
    try:
        return lexists(ABORT_NAME, dirs.ifd)
    except OSError:
        return True  # stop taking: the next pickup looks again, and fails closed


def claim_abort(
    save_file: str,
    *,
    max_bytes: int = 1 << 20,
    complete: bool = False,
    wait: bool = True,
    before_abort: BeforeAbort | None = None,
    exact: bool = False,
) -> str | None:
    """Consume only the ``abort`` entry of ``save_file``'s inbox; return its reason.

    None when there is no abort entry or another party consumed it first. An
    abort that cannot be moved still returns its reason (it fails closed); one
    that is not a regular file, or cannot be examined, returns a generic
    reason, unread. ``complete``: the caller saw its writer close it or
    rename it in. An abort still being written is waited for in this thread
    (at most :data:`~scoutd.inbox.claim.MAX_SETTLE_WAIT`), or with
    ``wait=False`` raises :class:`~scoutd.inbox.claim.NotSettled` (the
    daemon retries from its event loop). Never raises ``OSError``.
    ``before_abort``, ``exact``: as for :func:`pick_up`.

    Raises:
        InboxUnusable: the inbox exists but cannot be opened or searched.
        AbortNotTaken: the ``abort`` entry cannot be examined, or
            ``before_abort`` could not make it durable (not consumed).
    """
    dirs = open_inbox(save_file, exact=exact)
    if dirs is None:
        return None
    try:
        taken = take(
            dirs,
            ABORT_NAME,
            max_bytes,
            complete=complete,
            wait=wait,
            before_claim=_reasoned(before_abort, dirs.inbox),
        )
    except OSError as exc:
        raise _unexamined(dirs.inbox, exc) from None
    finally:
        dirs.close()
    return None if taken is None else abort_reason(taken)
