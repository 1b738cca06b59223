"""The daemon's methods: one handler per method name, and the dispatch that routes to them.

:func:`dispatch` turns one request line into one answer line: it decodes the envelope
and the params (in a worker thread when the line is large), finds the method in
:data:`HANDLERS`, and maps every failure to its error code (docs/PROTOCOL.md). A handler
gets the decoded params and returns the encoded answer, or raises ProtocolError. A new
method: its Structs in :mod:`scoutd.protocol`, a handler, an entry in :data:`HANDLERS`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec

from .. import protocol
from ..config import Config, strategy_names, with_overrides
from ..errors import NOT_CONSUMED, Aborted, ConfigError, StillAborted, UnknownStrategy
from ..formats import FormatError
from ..protocol.error_table import error_for
from ..recall import NO_CONVERSATION, find_output
from ..security import Forbidden
from ..strategies import BUILTINS
from ..strategies.inbox import inbox_dir
from . import workers
from .daemon_config import Snapshot
from .sessions import AgentSession

if TYPE_CHECKING:
    from .connection import PeerConnection
    from .state import Daemon

__all__ = ["HANDLERS", "INLINE_BYTES", "THREAD_DECODE_BYTES", "Call", "dispatch"]

log = logging.getLogger("scoutd.server")

# A prepare whose request line is at most this long, without a save file (no
# file to read) and with built-in strategies only, runs on the event loop: it
# takes about 0.1 ms, less than the hand-off to a worker thread and back.
# Anything larger or slower (a plugin, a session's round, which may recompute
# its whole conversation) runs in a worker, so that one big request never holds
# up the others (docs/ARCHITECTURE.md).
INLINE_BYTES = 64 * 1024
# Lines above this are decoded in a worker thread: msgspec is fast, but 64 MiB of JSON
# still takes tens of milliseconds that other clients must not wait for.
THREAD_DECODE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Call:
    """What a handler may use: the daemon, the caller's connection, the request id,
    the configuration generation the request runs under and the request line's size."""

    server: Daemon
    conn: PeerConnection
    id: protocol.RequestId
    snap: Snapshot
    size: int

    def forbidden(self, exc: Forbidden) -> protocol.ProtocolError:
        return protocol.ProtocolError(
            protocol.FORBIDDEN,
            f"forbidden: {exc}",
            protocol.ForbiddenData(reason=str(exc)),
            id=self.id,
        )

    def invalid_params(self, path: str, error: object) -> protocol.ProtocolError:
        """``-32602`` naming the params field at ``path``, in its data and its message."""
        return protocol.ProtocolError(
            protocol.INVALID_PARAMS,
            f"invalid params: {error} - at `{path}`",
            {"path": path, "error": str(error)},
            id=self.id,
        )

    def unknown_session(self, session: str) -> protocol.ProtocolError:
        return protocol.ProtocolError(
            protocol.UNKNOWN_SESSION, f"unknown session {session!r}", id=self.id
        )

    def session(self, session_id: str) -> AgentSession:
        """The session named, if the peer's uid may use it; else ``-32006``."""
        found = self.server.registry.get(session_id, self.conn.peer.uid, self.server.shared.own_uid)
        if found is None:
            raise self.unknown_session(session_id)
        return found

    async def check_path(self, save_file: str) -> str:
        """The save file resolved, inside the allowed roots and reachable by the peer."""
        server = self.server
        try:
            return await anyio.to_thread.run_sync(
                workers.checked_path,
                save_file,
                self.snap.roots,
                self.conn.peer,
                server.shared.own_uid,
                limiter=server.limiter,
            )
        except Forbidden as exc:
            raise self.forbidden(exc) from None


Handler = Callable[[Call, Any], Awaitable[bytes]]


