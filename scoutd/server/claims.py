"""The daemon's abort claims, as they run in threads of their own (docs/RELIABILITY.md).

A claim looks at one watched inbox for the sessions open on it, in one
worker-thread hop, and says what the registry must do
(:class:`~scoutd.server.sessions.SessionRegistry`):

* *fail closed*: an inbox that exists but cannot be used
  (:class:`~scoutd.errors.InboxUnusable`), or an ``abort`` entry that cannot
  be examined, aborts every session of that inbox, unconsumed;
* *act only as the caller could*: the daemon may have more rights than a
  session's uid. An abort is taken only for the sessions whose uid could take
  it itself (:func:`~scoutd.security.may_take_abort`: the access rights, and
  the sticky bit), and pushed only to them; when none could, it is left for
  its owner (an agent in its own process, another session) and nothing reads
  it;
* *no hiding from it*: a session whose uid could not take the abort only for
  the mode bits of directories it owns (an agent that ran ``chmod 0070`` on
  its own inbox) could give itself those rights back at any time: the abort
  is left in place, unread, but that session is aborted all the same (fails
  closed, :func:`hidden_from`);
* otherwise the abort is claimed (moved, read, recorded) and pushed;
* *the resolved path, exactly*: a claim works on the path the session's open
  resolved (``allowed_roots``), which held no symlink; one found there later,
  root's too, was swapped in, and the inbox counts as unusable (``exact=True``,
  :mod:`scoutd.inbox.walk`): the sessions fail closed, nothing is read through it.

Claims never run on the prepare pool: the registry gives each uid a small
limiter of its own, so an abort never waits behind prepare calls, and one
user's slow inboxes never hold up another user's aborts. Nothing here sleeps.
"""

from __future__ import annotations

import errno
import logging
import os
import pwd
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import anyio

from ..errors import Aborted, InboxUnusable
from ..inbox import ABORT_NAME
from ..inbox.aborted import held
from ..inbox.files import lexists
from ..inbox.gate import InboxGate
from ..inbox.names import inbox_dir
from ..inbox.pickup import open_inbox
from ..paths import display_path
from ..security import groups_of, may_take_abort

__all__ = [
    "Candidate",
    "ClaimFunction",
    "Claimed",
    "RunningClaim",
    "claim_for",
    "hidden_from",
    "holding_abort",
    "marked",
]

log = logging.getLogger("scoutd.sessions")

# claim_abort's signature: (save_file, *, max_bytes, complete, wait, exact) -> reason or None
ClaimFunction = Callable[..., str | None]


class Candidate(NamedTuple):
    """A session open on the inbox: its id, and the uid, gid and groups that opened it."""

    id: str
    uid: int
    gid: int | None
    groups: frozenset[int] | None = None  # the process's own (SO_PEERGROUPS); None: unknown


class Claimed(NamedTuple):
    """What a claim found: ``reason`` None means nothing to do.

    ``sessions``: the sessions to abort and push to. ``consumed``: an abort
    entry was taken (an abort to count, and to report to the inbox's next
    session-less call); otherwise the claim failed closed and took nothing.
    ``hidden``: sessions whose uid locked itself out of the waiting abort; they
    fail closed with :func:`hidden_from`'s reason, whatever else happened.
    """

    reason: str | None = None
    sessions: tuple[str, ...] = ()
    consumed: bool = False
    hidden: tuple[str, ...] = ()


@dataclass(slots=True)
class RunningClaim:
    """A claim of one inbox's abort running now (the registry's, on the event loop)."""

    again: bool = False  # another claim was asked for meanwhile: run once more after
    done: anyio.Event = field(default_factory=anyio.Event)  # set when the claim ends


def _gid(candidate: Candidate) -> int:
    """The candidate's gid: the peer's, else its user's primary group."""
    if candidate.gid is not None:
        return candidate.gid
    try:
        return pwd.getpwuid(candidate.uid).pw_gid
    except KeyError:
        return candidate.uid


def _could_take(save_file: str, candidate: Candidate, own_uid: int) -> bool:
    """Whether ``candidate``'s uid could take the waiting abort itself."""
    if candidate.uid in (0, own_uid):
        return True  # the kernel checks the daemon's own rights, which are the caller's
    return may_take_abort(save_file, candidate.uid, _gid(candidate), candidate.groups)


def _grants(st: os.stat_result, groups: frozenset[int], want: int) -> bool:
    """Whether the group or other bits grant ``want`` to a user who does not own the entry."""
    bits = (st.st_mode >> 3) & 7 if st.st_gid in groups else st.st_mode & 7
    return bits & want == want


