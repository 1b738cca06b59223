"""Agent sessions and the abort push (docs/PROTOCOL.md, sessions).

A session ties a running agent (its save file, pid and connection) to the
inbox beside its save file. The registry watches the inbox's *parent*
directory and the inbox itself; the watcher anchors whichever does not exist
yet to its nearest existing ancestor, so an abort is seen at once even in a
chat directory created after ``session.open``. When an ``abort`` entry (of any
type: a directory or FIFO aborts too, unread) shows up, the registry claims
it with :func:`scoutd.inbox.aborted.claim_and_mark` in a worker thread — the
move is the claim, so exactly one party (this watcher or an inference's
``inbox`` strategy) consumes each abort entry — then marks the sessions of that
inbox aborted and pushes ``session.aborted`` to their connections at once; the
claim marks the chat aborted for good, and a session opened on a chat so marked
(or while the claim ran) is aborted at once (:mod:`scoutd.inbox.aborted`), told
once of each abort. An abort that cannot be moved still aborts (it fails closed,
:mod:`scoutd.inbox.claim`); one that cannot be moved at all stays in place and
is pushed again at every event, open or rescan until an operator removes it.

Aborts never wait behind prepare calls (docs/RELIABILITY.md, "An abort fails
closed"): claims run on a small thread limiter per uid, never on the prepare
pool, and nothing in them sleeps; a prepare call never holds a claim off (the
call's pickup and the claim race for the abort by rename, exactly one takes
it). A claim takes an abort only for the sessions whose uid could take it
itself and pushes it only to them; an inbox that cannot be used, or that a
session's user locked itself out of, aborts them unconsumed (claims.py).

Each uid may hold at most ``max_sessions_per_uid`` sessions (docs/OPERATIONS.md):
a client decides how many directories are watched, so it must not decide alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import anyio

from .. import protocol
from ..delta import DeltaEncoder
from ..engine.incremental import SessionPrompt
from ..inbox import claim as inbox_claim
from ..inbox.aborted import claim_and_mark
from ..inbox.gate import InboxGate, Ticket
from ..inbox.names import ABORT_NAME, inbox_dir
from ..security import PeerCred
from ..watcher import Batch, FsWatcher
from .abort_signal import parse_signal, send_abort_signal
from .claims import Candidate, Claimed, RunningClaim, claim_for, hidden_from, holding_abort, marked
from .daemon_config import Snapshot
from .pending import MAX_PENDING_ABORTS, PendingAborts

__all__ = [
    "ABORT_THREADS_PER_UID",
    "MAX_PENDING_ABORTS",
    "AgentSession",
    "SessionOwner",
    "SessionRegistry",
    "parse_signal",
]

log = logging.getLogger("scoutd.sessions")

# Abort claims of one uid running at once, in threads of their own (never the prepare
# pool): one user's slow inboxes hold up only that user's claims.
ABORT_THREADS_PER_UID = 2


class SessionOwner(Protocol):
    """The connection a session belongs to."""

    peer: PeerCred  # who opened it: the uid and gid a claim acts for

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
    gid: int | None = None  # the peer's, as the kernel gave it
    aborted: str | None = None
    label: str | None = None  # the client's name for it (a fleet's session=LABEL)
    watched: list[str] = field(default_factory=list)
    # incremental prompt state (docs/PROTOCOL.md, incremental sessions)
    prompt: SessionPrompt = field(default_factory=SessionPrompt)
    encoder: DeltaEncoder = field(default_factory=DeltaEncoder)
    shown: Sequence[Any] = ()  # the last prompt answered, whole or not: what search passes over
    shown_format: str | None = None  # the format it was made in (None: the session's)
    delivered: tuple[str, ...] = ()  # the last answer's notices, again if it went unused
    # one prepare at a time; taken without a turn of the event loop when free
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False  # by SessionRegistry.close: rounds waiting for it get -32006
    forgotten: bool = False  # its conversation was dropped (idle): only `messages` sets it again

    def forget_conversation(self) -> None:
        """Drop the conversation, not its format: ``append`` is refused until ``messages``."""
        self.prompt = SessionPrompt(format=self.prompt.format)
        self.encoder, self.shown, self.forgotten = DeltaEncoder(), (), True


class SessionRegistry:
    """Open sessions, their inbox watches and the aborts claimed for them.

    All methods run on the event loop; filesystem work goes to worker threads.

    Resource handling: :meth:`run` consumes the watcher's batches and runs the
    periodic rescan until cancelled; watches are reference-counted per
    directory and dropped with the last session that needs them.
    Error handling: a failing claim is logged and retried at the next event or
    rescan; it never ends :meth:`run`. ``released`` is called with a session's id
    wherever its conversation is dropped (closed, or forgotten while idle).
    """

    def __init__(
        self,
        watcher: FsWatcher,
        snapshot: Callable[[], Snapshot],
        *,
        released: Callable[[str], None],
    ) -> None:
        self.watcher = watcher
        self.sessions: dict[str, AgentSession] = {}
        self.by_inbox: dict[str, set[str]] = {}
        self.aborts = 0
        self.rescans = 0  # periodic rescans completed since start (shown by status)
        self._pending = PendingAborts()  # for the inboxes' next session-less calls
        self._claiming: dict[str, RunningClaim] = {}  # inbox -> its claim running now
        self._claim_limiters: dict[int, anyio.CapacityLimiter] = {}  # uid -> its claims' threads
        self._rescan_limiter = anyio.CapacityLimiter(1)  # the rescan's look: never the prepare pool
        self._chat_dirs: dict[str, int] = {}  # the inboxes' directories -> how many inboxes
        self._own_uid = os.getuid()
        self._gate = InboxGate()  # claims and prepare pickups of one inbox, one at a time
        self._complete: set[str] = set()  # inboxes whose abort was seen closed or renamed in
        self._unsettled: dict[str, float] = {}  # inbox -> when its abort was first seen changing
        self._per_uid: dict[int, int] = {}
        self._snapshot = snapshot  # the configuration generation now: its limits and signal
        self._released = released  # the memory a session's conversation held: given back
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
        label: str | None = None,
        request_id: protocol.RequestId = None,
    ) -> AgentSession:
        """Register a session whole (a heartbeat may list it), and watch its inbox and its parent.

        Raises:
            protocol.ProtocolError: ``TOO_LARGE``: ``uid`` holds ``max_sessions_per_uid`` already;
                ``FORBIDDEN``: the generation in force refuses it (a reload since its check).
        """
        self._snapshot().admit(owner.peer, self._own_uid, resolved, request_id)
        limit = self._snapshot().config.daemon.max_sessions_per_uid
        if self._per_uid.get(uid, 0) >= limit:
            raise protocol.ProtocolError(
                protocol.TOO_LARGE,
                f"too many sessions for uid {uid} (max_sessions_per_uid = {limit})",
                protocol.TooLargeData(limit=limit, key="max_sessions_per_uid"),
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
            gid=owner.peer.gid,
            label=label,
        )
        self.sessions[session.id] = session
        self._per_uid[uid] = self._per_uid.get(uid, 0) + 1
        first = inbox not in self.by_inbox
        self.by_inbox.setdefault(inbox, set()).add(session.id)
        if first:  # its watches are taken whole, even if cancelled: close drops both
            chat = os.path.dirname(inbox)
            self._chat_dirs[chat] = self._chat_dirs.get(chat, 0) + 1
            with anyio.CancelScope(shield=True):
                for directory in (chat, inbox):
                    await self.watcher.add(directory)
        self._spawn_claim(inbox)  # a waiting abort (left for its owner, say) may be this one's
        log.info("session %s opened for %r (pid %s, uid %d)", session.id, resolved, pid, uid)
        reason = await anyio.to_thread.run_sync(marked, resolved, limiter=self._claim_limiter(uid))
        while reason is not None and session.aborted is None and (c := self._claiming.get(inbox)):
            await c.done.wait()  # the claim spawned above may be taking the marker's abort:
        if reason is not None and session.aborted is None:  # it decides first (one push an abort)
            log.info("session %s opened on an aborted chat: %r", session.id, reason)
            self._mark_aborted(session, reason)
            await anyio.lowlevel.checkpoint()  # the push goes out before the open's answer
        return session

    async def close(self, session_id: str) -> bool:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        session.closed = True  # first: a round that has not counted its bytes yet never will
        self._released(session_id)
        left = self._per_uid.get(session.uid, 1) - 1
        if left > 0:
            self._per_uid[session.uid] = left
        else:
            self._per_uid.pop(session.uid, None)
            self._claim_limiters.pop(session.uid, None)  # a claim running keeps its own
        ids = self.by_inbox.get(session.inbox)
        if ids is not None:
            ids.discard(session_id)
            if not ids:
                del self.by_inbox[session.inbox]
                self._complete.discard(session.inbox)
                self._unsettled.pop(session.inbox, None)
                chat = os.path.dirname(session.inbox)
                if self._chat_dirs.get(chat, 1) > 1:
                    self._chat_dirs[chat] -= 1
                else:
                    self._chat_dirs.pop(chat, None)
                with anyio.CancelScope(shield=True):  # popped: nothing else would drop them
                    for directory in (chat, session.inbox):
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
        """Drop the stored conversation of sessions unused for ``idle_timeout`` seconds;
        the session (and its abort watch) lives as long as its connection.
        """
        limit = time.monotonic() - idle_timeout
        forgotten = 0
        for session in self.sessions.values():
            if session.last_used < limit and session.prompt.messages and not session.lock.locked():
                session.forget_conversation()
                self._released(session.id)  # no round runs: its lock is free
                forgotten += 1
        if forgotten:
            log.info("dropped the stored conversation of %d idle session(s)", forgotten)
        return forgotten

    # --- aborts ----------------------------------------------------------------------

    async def pending_abort(
        self, session: AgentSession | None, inbox: str | None, resolved: str | None
    ) -> str | None:
        """The abort a ``prepare_prompt`` must fail with, if any.

        A session, once aborted, stays aborted. For a call without a session
        (``resolved``: its save file), an abort claimed by the watcher is
        reported once while the chat is still marked, then forgotten
        (:class:`~scoutd.server.pending.PendingAborts`).
        """
        if session is not None and session.aborted is not None:
            return session.aborted
        if session is None and inbox is not None:
            return await self._pending.take(inbox, resolved)
        return None

    def abort(
        self,
        inbox: str,
        reason: str,
        *,
        claimed_by_watcher: bool,
        consumed: bool = True,
        only: Collection[str] | None = None,
    ) -> None:
        """Abort the sessions of ``inbox``: mark, notify and maybe signal them.

        ``consumed``: an abort file was consumed (counted in ``aborts``, the
        metric ``scoutd_aborts_total``); False when they stop without one
        (the chat aborted before, an inbox that cannot be used, an abort
        entry that could not be taken). ``only``: the sessions of the inbox
        that may have it (the watcher's claim checked their rights); default:
        all of them.
        """
        if consumed:
            self.aborts += 1
        if claimed_by_watcher:
            self._pending.add(inbox, reason)
        signum = self._snapshot().abort_signal
        ids = sorted(i for i in self.by_inbox.get(inbox, ()) if only is None or i in only)
        # One line per abort; repr() keeps a reason with line breaks on one line.
        what = "abort consumed" if consumed else "aborted without consuming an abort"
        log.info("%s for %r (%d session(s)): %r", what, inbox, len(ids), reason)
        for session_id in ids:
            session = self.sessions[session_id]
            self._mark_aborted(session, reason)
            if signum is not None and session.pid is not None:
                send_abort_signal(session.pid, session.uid, signum, session.id)

    def _mark_aborted(self, session: AgentSession, reason: str) -> None:
        """Abort ``session`` for good and push ``session.aborted`` to its connection."""
        session.aborted = reason
        params = protocol.SessionAbortedParams(
            session=session.id, save_file=session.save_file, reason=reason
        )
        session.owner.push(protocol.encode_notification("session.aborted", params))

    def _spawn_claim(self, inbox: str) -> None:
        if self._tg is not None:
            self._tg.start_soon(self.claim, inbox)

    def _settle_expired(self, inbox: str) -> bool:
        """An abort still changing after MAX_SETTLE_WAIT is taken as it is (fail closed)."""
        first = self._unsettled.get(inbox)
        return first is not None and time.monotonic() - first >= inbox_claim.MAX_SETTLE_WAIT

    async def _claim_settled(self, inbox: str) -> None:
        """Claim again after the settle time (a close or rename event may come first)."""
        await anyio.sleep(inbox_claim.SETTLE_TIME)
        await self.claim(inbox)

    @contextlib.asynccontextmanager
    async def preparing(self, inbox: str | None) -> AsyncIterator[Ticket]:
        """Let a claim of ``inbox`` already running decide before a prepare call starts;
        give the call its ticket, which its pickup holds the inbox with (``inbox/gate.py``).

        So a call that starts while the watcher takes an abort reports it
        (:meth:`pending_abort`). Claims never wait for prepare calls: a call
        may wait for a worker of the prepare pool for long, and an abort must
        not (it used to wait here for every call of that inbox, queued or
        running). A claim and the call's own pickup race for the abort by
        rename: exactly one takes it, and a pickup that finds the abort
        takes nothing else.
        """
        if inbox is not None:
            while (running := self._claiming.get(inbox)) is not None:
                await running.done.wait()  # a claim in flight decides first
        yield self._gate.ticket()  # the call's pickup learns of a claim that took the abort since

    def _claim_limiter(self, uid: int) -> anyio.CapacityLimiter:
        """The threads ``uid``'s abort claims run on (never the prepare pool)."""
        limiter = self._claim_limiters.get(uid)
        if limiter is None:
            limiter = self._claim_limiters[uid] = anyio.CapacityLimiter(ABORT_THREADS_PER_UID)
        return limiter

    def _fail_closed(self, inbox: str, reason: str, ids: Collection[str]) -> None:
        """Abort the sessions of ``inbox`` not aborted yet: it may hide an abort (not consumed)."""
        fresh = [i for i in ids if i in self.sessions and self.sessions[i].aborted is None]
        if fresh:
            log.error("inbox %r fails closed for %d session(s): %r", inbox, len(fresh), reason)
            self.abort(inbox, reason, claimed_by_watcher=False, consumed=False, only=fresh)

    async def claim(self, inbox: str) -> None:
        """Try to consume the inbox's abort file; serialised per inbox.

        A request arriving while a claim runs is folded into one more attempt
        after it, so a burst of events costs at most two claims. It runs on
        its uid's limiter (:meth:`_claim_limiter`) and takes the abort only
        for the sessions that may have it (:func:`scoutd.server.claims.claim_for`).
        """
        if inbox in self._claiming:
            self._claiming[inbox].again = True
            return
        claim = self._claiming[inbox] = RunningClaim()
        try:
            while inbox in self.by_inbox:
                sessions = [self.sessions[i] for i in sorted(self.by_inbox[inbox])]
                candidates = [Candidate(s.id, s.uid, s.gid, s.owner.peer.groups) for s in sessions]
                complete = inbox in self._complete or self._settle_expired(inbox)
                self._complete.discard(inbox)
                try:
                    claimed = await anyio.to_thread.run_sync(
                        partial(
                            claim_for,
                            claim_and_mark,
                            self._gate,
                            sessions[0].resolved,
                            candidates,
                            self._own_uid,
                            max_bytes=self._snapshot().config.prompt.inbox_max_bytes,
                            complete=complete,
                        ),
                        limiter=self._claim_limiter(sessions[0].uid),
                    )
                except inbox_claim.NotSettled:
                    # no sleep in a thread: retry from the loop (a close or rename claims at once)
                    self._unsettled.setdefault(inbox, time.monotonic())
                    if self._tg is not None:
                        self._tg.start_soon(self._claim_settled, inbox)
                    claimed = Claimed()
                except Exception:
                    log.exception("claiming the abort file of %s failed", inbox)
                    claimed = Claimed()
                else:  # taken, or gone: a later abort starts its settle time afresh
                    self._unsettled.pop(inbox, None)
                if claimed.reason is not None and claimed.consumed:  # and those opened since,
                    looked = {c.id for c in candidates}  # which may have read no marker yet
                    late = [i for i in self.by_inbox.get(inbox, ()) if i not in looked]
                    only = (*claimed.sessions, *(i for i in late if not self.sessions[i].aborted))
                    self.abort(inbox, claimed.reason, claimed_by_watcher=True, only=only)
                elif claimed.reason is not None:
                    self._fail_closed(inbox, claimed.reason, claimed.sessions)
                if claimed.hidden:  # their uid locked itself out: the abort stays, unread
                    self._fail_closed(inbox, hidden_from(inbox), claimed.hidden)
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
            if path in self._chat_dirs:  # a chat directory moved or was replaced: unusable?
                for inbox in [i for i in self.by_inbox if os.path.dirname(i) == path]:
                    self._spawn_claim(inbox)
                continue
            parent, name = os.path.split(path)
            if name == ABORT_NAME and parent in self.by_inbox:
                if path in batch.complete:  # closed by its writer or renamed in: no settle wait
                    self._complete.add(parent)
                self._spawn_claim(parent)  # else maybe still being written: the claim finds out

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
        waiting = await anyio.to_thread.run_sync(
            holding_abort, inboxes, limiter=self._rescan_limiter
        )
        for inbox in waiting:
            self._spawn_claim(inbox)

    async def run(
        self,
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
                while True:  # a reload wakes it: a shorter interval applies at once
                    await (snap := self._snapshot()).sleep(snap.config.daemon.rescan_interval)
                    try:
                        await self.rescan()
                    except Exception:
                        log.exception("rescan of watched inboxes failed")
                    self.rescans += 1
            finally:
                self._tg = None