async def dispatch(server: Daemon, conn: PeerConnection, line: bytes, late: bool) -> bytes | None:
    """Answer one request line (None for a client notification).

    ``late``: the line was read after the shutdown began; it is refused
    (``SHUTTING_DOWN``). One read before it runs, however long it waited.
    """
    started = time.perf_counter()
    request: protocol.Request | None = None
    session: str | None = None
    try:
        request, params = await _decode(server, line)
        if late:
            raise protocol.ProtocolError(
                protocol.SHUTTING_DOWN, "the daemon is shutting down", id=request.id
            )
        handler = HANDLERS.get(request.method)
        kind = protocol.METHOD_PARAMS.get(request.method)
        if handler is None or kind is None:
            raise protocol.ProtocolError(
                protocol.METHOD_NOT_FOUND, f"method not found: {request.method!r}", id=request.id
            )
        if params is None:  # else it came decoded with the envelope
            if request.params is not None and len(request.params) > THREAD_DECODE_BYTES:
                params = await anyio.to_thread.run_sync(
                    protocol.decode_params, request, kind, limiter=server.limiter
                )
            else:
                params = protocol.decode_params(request, kind)
        session = getattr(params, "session", None)
        conn.placed()  # in arrival order up to here
        response = await handler(
            Call(server, conn, request.id, server.shared.snapshot, len(line)), params
        )
    except protocol.ProtocolError as exc:
        server.shared.metrics.count_error(exc.code)
        response = protocol.encode_error(exc.id, exc.code, exc.message, exc.data)
    except RecursionError:
        # msgspec stops at the interpreter's recursion limit: params nested a few
        # thousand levels deep are refused like other bad input, not as a bug. (A
        # line too deep to read at all is the codec's parse error: a request was read.)
        log.debug("refused a request nested too deeply (pid %d)", conn.peer.pid)
        response = workers.too_deep(None if request is None else request.id)
        server.shared.metrics.count_error(protocol.INVALID_PARAMS)
    except Exception:
        log.exception("internal error")
        server.shared.metrics.count_error(protocol.INTERNAL_ERROR)
        rid = request.id if request is not None else None
        response = protocol.encode_error(rid, protocol.INTERNAL_ERROR, "internal error")
    elapsed = time.perf_counter() - started
    server.shared.metrics.observe_request(elapsed)
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "request %s session=%r pid=%d in=%dB out=%dB %.2fms",
            "?" if request is None else repr(request.method)[1:-1][:64],
            None if session is None else session[:64],
            conn.peer.pid,
            len(line),
            len(response),
            elapsed * 1000,
        )
    if request is not None and request.notification:
        return None
    return response


async def _decode(server: Daemon, line: bytes) -> tuple[protocol.Request, msgspec.Struct | None]:
    """The request envelope (and its params when decoded in the same pass); counted."""
    method: str | None = None
    try:
        if len(line) > THREAD_DECODE_BYTES:
            request, params = await anyio.to_thread.run_sync(
                workers.decode_large, line, limiter=server.limiter
            )
        else:
            request, params = protocol.decode_request(line), None
        method = request.method
        return request, params
    finally:
        server.shared.metrics.count_request(method)


# --- the methods ---------------------------------------------------------------------


async def session_open(call: Call, params: protocol.SessionOpenParams) -> bytes:
    server, conn = call.server, call.conn
    resolved = await call.check_path(params.save_file)
    session = await server.registry.open(
        params.save_file,
        resolved,
        params.pid,
        conn.peer.uid,
        conn,
        label=params.label,
        request_id=call.id,
    )
    session.prompt.format = params.format
    if params.messages:
        try:
            async with session.lock, server.shared.quotas.computing(conn.peer.uid):
                await anyio.to_thread.run_sync(
                    workers.store_opening,
                    session,
                    params.messages,
                    call.snap.config,
                    call.id,
                    server.shared.quotas,
                    limiter=server.limiter,
                )
        except Exception:  # refused (too large), or failed: no session the client never got
            await server.registry.close(session.id)
            raise
    server.shared.metrics.sessions_opened += 1  # an open that succeeded (docs/PROTOCOL.md)
    return protocol.encode_result(call.id, protocol.SessionOpenResult(session=session.id))


async def session_close(call: Call, params: protocol.SessionCloseParams) -> bytes:
    registry = call.server.registry
    if registry.get(params.session, call.conn.peer.uid, call.server.shared.own_uid) is None:
        raise call.unknown_session(params.session)
    await registry.close(params.session)  # (not waiting for its rounds: see _turn)
    return protocol.encode_result(call.id, protocol.SessionCloseResult())


async def session_recall(call: Call, params: protocol.SessionRecallParams) -> bytes:
    """The recall tool's answer from the session's own stored conversation: a session
    of another uid is unknown here, like a closed one. In the session's turn
    (:func:`_turn`: a recall sent after a round answers from its conversation) and one
    of its uid's prepare slots, in a worker thread (it reads the whole conversation),
    after the room for the answer, which may be a large output: looked for first,
    then again before each slot, as the answers made meanwhile may fill the bound."""
    server, uid = call.server, call.conn.peer.uid
    session = call.session(params.session)
    room = partial(call.conn.answer_room, call.id)
    async with _turn(call, session):
        await room()
        if session.closed:  # while it waited for the room
            raise call.unknown_session(session.id)
        session.last_used = time.monotonic()
        async with server.shared.quotas.computing(uid, room):
            return await anyio.to_thread.run_sync(
                _recall_answer, session, params, call.id, limiter=server.limiter
            )


