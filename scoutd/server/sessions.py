"""Agent sessions and the abort push (docs/PROTOCOL.md, sessions).

A session ties a running agent (its save file, pid and connection) to the
inbox beside its save file. The registry watches the inbox's *parent*
directory and the inbox itself; the watcher anchors whichever does not exist
yet to its nearest existing ancestor, so an abort is seen at once even in a
chat directory created after ``session.open``. When an ``abort`` entry (of any
type: a directory or FIFO aborts too, unread) shows up, the registry claims
it with :func:`scoutd.strategies.inbox.claim_abort` in a worker thread — the
move is the claim, so exactly one party (this watcher or an inference's
``inbox`` strategy) consumes each abort entry — then marks the
sessions of that inbox aborted and pushes ``session.aborted`` to their
connections at once. An abort that cannot be moved still aborts (it fails
closed, see :mod:`scoutd.strategies.inbox_files`); one that cannot be moved at
all stays in place and is pushed again at every event or rescan until an operator
removes it.

Each uid may hold at most ``max_sessions_per_uid`` sessions (docs/OPERATIONS.md):
a client decides how many directories are watched, so it must not decide alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import anyio

from .. import protocol
from ..delta import DeltaEncoder
from ..incremental import SessionPrompt
from ..security import process_owned_by
from ..strategies import inbox_files
from ..strategies.inbox import ABORT_NAME, claim_abort, inbox_dir
from ..watcher import Batch, FsWatcher

__all__ = [
    "DEFAULT_MAX_SESSIONS_PER_UID",
    "MAX_PENDING_ABORTS",
    "AgentSession",
    "SessionOwner",
    "SessionRegistry",
    "parse_signal",
]

log = logging.getLogger("scoutd.sessions")

# Aborts claimed for inboxes whose next session-less prepare_prompt has not come yet.
# Bounded so that abandoned save files cannot grow the daemon's memory.
MAX_PENDING_ABORTS = 4096
# Used when the registry is built without a limit (the daemon passes its config's).
DEFAULT_MAX_SESSIONS_PER_UID = 10_000


class SessionOwner(Protocol):
    """The connection a session belongs to."""

    def push(self, line: bytes) -> None:
        """Queue ``line`` for sending without waiting."""


@dataclass(eq=False, slots=True)
class AgentSession:
    id: str
    save_file: str  # as given by the client
    resolved: str  # directory resolved: what the daemon works on
    inbox: str
    pid: int | None
    uid: int
    owner: SessionOwner
    aborted: str | None = None
    watched: list[str] = field(default_factory=list)
    # incremental prompt state (docs/PROTOCOL.md, incremental sessions)
    prompt: SessionPrompt = field(default_factory=SessionPrompt)
    encoder: DeltaEncoder = field(default_factory=DeltaEncoder)
    # the notices of the last answer, delivered again if its client did not use it
    delivered: tuple[str, ...] = ()
    # one prepare at a time; taken without a turn of the event loop when free
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    last_used: float = field(default_factory=time.monotonic)

    def forget_conversation(self) -> None:
        """Drop the stored conversation; the client sends it whole next time."""
        self.prompt, self.encoder = SessionPrompt(), DeltaEncoder()


def parse_signal(name: str | None) -> signal.Signals | None:
    """``"TERM"``, ``"SIGTERM"`` or ``"15"`` -> ``SIGTERM``; None stays None.

    Raises ValueError for a name that is not a signal.
    """
    if name is None or not name.strip():
        return None
    text = name.strip().upper()
    try:
        return (
            signal.Signals(int(text))
            if text.isdigit()
            else signal.Signals[text if text.startswith("SIG") else "SIG" + text]
        )
    except (KeyError, ValueError):
        raise ValueError(f"abort_signal {name!r} is not a signal name") from None


def _holding_abort(inboxes: list[str]) -> list[str]:
    """The inboxes with an entry named ``abort`` (any type: the claim decides)."""
    return [inbox for inbox in inboxes if os.path.lexists(os.path.join(inbox, ABORT_NAME))]


@dataclass(slots=True)
class _Claim:
    """A claim of one inbox's abort running now."""

    again: bool = False  # another claim was asked for meanwhile: run once more after
    done: anyio.Event = field(default_factory=anyio.Event)  # set when the claim ends


