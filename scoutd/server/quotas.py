"""What one uid and the whole daemon may hold at once: CPU slots and memory.

Three resources, each bounded per uid and for the whole daemon
(docs/RELIABILITY.md, "CPU and memory, per request, per uid, per daemon"):

* **prepares computing** in worker threads: at most ``max_prepares_per_uid``
  of one uid at once, so that one uid never holds every worker;
* **unread answers**: bytes of answers produced and not yet taken by the
  client, per uid and in total (per connection: :mod:`.connection`);
* **stored sessions**: what a session's conversation really holds in memory,
  :func:`~scoutd.engine.held.held_bytes`, per session, per uid and in total. A session is counted
  from the round that stores its conversation until the registry drops it
  (closed, or forgotten while idle), never for a session already closed.

A request that would pass a bound gets ``-32004`` (``TOO_LARGE``) naming the
bound, before anything is changed: the refusal reaches that client only, and
nothing stored or delivered is lost. Everything here runs on the event loop
except the session accounting, which worker threads call under a lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import anyio

from .. import protocol
from ..config import DaemonConfig

__all__ = ["Quotas", "StoredSession"]

# Requests of one uid handled at once, over all its connections (64 each): beyond,
# its connections are not read. Every request, even one refused at once, is a turn
# of the one event loop: 64 connections of tiny invalid lines (4,096 in flight) made
# another uid's `status` take 0.7 s (p50) to 12 s (docs/RELIABILITY.md).
MAX_REQUESTS_PER_UID = 256


class StoredSession(Protocol):
    """A session as its count sees it (:class:`~scoutd.server.sessions.AgentSession`)."""

    id: str
    uid: int
    closed: bool  # set when it is closed, before its count is released


def _too_large(
    message: str, limit: int, key: str, rid: protocol.RequestId
) -> protocol.ProtocolError:
    data = protocol.TooLargeData(limit=limit, key=key)
    return protocol.ProtocolError(protocol.TOO_LARGE, f"too large: {message}", data, id=rid)


class Quotas:
    """The daemon's per-uid and total counts of prepares, unread answers and sessions.

    ``limits`` gives the current ``[daemon]`` table (a reload applies at once);
    ``workers`` is the size of the worker-thread pool prepares run in.
    """

    def __init__(self, limits: Callable[[], DaemonConfig], workers: int) -> None:
        self._limits = limits
        self.workers = workers
        self._computing: dict[int, int] = {}
        self.waiting: dict[int, int] = {}  # prepares of each uid waiting for a slot now
        self._freed: dict[int, anyio.Event] = {}
        self.queued = 0  # unread answer bytes, all connections
        self.queued_by_uid: dict[int, int] = {}
        self.held = 0  # session bytes held, all sessions
        self.held_by_uid: dict[int, int] = {}
        self._sessions: dict[str, tuple[int, int]] = {}  # session id -> (uid, bytes held)
        self._lock = threading.Lock()  # the session counts: changed from worker threads
        self._requests: dict[int, anyio.Semaphore] = {}  # uids with requests in flight

    # --- requests in flight -----------------------------------------------------------

    async def start_request(self, uid: int) -> None:
        """Take one of ``uid``'s :data:`MAX_REQUESTS_PER_UID` request slots (waits while
        it holds them all); :meth:`end_request` gives it back."""
        slots = self._requests.get(uid)
        if slots is None:
            slots = self._requests[uid] = anyio.Semaphore(MAX_REQUESTS_PER_UID)
        try:
            slots.acquire_nowait()  # the common case: no checkpoint
        except anyio.WouldBlock:
            await slots.acquire()

    def end_request(self, uid: int) -> None:
        slots = self._requests[uid]
        slots.release()
        if slots.value == MAX_REQUESTS_PER_UID:  # none held, none waiting
            del self._requests[uid]

    # --- prepares computing ---------------------------------------------------------

    def prepares_per_uid(self) -> int:
        """``max_prepares_per_uid``, or half the worker threads (at least one) when unset."""
        limit = self._limits().max_prepares_per_uid
        return max(1, self.workers // 2) if limit is None else limit

    @contextlib.asynccontextmanager
    async def computing(
        self, uid: int, ready: Callable[[], Awaitable[None]] | None = None
    ) -> AsyncIterator[None]:
        """Hold one of ``uid``'s prepare slots; wait while it holds them all.

        ``ready`` (it may wait, or raise to refuse) is awaited before a slot is
        taken, never while one is held, and again after every wait for a slot:
        the slot is taken in the same step as ``ready`` last returned.
        """
        while True:
            if ready is not None:
                await ready()
            if self._computing.get(uid, 0) < self.prepares_per_uid():
                break
            freed = self._freed.get(uid)
            if freed is None:
                freed = self._freed[uid] = anyio.Event()
            self.waiting[uid] = self.waiting.get(uid, 0) + 1
            try:
                await freed.wait()
            finally:
                self.waiting[uid] -= 1
                if not self.waiting[uid]:
                    del self.waiting[uid]
        self._computing[uid] = self._computing.get(uid, 0) + 1
        try:
            yield
        finally:
            left = self._computing[uid] - 1
            if left:
                self._computing[uid] = left
            else:
                del self._computing[uid]
            freed = self._freed.pop(uid, None)
            if freed is not None:
                freed.set()

    def reloaded(self) -> None:
        """Wake every prepare waiting for a slot, to look again under the bound a reload
        put in force: a raised ``max_prepares_per_uid`` lets them go at once, not
        behind the requests that came after it, nor only once a slot frees."""
        for freed in self._freed.values():
            freed.set()
        self._freed.clear()

    # --- unread answers -------------------------------------------------------------

    def add_queued(self, uid: int, size: int) -> None:
        """Count ``size`` more (or, negative, fewer) unread answer bytes of ``uid``."""
        self.queued += size
        left = self.queued_by_uid.get(uid, 0) + size
        if left:
            self.queued_by_uid[uid] = left
        else:
            self.queued_by_uid.pop(uid, None)

    def answers_over(self, uid: int) -> bool:
        """Whether ``uid``'s unread answers, or all of them, are at their bound."""
        limits = self._limits()
        return (
            self.queued_by_uid.get(uid, 0) >= limits.max_queued_response_bytes_per_uid
            or self.queued >= limits.max_queued_response_bytes_total
        )

    def check_answers(self, uid: int, rid: protocol.RequestId) -> None:
        """Refuse a prepare while ``uid`` (or, holding unread answers itself, the
        daemon) is at its bound of unread answers (``TOO_LARGE``).

        A uid that has nothing unread is never refused for the answers other uids
        leave unread: it is not the one holding them.
        """
        limits = self._limits()
        mine = self.queued_by_uid.get(uid, 0)
        if mine >= limits.max_queued_response_bytes_per_uid:
            limit = limits.max_queued_response_bytes_per_uid
            raise _too_large(
                f"answers not yet read by uid {uid} hold {mine} bytes, at least"
                f" max_queued_response_bytes_per_uid = {limit}; read them first",
                limit,
                "max_queued_response_bytes_per_uid",
                rid,
            )
        if mine and self.queued >= limits.max_queued_response_bytes_total:
            limit = limits.max_queued_response_bytes_total
            raise _too_large(
                f"answers not yet read hold {self.queued} bytes in all, at least"
                f" max_queued_response_bytes_total = {limit}, {mine} of them uid {uid}'s;"
                " read them first",
                limit,
                "max_queued_response_bytes_total",
                rid,
            )

    # --- stored sessions ------------------------------------------------------------

    def session_held(self, session: str) -> int:
        """The bytes a session's stored conversation is counted as holding."""
        with self._lock:
            return self._sessions.get(session, (0, 0))[1]

    def reserve_session(self, session: StoredSession, held: int, rid: protocol.RequestId) -> int:
        """Count ``held`` bytes for ``session`` from now on, if every bound allows it
        (``TOO_LARGE`` otherwise, nothing counted); returns what it held before, for
        :meth:`restore_session`.

        A session closed meanwhile is ``UNKNOWN_SESSION``, nothing counted: a round
        that looked it up before its ``session.close`` must not count bytes that
        nothing would release. The registry sets ``closed`` before it releases the
        count, and this check and that release both hold this lock: a round counts
        before the release (which uncounts it) or not at all.
        """
        limits = self._limits()
        uid = session.uid
        with self._lock:
            if session.closed:
                raise protocol.ProtocolError(
                    protocol.UNKNOWN_SESSION, f"unknown session {session.id!r}", id=rid
                )
            before = self._sessions.get(session.id, (uid, 0))[1]
            grows = held - before
            if held > limits.max_session_bytes:
                raise _too_large(
                    f"the session would hold {held} bytes, more than max_session_bytes ="
                    f" {limits.max_session_bytes}",
                    limits.max_session_bytes,
                    "max_session_bytes",
                    rid,
                )
            mine = self.held_by_uid.get(uid, 0) + grows
            if grows > 0 and mine > limits.max_session_bytes_per_uid:
                raise _too_large(
                    f"the sessions of uid {uid} would hold {mine} bytes, more than"
                    f" max_session_bytes_per_uid = {limits.max_session_bytes_per_uid}",
                    limits.max_session_bytes_per_uid,
                    "max_session_bytes_per_uid",
                    rid,
                )
            if grows > 0 and self.held + grows > limits.max_total_session_bytes:
                raise _too_large(
                    f"the daemon's sessions would hold {self.held + grows} bytes, more than"
                    f" max_total_session_bytes = {limits.max_total_session_bytes}",
                    limits.max_total_session_bytes,
                    "max_total_session_bytes",
                    rid,
                )
            self._set(session.id, uid, held)
            return before

    def restore_session(self, session: StoredSession, held: int) -> None:
        """Count ``held`` bytes for ``session`` again (a round that failed), unless it
        was closed meanwhile (its close released it for good)."""
        with self._lock:
            if not session.closed:
                self._set(session.id, session.uid, held)

    def release_session(self, session: str) -> None:
        """Stop counting a session: the registry closed it or dropped its conversation
        (:class:`~scoutd.server.sessions.SessionRegistry`, ``released``)."""
        with self._lock:
            found = self._sessions.get(session)
            if found is not None:
                self._set(session, found[0], 0)

    def _set(self, session: str, uid: int, held: int) -> None:
        before = self._sessions.get(session, (uid, 0))[1]
        self.held += held - before
        mine = self.held_by_uid.get(uid, 0) + held - before
        if mine:
            self.held_by_uid[uid] = mine
        else:
            self.held_by_uid.pop(uid, None)
        if held:
            self._sessions[session] = (uid, held)
        else:
            self._sessions.pop(session, None)
