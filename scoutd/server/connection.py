"""One client connection: admit it, read its lines, answer them, apply the limits.

The shell only moves bytes: it splits the stream into lines
(:class:`scoutd.protocol.LineReader`), starts one task per request (handled by
:func:`scoutd.server.handlers.dispatch`), writes the answers back under a lock
and enforces the timeouts and size bounds of docs/OPERATIONS.md (limits).
"""

from __future__ import annotations

import logging
import socket
import time
from collections import deque
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from .. import protocol
from ..config import DaemonConfig
from ..security import Forbidden, PeerCred, check_peer, peer_credentials
from .sessions import SessionRegistry
from .state import Shared

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    # How a connection has one request line answered (None: a notification); the
    # flag: the line was read after the shutdown began (it is refused, not run).
    Dispatch = Callable[["PeerConnection", bytes, bool], Awaitable[bytes | None]]

__all__ = ["MAX_IN_FLIGHT", "MAX_PRODUCING", "RECEIVE_SIZE", "PeerConnection", "serve_client"]

log = logging.getLogger("scoutd.server")

MAX_IN_FLIGHT = 64  # requests per connection; reading pauses beyond (back-pressure)
# Requests of one connection computing their answers at once: with the queued-answer
# bound, what a connection that never reads can make the daemon hold is at most
# max_queued_response_bytes plus this many answers.
MAX_PRODUCING = 4
RECEIVE_SIZE = 256 * 1024