class SessionRegistry:
    """Open sessions, their inbox watches and the aborts claimed for them.

    All methods run on the event loop; filesystem work goes to worker threads.

    Resource handling: :meth:`run` consumes the watcher's batches and runs the
    periodic rescan until cancelled; watches are reference-counted per
    directory and dropped with the last session that needs them.
    Error handling: a failing claim is logged and retried at the next event or
    rescan; it never ends :meth:`run`.
    """

    def __init__(
        self,
        watcher: FsWatcher,
        *,
        inbox_max_bytes: Callable[[], int],
        abort_signal: Callable[[], signal.Signals | None],
        limiter: anyio.CapacityLimiter | None = None,
        max_sessions_per_uid: Callable[[], int] = lambda: DEFAULT_MAX_SESSIONS_PER_UID,
    ) -> None:
        self.watcher = watcher
        self.sessions: dict[str, AgentSession] = {}
        self.by_inbox: dict[str, set[str]] = {}
        self.aborts = 0
        self.rescans = 0  # periodic rescans completed since start (shown by status)
        self._pending: OrderedDict[str, str] = OrderedDict()  # inbox -> reason
        self._claiming: dict[str, _Claim] = {}  # inbox -> its claim running now
        self._preparing: dict[str, int] = {}  # inbox -> prepare calls reading it now
        self._deferred: set[str] = set()  # inboxes whose claim waits for those calls
        self._complete: set[str] = set()  # inboxes whose abort was seen closed or renamed in
        self._unsettled: dict[str, float] = {}  # inbox -> when its abort was first seen changing
        self._per_uid: dict[int, int] = {}
        self._max_per_uid = max_sessions_per_uid
        self._inbox_max_bytes = inbox_max_bytes
        self._abort_signal = abort_signal
        self._limiter = limiter
        self._tg: anyio.abc.TaskGroup | None = None

    # --- sessions --------------------------------------------------------------------

    async def open(
        self,
        save_file: str,
        resolved: str,
        pid: int | None,
        uid: int,
        owner: SessionOwner,
        *,
        request_id: protocol.RequestId = None,
    ) -> AgentSession:
        """Register a session and watch its inbox (and the inbox's parent).

        Raises:
            protocol.ProtocolError: ``TOO_LARGE``: ``uid`` holds
                ``max_sessions_per_uid`` sessions already.
        """
        limit = self._max_per_uid()
        if self._per_uid.get(uid, 0) >= limit:
            raise protocol.ProtocolError(
                protocol.TOO_LARGE,
                f"too many sessions for uid {uid} (max_sessions_per_uid = {limit})",
                protocol.TooLargeData(limit=limit),
                id=request_id,
            )
        inbox = inbox_dir(resolved)
        session = AgentSession(
            id=secrets.token_hex(16),
            save_file=save_file,
            resolved=resolved,
            inbox=inbox,
            pid=pid,
            uid=uid,
            owner=owner,
        )
        self.sessions[session.id] = session
        self._per_uid[uid] = self._per_uid.get(uid, 0) + 1
        first = inbox not in self.by_inbox
        self.by_inbox.setdefault(inbox, set()).add(session.id)
        if first:
            for directory in (os.path.dirname(inbox), inbox):
                await self.watcher.add(directory)
            self._spawn_claim(inbox)  # an abort may already be waiting
        log.info("session %s opened for %s (pid %s, uid %d)", session.id, resolved, pid, uid)
        return session

    async def close(self, session_id: str) -> bool:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        left = self._per_uid.get(session.uid, 1) - 1
        if left > 0:
            self._per_uid[session.uid] = left
        else:
            self._per_uid.pop(session.uid, None)
        ids = self.by_inbox.get(session.inbox)
        if ids is not None:
            ids.discard(session_id)
            if not ids:
                del self.by_inbox[session.inbox]
                self._complete.discard(session.inbox)
                self._unsettled.pop(session.inbox, None)
                for directory in (os.path.dirname(session.inbox), session.inbox):
                    await self.watcher.remove(directory)
        log.info("session %s closed", session_id)
        return True

    async def close_owner(self, owner: SessionOwner) -> None:
        """Close every session of a connection that went away."""
        for session in [s for s in self.sessions.values() if s.owner is owner]:
            await self.close(session.id)

    def get(self, session_id: str, uid: int, own_uid: int) -> AgentSession | None:
        """The session, if the peer's uid registered it (or is the daemon's own)."""
        session = self.sessions.get(session_id)
        if session is None or uid not in (session.uid, own_uid):
            return None
        return session

    def forget_idle(self, idle_timeout: float) -> int:
        """Drop the stored conversation of sessions unused for ``idle_timeout`` seconds.

        The session itself (and its abort watch) lives as long as its
        connection; only the memory of its conversation is given back.
        """
        limit = time.monotonic() - idle_timeout
        forgotten = 0
        for session in self.sessions.values():
            if session.last_used < limit and session.prompt.messages and not session.lock.locked():
                session.forget_conversation()
                forgotten += 1
        if forgotten:
            log.info("dropped the stored conversation of %d idle session(s)", forgotten)
        return forgotten

    def count_owned(self, owner: SessionOwner) -> int:
        return sum(1 for s in self.sessions.values() if s.owner is owner)

    # --- aborts ----------------------------------------------------------------------

    def pending_abort(self, session: AgentSession | None, inbox: str | None) -> str | None:
        """The abort a ``prepare_prompt`` must fail with, if any.

        A session, once aborted, stays aborted. For a call without a session,
        an abort claimed by the watcher is reported once, then forgotten.
        """
        if session is not None and session.aborted is not None:
            return session.aborted
        if session is None and inbox is not None:
            return self._pending.pop(inbox, None)
        return None

    def abort(self, inbox: str, reason: str, *, claimed_by_watcher: bool) -> None:
        """Record a consumed abort file: mark, notify and maybe signal its sessions."""
        self.aborts += 1
        if claimed_by_watcher:
            self._pending[inbox] = reason
            self._pending.move_to_end(inbox)
            while len(self._pending) > MAX_PENDING_ABORTS:
                self._pending.popitem(last=False)
        signum = self._abort_signal()
        ids = sorted(self.by_inbox.get(inbox, ()))
        # One line per abort; repr() keeps a reason with line breaks on one line.
        log.info("abort consumed for %r (%d session(s)): %r", inbox, len(ids), reason)
        for session_id in ids:
            session = self.sessions[session_id]
            session.aborted = reason
            params = protocol.SessionAbortedParams(
                session=session.id, save_file=session.save_file, reason=reason
            )
            session.owner.push(protocol.encode_notification("session.aborted", params))
            if signum is not None and session.pid is not None:
                self._signal(session, signum)

    def _signal(self, session: AgentSession, signum: signal.Signals) -> None:
        assert session.pid is not None
        if not process_owned_by(session.pid, session.uid):
            log.warning(
                "not signalling pid %d of session %s: not a process of uid %d",
                session.pid,
                session.id,
                session.uid,
            )
            return
        try:
            os.kill(session.pid, signum)
            log.info("sent %s to pid %d (session %s)", signum.name, session.pid, session.id)
        except OSError as exc:
            log.warning("cannot signal pid %d: %s", session.pid, exc)

    def _spawn_claim(self, inbox: str) -> None:
        if self._tg is not None:
            self._tg.start_soon(self.claim, inbox)

    def _settle_expired(self, inbox: str) -> bool:
        """An abort still changing after MAX_SETTLE_WAIT is taken as it is (fail closed)."""
        first = self._unsettled.get(inbox)
        return first is not None and time.monotonic() - first >= inbox_files.MAX_SETTLE_WAIT

    async def _claim_settled(self, inbox: str) -> None:
        """Claim again after the settle time (a close or rename event may come first)."""
        await anyio.sleep(inbox_files.SETTLE_TIME)
        await self.claim(inbox)

    @contextlib.asynccontextmanager
    async def preparing(self, inbox: str | None) -> AsyncIterator[None]:
        """Hold off the watcher's claims of ``inbox`` while a prepare call reads it.

        Without this, the watcher could move an ``abort`` away while the call's
        ``inbox`` strategy lists the inbox: the call would answer with a prompt
        although the abort was there before it started. Inside this block only
        the call takes the abort (and fails with it); a claim asked for
        meanwhile runs when the last such call ends.
        """
        if inbox is None:
            yield
            return
        while (running := self._claiming.get(inbox)) is not None:
            await running.done.wait()  # a claim in flight decides first: its abort is pending after
        self._preparing[inbox] = self._preparing.get(inbox, 0) + 1
        try:
            yield
        finally:
            self._preparing[inbox] -= 1
            if not self._preparing[inbox]:
                del self._preparing[inbox]
                if inbox in self._deferred:
                    self._deferred.discard(inbox)
                    self._spawn_claim(inbox)

    async def claim(self, inbox: str) -> None:
        """Try to consume the inbox's abort file; serialised per inbox.

        A request arriving while a claim runs is folded into one more attempt
        after it, so a burst of events costs at most two claims. While a
        prepare call reads the inbox (:meth:`preparing`), the claim waits for it.
        """
        if inbox in self._preparing:
            self._deferred.add(inbox)
            return
        if inbox in self._claiming:
            self._claiming[inbox].again = True
            return
        claim = self._claiming[inbox] = _Claim()
        try:
            while inbox in self.by_inbox:
                save_file = self.sessions[next(iter(self.by_inbox[inbox]))].resolved
                complete = inbox in self._complete or self._settle_expired(inbox)
                self._complete.discard(inbox)
                try:
                    reason = await anyio.to_thread.run_sync(
                        partial(
                            claim_abort,
                            save_file,
                            max_bytes=self._inbox_max_bytes(),
                            complete=complete,
                            wait=False,
                        ),
                        limiter=self._limiter,
                    )
                except inbox_files.NotSettled:
                    # never sleep in a worker thread: retry from the loop, so that a
                    # close or rename event meanwhile claims at once
                    self._unsettled.setdefault(inbox, time.monotonic())
                    if self._tg is not None:
                        self._tg.start_soon(self._claim_settled, inbox)
                    reason = None
                except Exception:
                    log.exception("claiming the abort file of %s failed", inbox)
                    reason = None
                else:  # taken, or gone: a later abort starts its settle time afresh
                    self._unsettled.pop(inbox, None)
                if reason is not None:
                    self.abort(inbox, reason, claimed_by_watcher=True)
                if not claim.again:
                    break
                claim.again = False
        finally:
            del self._claiming[inbox]
            claim.done.set()

    # --- watching --------------------------------------------------------------------

    async def handle_batch(self, batch: Batch) -> None:
        """Route changed paths to the inboxes they concern."""
        if batch.overflow:
            log.warning("file events were lost; rechecking every watched inbox")
            await self.rescan()
            return
        for path in batch.paths:
            if path in self.by_inbox:  # the inbox itself appeared, moved or went (re-armed)
                self._spawn_claim(path)
                continue
            parent, name = os.path.split(path)
            if name == ABORT_NAME and parent in self.by_inbox:
                if path in batch.complete:  # closed by its writer or renamed in: no settle wait
                    self._complete.add(parent)
                    self._spawn_claim(parent)
                else:  # maybe still being written: the claim finds out
                    self._spawn_claim(parent)

    async def rescan(self) -> None:
        """Re-arm dead watches and claim the abort files that are waiting.

        Also restarts the watcher's inotify thread if it died or could not
        start. Two worker-thread calls in all, whatever the number of sessions: one
        re-arms the watches, one looks for an ``abort`` entry in every inbox.
        Only the inboxes that hold one get a claim (a thread round trip each):
        at 10,000 sessions, a claim attempt per inbox made the idle daemon spend
        most of a core on each rescan.
        """
        inboxes = list(self.by_inbox)
        directories = {d for inbox in inboxes for d in (os.path.dirname(inbox), inbox)}
        await self.watcher.ensure_all(sorted(directories))
        waiting = await anyio.to_thread.run_sync(_holding_abort, inboxes, limiter=self._limiter)
        for inbox in waiting:
            self._spawn_claim(inbox)

    async def run(
        self,
        rescan_interval: Callable[[], float],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Host the claim tasks and run the periodic rescan until cancelled.

        File events are fed in by the owner of the watcher (:meth:`handle_batch`).
        """
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                while True:
                    await anyio.sleep(rescan_interval())
                    try:
                        await self.rescan()
                    except Exception:
                        log.exception("rescan of watched inboxes failed")
                    self.rescans += 1
            finally:
                self._tg = None