def _hid_it(save_file: str, candidate: Candidate) -> bool:
    """Whether ``candidate``'s uid is kept from the waiting abort only by its own directories.

    Asked when :func:`_could_take` said no. A directory's owner may change its
    mode bits at any time (``chmod``), so the rights it took from itself on its
    own inbox, chat directory or ancestors do not make the abort any less its
    own: the same checks as :func:`~scoutd.security.may_take_abort`, with every
    directory of that uid passing. False when anything else refuses it (another
    user's directory, a sticky inbox of another user) or cannot be examined.
    """
    uid = candidate.uid
    gid = _gid(candidate)
    groups = groups_of(uid, gid) if candidate.groups is None else candidate.groups | {gid}
    chat = os.path.dirname(save_file)
    inbox = inbox_dir(save_file)
    rwx = os.R_OK | os.W_OK | os.X_OK
    checks = [(chat, rwx), (inbox, rwx)]  # after every ancestor: the inbox is checked last
    parent = chat
    while (up := os.path.dirname(parent)) != parent:
        checks.insert(0, (up, os.X_OK))
        parent = up
    for path, want in checks:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
        if st.st_uid != uid and not _grants(st, groups, want):
            return False
    if st.st_mode & stat.S_ISVTX == 0 or st.st_uid == uid:  # st: the inbox's
        return True
    try:  # another user's sticky inbox: only an abort of its own is for it (the kernel's rule)
        return os.lstat(os.path.join(inbox, ABORT_NAME)).st_uid == uid
    except OSError:
        return False


def hidden_from(inbox: str) -> str:
    """The reason a session gets whose uid locked itself out of ``inbox``'s abort."""
    return (
        f"aborted by operator (an abort waits in {display_path(inbox)!r}, which this"
        " session's user has made unusable for itself; not read)"
    )


def claim_for(
    claim: ClaimFunction,
    gate: InboxGate,
    save_file: str,
    candidates: Sequence[Candidate],
    own_uid: int,
    *,
    max_bytes: int,
    complete: bool,
) -> Claimed:
    """Look at ``save_file``'s inbox for ``candidates`` and claim its abort if one may.

    ``claim`` is :func:`~scoutd.inbox.pickup.claim_abort` or a wrapper of it,
    called with ``wait=False`` and ``exact=True`` (``save_file`` is the
    session's resolved path), holding the inbox in ``gate`` (a prepare
    call's pickup of it waits meanwhile, and learns of the take). Raises
    :class:`~scoutd.inbox.claim.NotSettled` for an abort still being written
    (the registry retries from its event loop).
    """
    everyone = tuple(candidate.id for candidate in candidates)
    try:
        dirs = open_inbox(save_file, exact=True)
        if dirs is None:
            return Claimed()
        inbox = dirs.inbox
        try:
            present = lexists(ABORT_NAME, dirs.ifd)
        finally:
            dirs.close()
        if not present:
            return Claimed()
        allowed = tuple(c.id for c in candidates if _could_take(save_file, c, own_uid))
        hidden = tuple(c.id for c in candidates if c.id not in allowed and _hid_it(save_file, c))
        if not allowed:  # left in place, unread; those who hid it fail closed (logged there)
            log.debug("abort in %r left for its owner: no session here may take it", inbox)
            return Claimed(hidden=hidden)
        with gate.holding(inbox):
            reason = claim(
                save_file, max_bytes=max_bytes, complete=complete, wait=False, exact=True
            )
            if reason is not None:
                gate.record(inbox, reason)
    except InboxUnusable as exc:
        return Claimed(exc.reason, everyone)
    except Aborted as exc:  # an abort entry that cannot be examined: not taken
        return Claimed(exc.reason, everyone)
    except OSError as exc:  # the abort entry could not be looked at: it may be there
        log.error("abort entry of %r cannot be examined (aborting): %s", save_file, exc)
        return Claimed(
            f"aborted by operator (the abort entry could not be examined: {exc})", everyone
        )
    if reason is None:
        return Claimed()
    return Claimed(reason, allowed, consumed=True, hidden=hidden)


def marked(resolved: str) -> str | None:
    """The reason the chat of the session's ``resolved`` save file is aborted for
    (its marker), else None: :func:`~scoutd.inbox.aborted.held` on the path exactly."""
    return held(resolved, exact=True)


def holding_abort(inboxes: Sequence[str]) -> list[str]:
    """The inboxes a rescan must claim: an ``abort`` entry there, or no way to tell.

    ``lstat`` only. An entry of any type counts (the claim decides); so does
    an inbox where the look failed for any reason but absence (no
    permission, a symlink loop, a file in its place): the claim fails closed
    there.
    """
    found = []
    for inbox in inboxes:
        try:
            os.lstat(os.path.join(inbox, ABORT_NAME))
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and not os.path.lexists(inbox):
                continue  # a parent is not a directory: no inbox at all
        found.append(inbox)
    return found