@contextlib.asynccontextmanager
async def _turn(call: Call, session: AgentSession) -> AsyncIterator[None]:
    """Hold ``session``'s lock: one round (or recall) at a time, in the order they came
    (anyio's lock passes to its waiters in turn), taken before anything may wait (room,
    a path check): else a call could overtake an earlier one and be prepared on the
    conversation that one replaces, its ``base`` (a count) none the wiser. A call that
    waited for it while the session was closed gets ``-32006``, and nothing runs:
    ``session.close`` never waits for the rounds in flight, and a round past this check
    counts nothing once the session is closed (``Quotas.reserve_session``)."""
    async with session.lock:
        if session.closed:
            raise call.unknown_session(session.id)
        yield


def _check_writer(call: Call, params: protocol.PreparePromptParams, session: AgentSession) -> None:
    """Refuse an ``append`` on a conversation another connection set last (at
    ``$.params.base``, so that the client sends its conversation whole): ``base``
    counts messages only, and a second client of the uid that replaced the
    conversation with as many messages would have this round prepared on its
    messages, under a delta that cannot show it (``keep`` 0)."""
    writer = session.encoder.writer
    if params.messages is not None or writer is None or writer is call.conn:
        return
    held = len(session.prompt.messages)
    error = (
        "another connection set the session's conversation since this one's last"
        " call: send the whole conversation as `messages`"
    )
    raise protocol.ProtocolError(
        protocol.INVALID_PARAMS,
        f"invalid params: {error} - at `$.params.base`",
        {"path": "$.params.base", "error": error, "messages": held},
        id=call.id,
    )


def _recall_answer(
    session: AgentSession, params: protocol.SessionRecallParams, rid: protocol.RequestId
) -> bytes:
    """The encoded ``session.recall`` answer (in a worker thread, under the session's lock)."""
    held = session.prompt.messages
    if not held:
        found = protocol.SessionRecallResult(text=NO_CONVERSATION)
    else:
        answer = find_output(
            held,
            params.handle,
            params.search,
            format=session.shown_format or session.prompt.format,  # as its prompt read it
            visible=session.shown,
        )
        found = protocol.SessionRecallResult(
            text=answer.text, handle=answer.handle, found=answer.found
        )
    return protocol.encode_result(rid, found)


async def status(call: Call, params: protocol.StatusParams) -> bytes:
    return protocol.encode_result(call.id, call.server.status())


async def metrics(call: Call, params: protocol.MetricsParams) -> bytes:
    return protocol.encode_result(call.id, protocol.MetricsResult(text=call.server.metrics_text()))


async def config_reload(call: Call, params: protocol.ConfigReloadParams) -> bytes:
    try:
        generation = await call.server.reload()
    except ConfigError as exc:
        # The code says "invalid configuration"; the message says why and what stays.
        kept = call.server.shared.snapshot.generation
        raise protocol.ProtocolError(
            protocol.CONFIG_INVALID,
            f"reload refused, keeping generation {kept}: {exc}",
            protocol.ConfigInvalidData(error=str(exc)),
            id=call.id,
        ) from None
    return protocol.encode_result(call.id, protocol.ConfigReloadResult(generation=generation))


@dataclass(frozen=True, slots=True)
class Resolved:
    """A ``prepare_prompt`` request resolved: what it runs with and on what files.

    ``resolved`` is the checked save file of a session-less call (or of a session
    call naming one); a session's own save file is checked again in the worker
    that prepares (``recheck``), one hand-off per round instead of two.
    """

    config: Config
    session: AgentSession | None
    save_file: str | None
    resolved: str | None
    inbox: str | None
    recheck: workers.PathCheck | None


async def resolve_prepare(
    call: Call, params: protocol.PreparePromptParams, session: AgentSession | None
) -> Resolved:
    """The configuration (with the call's overrides) and the checked save file of a
    ``prepare_prompt`` of ``session`` (the one it names); an error for what is refused."""
    server = call.server
    config = call.snap.config
    if params.config:
        try:
            config = with_overrides(config, params.config)
        except ConfigError as exc:
            raise call.invalid_params("$.params.config", exc) from None
    if session is not None and params.save_file is None:
        # The session's save file; the inbox it names is known already.
        recheck = (session.save_file, call.snap.roots, call.conn.peer, server.shared.own_uid)
        return Resolved(config, session, session.save_file, None, session.inbox, recheck)
    resolved = inbox = None
    if params.save_file is not None:
        resolved = await call.check_path(params.save_file)
        if session is not None and resolved != session.resolved:
            raise workers.differs(call.id)
        inbox = inbox_dir(resolved)
    return Resolved(config, session, params.save_file, resolved, inbox, None)