class PeerConnection:
    """One client connection: a reader loop, a task per request, a write lock.

    Resource handling: :meth:`serve` owns the stream and closes it on return,
    together with the sessions the connection opened. Error handling: a
    broken peer ends the connection quietly; a send blocked for longer than
    ``idle_timeout`` (a client that stopped reading) closes it.
    """

    def __init__(
        self,
        shared: Shared,
        registry: SessionRegistry,
        dispatch: Dispatch,
        stream: anyio.abc.SocketStream,
        peer: PeerCred,
    ) -> None:
        self.shared = shared
        self.registry = registry
        self._dispatch = dispatch
        self.stream = stream
        self.peer = peer
        self.closed = False
        self.last_activity = time.monotonic()
        self.in_flight = 0
        self.queued = 0  # bytes of answers produced and not yet written to the socket
        self._waiting = 0  # bytes of complete request lines read, waiting for a slot
        self._unstarted = 0  # complete request lines read whose task is not started yet
        # Notifications not yet handed to the socket, written in order by one task
        # (``_push_all``) and counted in ``queued`` from the moment they are pushed.
        self._pushes: deque[bytes] = deque()
        self._pushed = 0  # their bytes
        self._uid_slots = 0  # request slots of the uid taken by this connection's requests
        self._send_lock = anyio.Lock()
        self._slots = anyio.Semaphore(MAX_IN_FLIGHT)
        self._producing = anyio.Semaphore(MAX_PRODUCING)
        # Held by a request from the start of its task until it is decoded (``placed``):
        # a lock's waiters go in turn, so each takes its session's turn in arrival order,
        # however long a large line takes to decode in a worker thread.
        self._arrival = anyio.Lock(fast_acquire=True)
        self._drained = anyio.Event()  # set when `queued` falls below the bound
        self._tg: anyio.abc.TaskGroup | None = None
        self._sock: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)

    def push(self, line: bytes) -> None:
        """Queue a notification for this connection (never waits).

        Pushes are held in one queue, written by one task: a client that never
        reads holds at most ``max_queued_response_bytes`` of them (or stops at
        its uid's unread bound), then its connection is closed, since a
        notification cannot be refused like a request (docs/RELIABILITY.md).
        """
        if self._tg is None or self.closed:
            return
        size = len(line)
        limit = self.shared.snapshot.config.daemon.max_queued_response_bytes
        if self._pushes and (
            self._pushed + size > limit or self.shared.quotas.answers_over(self.peer.uid)
        ):
            log.warning(
                "closing a connection of pid %d: it does not read its notifications"
                " (%d bytes waiting)",
                self.peer.pid,
                self._pushed,
            )
            self.close()
            return
        self._count(size)
        self._pushed += size
        self._pushes.append(line)
        if len(self._pushes) == 1:
            self._tg.start_soon(self._push_all)

    async def _push_all(self) -> None:
        """Write the queued notifications in order (a line leaves the queue once written;
        what is left when the connection ends is uncounted by :meth:`serve`)."""
        while self._pushes:
            line = self._pushes[0]
            await self._write(line)
            if self.closed:
                return
            self._pushes.popleft()
            self._pushed -= len(line)
            self._count(-len(line))

    async def send(self, line: bytes) -> None:
        """Write one line; a peer that does not take it within ``idle_timeout`` is dropped.

        The line counts as an unread answer until it is written.
        """
        if self.closed:
            return
        size = len(line)
        self._count(size)
        try:
            await self._write(line)
        finally:
            self._count(-size)

    def _count(self, size: int) -> None:
        """Count ``size`` more (negative: fewer) bytes of unread answers."""
        self.queued += size
        self.shared.quotas.add_queued(self.peer.uid, size)
        if size < 0 and not self._full():
            self._drained.set()

    async def _write(self, line: bytes) -> None:
        """Write ``line`` whole, or close the connection.

        Fast path: when no other answer is being written, the line goes out
        in one ``send`` right away (a Unix socket's buffer takes a small
        answer whole), with no checkpoint, lock wait or timer; only what the
        socket did not take waits, under the lock, for the peer to read.
        """
        try:
            if self._send_lock.locked():
                await self._send_lock.acquire()
            else:
                self._send_lock.acquire_nowait()
            try:
                sent = self._send_now(line)
                if sent < len(line):
                    await self._send_rest(memoryview(line)[sent:])
            finally:
                self._send_lock.release()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, TimeoutError):
            self.close()

    def _send_now(self, data: bytes | memoryview) -> int:
        """Write what the socket takes now (never waits); the bytes written."""
        try:
            return self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    async def _send_rest(self, rest: memoryview) -> None:
        """Write ``rest`` as the client takes it; TimeoutError unless all of it is taken
        within ``idle_timeout`` of this call. A reload wakes the wait, which then holds
        to the bound now in force (docs/RELIABILITY.md, rule 29)."""
        started = time.monotonic()
        while rest:
            left = started + self.shared.snapshot.config.daemon.idle_timeout - time.monotonic()
            if left <= 0:
                raise TimeoutError
            with anyio.move_on_after(left) as waiting:
                self.shared.waits.add(waiting)
                try:
                    await anyio.wait_writable(self._sock)
                finally:
                    self.shared.waits.discard(waiting)
            rest = rest[self._send_now(rest) :]

    def _full(self) -> bool:
        """Whether this connection must not be read: its unread answers are at their
        bound, or it holds some while its uid's or all unread answers are at theirs
        (a connection whose client reads its answers is never held up by others)."""
        if self.queued >= self.shared.snapshot.config.daemon.max_queued_response_bytes:
            return True
        return self.queued > 0 and self.shared.quotas.answers_over(self.peer.uid)

    async def answer_room(self, rid: protocol.RequestId) -> None:
        """Before a prepare: wait while this connection's client has answers to read
        and they (or its uid's, or all) are at their bound; refuse it (``TOO_LARGE``)
        when the unread answers are on its uid's other connections, or other uids',
        since waiting would stall a client that reads."""
        await self._room()
        self.shared.quotas.check_answers(self.peer.uid, rid)

    async def _room(self) -> None:
        """Wait while this connection's unread answers fill its bound (back-pressure).

        A reload wakes the wait too: a bound it raised lets the connection go on at
        once, not once its client reads (docs/RELIABILITY.md, rule 29).
        """
        while self._full() and not self.closed:
            if self._drained.is_set():  # waiters share one event until it is set
                self._drained = anyio.Event()
            with anyio.CancelScope() as woken:
                self.shared.waits.add(woken)
                try:
                    await self._drained.wait()
                finally:
                    self.shared.waits.discard(woken)

    def close(self) -> None:
        """Stop this connection: cancels its reader and request tasks."""
        self.closed = True
        self._drained.set()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    async def _send_error(self, code: int, message: str, data: object = None) -> None:
        """Answer a line that never became a request (no id), counted as an error."""
        self.shared.metrics.count_error(code)
        await self.send(protocol.encode_error(None, code, message, data))

    async def serve(self) -> None:
        """Read and answer until EOF, a timeout or :meth:`close`; then clean up."""
        reader = protocol.LineReader(self.shared.snapshot.config.daemon.max_request_bytes)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._read_loop(tg, reader)
                # EOF: requests already received still get their answers.
        finally:
            self._tg = None
            self.closed = True
            self._drained.set()
            self.shared.pending_request_bytes -= reader.pending + self._waiting
            self._waiting = 0
            for _ in range(self._uid_slots):  # requests whose task never ran
                self.shared.quotas.end_request(self.peer.uid)
            for _ in range(self._unstarted + self._uid_slots):  # read, never answered
                self.shared.request_ended()
            self._unstarted = self._uid_slots = 0
            if self._pushed:  # notifications never written
                self._count(-self._pushed)
                self._pushes.clear()
                self._pushed = 0
            with anyio.CancelScope(shield=True):
                await self.registry.close_owner(self)  # which releases their bytes
                await self.stream.aclose()

    async def _read_loop(self, tg: anyio.abc.TaskGroup, reader: protocol.LineReader) -> None:
        shared = self.shared
        while True:
            await self._room()
            daemon = self.shared.snapshot.config.daemon
            now = time.monotonic()
            if reader.started is not None:
                timeout = reader.started + daemon.read_timeout - now
                if timeout <= 0:
                    await self._send_error(
                        protocol.INVALID_REQUEST,
                        f"read timeout: request line not completed within "
                        f"{daemon.read_timeout:g} s; closing",
                    )
                    return
            else:
                timeout = self.last_activity + daemon.idle_timeout - now
                if timeout <= 0:
                    # Open sessions do not keep a silent connection: only requests do.
                    if self.in_flight:
                        self.last_activity = now
                        continue
                    log.debug("closing idle connection of pid %d", self.peer.pid)
                    return
            # Wait for bytes, then take them without waiting: a wait cancelled (a reload,
            # a timeout) just as bytes came must not cancel a read the event loop was
            # completing (asyncio's InvalidStateError for the stream's own receive).
            with anyio.move_on_after(timeout) as waiting:
                shared.waits.add(waiting)  # a reload cancels it: the timeouts are read anew
                try:
                    await anyio.wait_readable(self._sock)
                finally:
                    shared.waits.discard(waiting)
            if waiting.cancelled_caught:
                continue  # a timeout or a reload: the checks at the top of the loop decide
            try:
                data = self._sock.recv(RECEIVE_SIZE)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            if not data:
                return  # the client closed its end
            self.last_activity = time.monotonic()
            daemon = shared.snapshot.config.daemon  # the bounds in force when the bytes came
            reader.limit = daemon.max_request_bytes
            before = reader.pending
            lines = reader.feed(data, self.last_activity)
            # A complete line stays counted until it is answered (``_handle``): it may
            # wait long for a slot here, behind 64 answers its client does not read.
            complete = sum(len(line) for line in lines if line is not None)
            self._waiting += complete
            # A request read is in flight from now until answered: a shutdown waits
            # for it, and refuses only those read after it began (docs/PROTOCOL.md).
            requests = sum(line is not None for line in lines)
            self._unstarted += requests
            shared.in_flight += requests
            late = shared.shutting_down
            shared.pending_request_bytes += reader.pending - before + complete
            if shared.pending_request_bytes > daemon.max_pending_request_bytes:
                await self._too_much_pending(daemon.max_pending_request_bytes)
                return
            for line in lines:
                if line is None:
                    limit = reader.limit
                    shared.metrics.count_error(protocol.TOO_LARGE)
                    tg.start_soon(
                        self.send,
                        protocol.encode_error(
                            None,
                            protocol.TOO_LARGE,
                            f"request line longer than max_request_bytes ({limit})",
                            protocol.TooLargeData(limit=limit, key="max_request_bytes"),
                        ),
                    )
                    continue
                await _acquire(self._slots)
                try:  # and one of its uid's (MAX_REQUESTS_PER_UID over its connections)
                    await shared.quotas.start_request(self.peer.uid)
                except BaseException:
                    self._slots.release()
                    raise
                self._uid_slots += 1  # given back by its task, or at the end (serve)
                self._unstarted -= 1
                self.in_flight += 1
                self._waiting -= len(line)  # counted on: its task uncounts it
                tg.start_soon(self._handle, line, late)

    def placed(self) -> None:
        """The request of the calling task is decoded: the next one may go on. A
        handler takes its session's turn before it next waits, so the calls of a
        session take their turns in the order they arrived (docs/PROTOCOL.md)."""
        if self._arrival.statistics().owner == anyio.get_current_task():
            self._arrival.release()

    async def _too_much_pending(self, limit: int) -> None:
        log.warning("closing a connection of pid %d: request lines held too large", self.peer.pid)
        await self._send_error(
            protocol.TOO_LARGE,
            f"too large: request lines not yet complete or not yet answered on all"
            f" connections exceed max_pending_request_bytes ({limit}); closing",
            protocol.TooLargeData(limit=limit, key="max_pending_request_bytes"),
        )

    async def _handle(self, line: bytes, late: bool) -> None:
        shared = self.shared
        response: bytes | None = None
        held = len(line)  # counted in pending_request_bytes since complete, until answered
        try:
            await self._arrival.acquire()
            await _acquire(self._producing)
            try:
                await self._room()
                try:
                    response = await self._dispatch(self, line, late)
                finally:
                    self.placed()  # refused before it was placed: not held while answered
                    shared.pending_request_bytes -= held
                    held = 0
                    del line
            finally:
                self._producing.release()
            if response is not None:
                await self.send(response)
        except Exception:
            # Last resort: whatever went wrong ends this request, never the daemon.
            log.error(
                "request of pid %d failed unexpectedly; closing its connection", self.peer.pid
            )
            shared.metrics.count_error(protocol.INTERNAL_ERROR)
            self.close()
        finally:
            self.placed()  # cancelled before its dispatch
            shared.pending_request_bytes -= held  # cancelled before its turn
            shared.request_ended()
            self.in_flight -= 1
            self.last_activity = time.monotonic()
            self._uid_slots -= 1
            shared.quotas.end_request(self.peer.uid)
            self._slots.release()