async def prepare_prompt(call: Call, params: protocol.PreparePromptParams) -> bytes:
    """Resolve the request, then run it; first, while this client's unread answers
    are at their bound, wait (or refuse), as again before each prepare slot. A
    session's turn is taken first, before any of that may wait (:func:`_turn`)."""
    session = None if params.session is None else call.session(params.session)
    async with contextlib.nullcontext() if session is None else _turn(call, session):
        if session is not None and not params.redeliver:  # a lost answer's are its round's
            session.delivered = ()  # (docs/PROTOCOL.md, "Answers not used")
        await call.conn.answer_room(call.id)
        request = await resolve_prepare(call, params, session)
        return await run_prepare(call, params, request)


async def run_prepare(call: Call, params: protocol.PreparePromptParams, request: Resolved) -> bytes:
    """Run a resolved ``prepare_prompt`` (on the event loop or in a worker thread, a
    session's in its turn) and encode its answer; an abort found by it or pending for
    its chat is its error."""
    server, rid, uid = call.server, call.id, call.conn.peer.uid
    room = partial(call.conn.answer_room, rid)
    session, inbox = request.session, request.inbox
    resolved, config = request.resolved, request.config
    quotas = server.shared.quotas
    async with server.registry.preparing(inbox) as ticket:
        reason = await server.registry.pending_abort(session, inbox, resolved)
        if reason is None:
            started = time.perf_counter()
            try:
                if session is None:
                    if _inline(call, params, config, resolved):
                        # Small, built-in and without files: cheaper here than the hand-off.
                        line, delivered = workers.run_prepare(
                            rid, params, None, config, True, ticket
                        )
                    else:
                        async with quotas.computing(uid, room):
                            started = time.perf_counter()  # waiting for a slot is not preparing
                            line, delivered = await anyio.to_thread.run_sync(
                                workers.run_prepare,
                                rid,
                                params,
                                resolved,
                                config,
                                _builtin_only(params, config),
                                ticket,
                                limiter=server.limiter,
                            )
                else:
                    session.last_used = time.monotonic()
                    async with quotas.computing(uid, room):
                        _check_writer(call, params, session)
                        if session.encoder.writer not in (None, call.conn):
                            session.encoder.forget()  # its last prompt went to another one
                        started = time.perf_counter()  # waiting for a slot: not preparing
                        line, delivered = await anyio.to_thread.run_sync(
                            partial(workers.run_session_prepare, quotas=quotas, ticket=ticket),
                            rid,
                            params,
                            session,
                            resolved,
                            config,
                            request.recheck,
                            limiter=server.limiter,
                        )
                        session.encoder.writer = call.conn
            except Forbidden as exc:
                raise call.forbidden(exc) from None
            except Aborted as exc:
                reason = exc.reason
                if inbox is not None and not isinstance(exc, StillAborted):  # new: all stop
                    consumed = not isinstance(exc, NOT_CONSUMED)  # counted only if consumed
                    server.registry.abort(
                        inbox, reason, claimed_by_watcher=False, consumed=consumed
                    )
                if session is not None:
                    session.aborted = reason
            except (UnknownStrategy, ConfigError) as exc:
                raise error_for(exc, rid) from None
            except FormatError as exc:
                raise call.invalid_params("$.params.messages", exc) from None
            else:
                server.shared.metrics.observe_prepare(time.perf_counter() - started)
                server.shared.metrics.notices_delivered += delivered
                return line
    session_id = None if session is None else session.id
    raise error_for(
        Aborted(reason), rid, save_file=request.save_file, session=session_id, prefix="aborted: "
    )


def _inline(
    call: Call, params: protocol.PreparePromptParams, config: Config, save_file: str | None
) -> bool:
    """Whether a session-less prepare runs on the event loop: a short request, no
    save file (so no file is read), no tokenizer and only built-in strategies (an
    operator's plugin or tokenizer is code that may take any time)."""
    if save_file is not None or call.size > INLINE_BYTES or config.prompt.tokenizer:
        return False
    return _builtin_only(params, config)


def _builtin_only(params: protocol.PreparePromptParams, config: Config) -> bool:
    """Whether the call runs built-in strategies only (no plugin, no registered one)."""
    names = strategy_names(
        params.strategies if params.strategies is not None else config.prompt.prompt_strategies
    )
    return names is None or all(name in BUILTINS for name in names)


HANDLERS: Final[dict[str, Handler]] = {
    "prepare_prompt": prepare_prompt,
    "session.open": session_open,
    "session.close": session_close,
    "session.recall": session_recall,
    "status": status,
    "config.reload": config_reload,
    "metrics": metrics,
}