async def _acquire(semaphore: anyio.Semaphore) -> None:
    """Take a slot; without the checkpoint of ``acquire`` when one is free (the
    common case: each checkpoint is one more turn of the event loop per request)."""
    try:
        semaphore.acquire_nowait()
    except anyio.WouldBlock:
        await semaphore.acquire()


def _refusal(shared: Shared, daemon: DaemonConfig, peer: PeerCred) -> bytes | None:
    """The error line refusing a new connection, or None to admit it."""
    if shared.metrics.connections >= daemon.max_connections:
        shared.metrics.count_error(protocol.TOO_LARGE)
        return protocol.encode_error(
            None,
            protocol.TOO_LARGE,
            f"too many connections (max_connections = {daemon.max_connections})",
            protocol.TooLargeData(limit=daemon.max_connections, key="max_connections"),
        )
    if shared.connections_by_uid.get(peer.uid, 0) >= daemon.max_connections_per_uid:
        limit = daemon.max_connections_per_uid
        shared.metrics.count_error(protocol.TOO_LARGE)
        return protocol.encode_error(
            None,
            protocol.TOO_LARGE,
            f"too many connections of uid {peer.uid} (max_connections_per_uid = {limit})",
            protocol.TooLargeData(limit=limit, key="max_connections_per_uid"),
        )
    try:
        check_peer(peer, daemon, shared.own_uid)
    except Forbidden as exc:
        log.warning("refused connection: %s", exc)
        shared.metrics.count_error(protocol.FORBIDDEN)
        return protocol.encode_error(
            None,
            protocol.FORBIDDEN,
            f"forbidden: {exc}",
            protocol.ForbiddenData(reason=str(exc)),
        )
    return None


async def serve_client(
    shared: Shared, registry: SessionRegistry, dispatch: Dispatch, client: socket.socket
) -> None:
    """Admit an accepted socket (or refuse it with one error line) and serve it."""
    try:
        client.setblocking(False)
        peer = peer_credentials(client)
    except OSError:
        client.close()
        return
    refusal = _refusal(shared, shared.snapshot.config.daemon, peer)
    if refusal is not None:
        try:
            client.send(refusal)
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        client.close()
        return
    # Counted at once, before anything waits: two connections admitted meanwhile would
    # both pass a limit their counts together exceed.
    shared.metrics.connections += 1
    by_uid = shared.connections_by_uid
    by_uid[peer.uid] = by_uid.get(peer.uid, 0) + 1
    try:
        stream = await anyio.abc.UNIXSocketStream.from_socket(client)
        await PeerConnection(shared, registry, dispatch, stream, peer).serve()
    except Exception as exc:
        # Last resort: one connection's failure never ends the daemon, nor leaves its
        # client waiting on a socket nobody serves (serve closes it on every other way out).
        log.error("connection of pid %d ended by an unexpected %s", peer.pid, type(exc).__name__)
        client.close()
    finally:
        shared.metrics.connections -= 1
        by_uid[peer.uid] -= 1
        if not by_uid[peer.uid]:
            del by_uid[peer.uid]
