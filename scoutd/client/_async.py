"""The daemon's client API: :class:`AsyncClient` and :class:`AsyncSession`.

The source of both clients: ``scripts/unasync`` generates ``_sync.py`` (:class:`Client`,
:class:`Session`) from it, dropping ``async``/``await`` and the ``Async`` prefixes and
swapping the anyio backend for the socket one. Edit this file, then run it.

Design (docs/ARCHITECTURE.md, "The client and the protocol"): the connection
(``_async_connection.py``) is read by whichever caller waits, for everyone.
Reading ``Session.aborted`` also routes what has already arrived, without
waiting, so a pushed abort shows without any other call.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

import msgspec

from ..errors import DaemonTimeout, DaemonUnavailable, RemoteError
from ..protocol import (
    UNKNOWN_SESSION,
    ConfigReloadParams,
    ConfigReloadResult,
    MetricsParams,
    MetricsResult,
    PreparePromptParams,
    SessionCloseParams,
    SessionOpenResult,
    SessionRecallResult,
    StatusParams,
)
from ..protocol.error_table import about_base
from ..protocol.layout import LayoutError
from ..protocol.report import Prepared
from ._async_connection import AsyncConnection, open_stream
from ._backend_anyio import Lock, close_scope
from ._common import (
    MAX_ANSWER_BYTES,
    DeltaMismatch,
    Messages,
    Overrides,
    SentConversation,
    SessionAnswer,
    WholePrepared,
    WholePrompt,
    default_socket_path,
    open_params,
    prepare_params,
    recall_params,
    refused_indices,
    whole_params,
)
from ._sockets import checked_timeout, deadline_in

__all__ = ["AsyncClient", "AsyncSession"]

log = logging.getLogger("scoutd.client")

T = TypeVar("T")
W = TypeVar("W", bound=WholePrompt)

# Closing a session on leaving its context manager is bounded even when the
# block was cancelled: the daemon also closes it with the connection.
CLOSE_GRACE = 5.0


class AsyncClient:
    """A client of the scoutd daemon; concurrent requests share one connection.

    Args:
        socket_path: the daemon's socket; default: found as docs/OPERATIONS.md
            says ("Finding the daemon": ``$SCOUTD_SOCKET``, the configured
            ``[daemon] socket_path``, the user's socket, the system socket).
        timeout: seconds allowed for connecting and for each answer (``None``:
            no limit; past about 24.8 days, poll's longest wait, held to that).
        reconnect: when the daemon cannot be reached (not running, restarting),
            keep trying to connect with exponential backoff (see
            :mod:`scoutd.client._reconnect`) for up to ``timeout`` seconds
            before raising :class:`~scoutd.errors.DaemonUnavailable`, instead
            of raising at once.
        max_answer_bytes: the longest line read from the daemon (default 1 GiB);
            past it, the peer is no daemon and the call raises ``DaemonUnavailable``.

    Resource handling: the connection opens at the first call (or on entering
    ``async with``) and closes with :meth:`aclose` or on leaving ``async with``.
    Closing it closes, in the daemon, every session opened on it.

    Error handling: a timed-out or cancelled request leaves the connection
    usable (its late answer is discarded); a lost connection fails every
    request in flight with :class:`~scoutd.errors.DaemonUnavailable`, and the
    next call connects anew (with ``reconnect``, waiting for the daemon to come
    back). A request in flight when the connection was lost may or may not
    have run: it is never sent again. Sessions do not survive their connection.
    """

    def __init__(
        self,
        socket_path: str | None = None,
        *,
        timeout: float | None = 60.0,
        reconnect: bool = False,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.socket_path = socket_path if socket_path is not None else default_socket_path()
        self.timeout = checked_timeout(timeout)
        self.max_answer_bytes = max_answer_bytes
        self.reconnect_on_loss = reconnect
        self._conn: AsyncConnection | None = None
        self._connect_lock = Lock()

    async def prepare_prompt(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        save_file: str | os.PathLike[str] | None = None,
        session: str | AsyncSession | None = None,
        config: Overrides = None,
        format: str | None = None,
        cache_control: bool | None = None,
    ) -> list[Any]:
        """The prepared prompt, computed by the daemon (see :func:`scoutd.prepare_prompt`).

        Without a session, the daemon answers with the indices of the messages
        it kept (docs/PROTOCOL.md, the indices answer): those come back as the
        caller's own message objects, as with the library in process.

        Raises:
            Aborted: an abort file was consumed for this save file or session.
            UnknownStrategy: a strategy name the daemon does not know.
            ConfigError: invalid per-call overrides.
        """
        session_id = session.id if isinstance(session, AsyncSession) else session
        params = prepare_params(
            messages, strategies, save_file, session_id, config, format, cache_control
        )
        if isinstance(session, AsyncSession):  # on its connection, as its own calls
            return (await session._call("prepare_prompt", params, Messages)).messages
        if session_id is not None:
            return (await self._call("prepare_prompt", params, Messages)).messages
        return (await self._prepare_whole(params, WholePrompt))[1]

    async def prepare(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        save_file: str | os.PathLike[str] | None = None,
        session: str | AsyncSession | None = None,
        config: Overrides = None,
        format: str | None = None,
        cache_control: bool | None = None,
    ) -> Prepared:
        """Like :meth:`prepare_prompt`, plus what each strategy did (``.report``)."""
        session_id = session.id if isinstance(session, AsyncSession) else session
        params = prepare_params(
            messages, strategies, save_file, session_id, config, format, cache_control
        )
        if isinstance(session, AsyncSession):
            return await session._call("prepare_prompt", params, Prepared)
        if session_id is not None:
            return await self._call("prepare_prompt", params, Prepared)
        answer, prompt = await self._prepare_whole(params, WholePrepared)
        return Prepared(messages=prompt, report=answer.report)

    async def open_session(
        self,
        save_file: str | os.PathLike[str],
        pid: int | None = None,
        format: str = "auto",
        *,
        label: str | None = None,
    ) -> AsyncSession:
        """Register a running agent session; prefer the :meth:`session` context manager.

        ``format`` is the message format of the session's conversation (docs/FORMATS.md);
        ``label`` names it for a fleet's ``session=LABEL`` commands (docs/OPERATIONS.md).
        """
        params = open_params(save_file, pid, format, label)
        conn = await self._connection()
        opened = await self._call("session.open", params, SessionOpenResult, conn)
        return AsyncSession(self, conn, opened.session, params.save_file, pid)

    @contextlib.asynccontextmanager
    async def session(
        self,
        save_file: str | os.PathLike[str],
        pid: int | None = None,
        format: str = "auto",
        *,
        label: str | None = None,
    ) -> AsyncIterator[AsyncSession]:
        """Open a session for ``save_file`` for the duration of an ``async with`` block."""
        opened = await self.open_session(save_file, pid, format, label=label)
        try:
            yield opened
        finally:
            await opened.aclose()

    async def status(self) -> dict[str, Any]:
        """The daemon's status: version, uptime, config, counts, latency."""
        return await self._call("status", StatusParams(), dict[str, Any])

    async def metrics(self) -> str:
        """The daemon's counters as Prometheus text exposition (docs/PROTOCOL.md, metrics)."""
        return (await self._call("metrics", MetricsParams(), MetricsResult)).text

    async def reload_config(self) -> int:
        """Make the daemon re-read its configuration now; returns the new generation.

        Raises:
            ConfigError: the file is invalid (the daemon keeps the last good config).
        """
        result = await self._call("config.reload", ConfigReloadParams(), ConfigReloadResult)
        return result.generation

    async def connect(self) -> None:
        """Connect now instead of at the first call (a no-op when connected)."""
        await self._connection()

    async def reconnect(self) -> None:
        """Drop the current connection (if any) and connect again, with backoff.

        Waits up to ``timeout`` seconds for the daemon to accept, whatever the
        ``reconnect`` setting. Requests in flight on the old connection fail;
        its sessions are lost.

        Raises:
            DaemonUnavailable: the daemon could not be reached in time.
        """
        if self._conn is not None:
            await self._lose(self._conn, "the client reconnected")
        await self._connection(retry=True)

    async def aclose(self) -> None:
        """Close the connection (the daemon closes its sessions). Idempotent."""
        if self._conn is not None:
            await self._lose(self._conn, "the client closed the connection")

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- connection ----------------------------------------------------------------------------

    async def _connection(self, *, retry: bool | None = None) -> AsyncConnection:
        """The current connection, or a new one; ``retry``: back off and try again.

        A connection the daemon has closed meanwhile (its ``idle_timeout``, or a
        restart) is replaced here, before a request is written into it: otherwise
        the first call after a quiet spell would fail with a broken pipe.
        """
        conn = self._conn
        if conn is not None:
            if not conn.inherited() and not conn.state.lost and not conn.stream.closed_by_peer():
                return conn
            await self._lose(conn, "the daemon closed the connection")
        deadline = deadline_in(self.timeout)
        if not await self._connect_lock.acquire(deadline):
            raise DaemonTimeout(f"the scoutd client was busy for {self.timeout} s")
        try:
            if self._conn is None:  # else another caller connected meanwhile
                retry = self.reconnect_on_loss if retry is None else retry
                stream = await open_stream(self.socket_path, deadline, retry)
                self._conn = AsyncConnection(
                    stream, self.socket_path, self.timeout, self.max_answer_bytes
                )
            return self._conn
        finally:
            self._connect_lock.release()

    async def _lose(self, conn: AsyncConnection, reason: str) -> None:
        """Give up a connection: its waiters and sessions learn why; close it."""
        if self._conn is conn:
            self._conn = None
        await conn.lose(reason)

    async def _call(
        self,
        method: str,
        params: msgspec.Struct,
        kind: type[T],
        conn: AsyncConnection | None = None,
        meanwhile: Callable[[], object] | None = None,
    ) -> T:
        """Send one request and wait for its answer, reading for everyone meanwhile
        (``meanwhile``: see :meth:`AsyncConnection.call`)."""
        conn = conn or await self._connection()
        return await conn.call(method, params, kind, meanwhile)

    async def _prepare_whole(
        self, params: PreparePromptParams, kind: type[W]
    ) -> tuple[W, list[Any]]:
        """A session-less prepare, answered with indices (docs/PROTOCOL.md) unless
        the daemon refuses them: then, once per connection, the whole answer.
        Returns the answer and the prompt rebuilt from it over the messages sent."""
        conn = await self._connection()
        asked, sent = whole_params(params, conn.state)
        try:
            answer = await self._call("prepare_prompt", asked, kind, conn)
        except RemoteError as exc:
            if not refused_indices(exc, asked, conn.state):
                raise
            whole = msgspec.structs.replace(asked, answer="messages")
            answer = await self._call("prepare_prompt", whole, kind, conn)
        try:
            return answer, answer.prompt(sent)
        except LayoutError as exc:  # a layout that does not fit what was sent
            raise await conn.unreadable("answer to prepare_prompt", exc) from None

    async def _close_session(self, session: AsyncSession) -> None:
        conn = session._conn
        conn.forget_session(session.id)
        if conn is not self._conn or conn.state.lost is not None:
            return  # the daemon closed it with its connection
        try:
            await self._call(
                "session.close", SessionCloseParams(session=session.id), dict[str, Any], conn
            )
        except RemoteError as exc:
            if exc.code != UNKNOWN_SESSION:
                raise
        except DaemonUnavailable:
            pass  # the daemon closes the sessions of a lost connection
        except DaemonTimeout:
            log.warning("scoutd did not confirm closing session %s", session.id)


class AsyncSession:
    """An agent session registered with the daemon.

    ``aborted`` and ``reason`` are live: the daemon pushes ``session.aborted``
    as soon as it consumes an abort file, and reading either attribute routes
    whatever has arrived on the connection, without waiting. A
    :meth:`prepare_prompt` of the session that fails with
    :class:`~scoutd.Aborted` sets them too. :meth:`wait_aborted` waits for the push.
    """

    def __init__(
        self,
        client: AsyncClient,
        conn: AsyncConnection,
        session_id: str,
        save_file: str,
        pid: int | None,
    ) -> None:
        self.id = session_id
        self.save_file = save_file
        self.pid = pid
        self._client = client
        self._conn = conn
        conn.sessions.add(session_id)  # its aborts are kept (see STRANGER_ABORTS)
        self._closed = False
        self._conversation = SentConversation(session_id)
        self._busy = Lock()  # one prepare at a time: the incremental state is shared

    @property
    def aborted(self) -> bool:
        """Whether the daemon aborted this session (checked anew at each read)."""
        return self.reason is not None

    @property
    def reason(self) -> str | None:
        """The abort's reason (the abort file's content), None while not aborted."""
        self._conn.read_nowait()
        return self._conn.state.abort_reason(self.id)

    @property
    def lost(self) -> bool:
        """Whether the connection that carried this session is gone."""
        self._conn.read_nowait()
        return self._conn.state.lost is not None

    async def prepare_prompt(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        config: Overrides = None,
    ) -> list[Any]:
        """:meth:`AsyncClient.prepare_prompt` for this session (and its save file).

        Incremental: the daemon keeps the conversation, so only the messages
        appended since the previous call are sent, and the answer comes back as a
        checked delta of the previous prepared prompt. Pass the whole, growing
        conversation every time; if an earlier message was replaced or its keys
        reassigned, the whole conversation is sent again.
        """
        return (await self.prepare(messages, strategies, config=config)).messages

    async def prepare(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        config: Overrides = None,
    ) -> Prepared:
        """:meth:`prepare_prompt` plus what each strategy did (``.report``)."""
        await self._busy.acquire(None)
        conversation = self._conversation
        try:
            whole = False
            while True:
                params = conversation.params(messages, strategies, config, whole=whole)
                check = partial(conversation.check, messages, params)
                try:
                    answer = await self._call("prepare_prompt", params, SessionAnswer, check)
                    if not conversation.stale:
                        return conversation.absorb(answer, messages, params)
                    conversation.discard(answer)  # prepared on messages changed since
                except RemoteError as exc:
                    if conversation.refused_replace(exc) or conversation.refused_redeliver(exc):
                        continue  # once: the same call again, without what was refused
                    if whole or not (about_base(exc) or conversation.stale):
                        raise
                except DeltaMismatch as exc:
                    if whole:  # no delta was asked for: not an answer of this protocol
                        raise await self._conn.unreadable("answer to prepare_prompt", exc) from None
                    conversation.unused()
                conversation.forget()
                whole = True
        except RemoteError:
            raise  # the daemon's own answer: the round delivered nothing
        except BaseException:
            conversation.unused()  # given up (a timeout, a cancellation): its notices again
            raise
        finally:
            self._busy.release()

    async def recall(self, handle: str | int | None = None, search: str | None = None) -> str:
        """The recall tool's answer from the conversation the daemon holds (docs/PROTOCOL.md,
        ``session.recall``); a bad handle or a search without a match gets an error text,
        and arguments that need no conversation are answered here, as
        :meth:`scoutd.Session.recall` answers them (the wire cannot carry them all).

        Raises:
            RemoteError: the daemon refused the call; a closed or unknown session is also
                :class:`~scoutd.errors.SessionClosed` (code -32006).
        """
        self._conn.of_session(self.id)  # a lost connection says so first
        params = recall_params(self.id, handle, search, closed=self._closed)
        if isinstance(params, str):
            return params
        return (await self._call("session.recall", params, SessionRecallResult)).text

    async def _call(
        self,
        method: str,
        params: msgspec.Struct,
        kind: type[T],
        meanwhile: Callable[[], object] | None = None,
    ) -> T:
        """A call of this session, on the connection it lives on (see ``of_session``)."""
        return await self._conn.of_session(self.id).call(method, params, kind, meanwhile)

    # The timeout parameter: an expired wait is an answer (False), not an
    # error, which a caller's own timeout could not express.
    async def wait_aborted(self, timeout: float | None) -> bool:  # noqa: ASYNC109
        """Wait up to ``timeout`` seconds (``None``: no limit) for an abort; return ``aborted``.

        Reads the connection meanwhile, for every caller that shares it.

        Raises:
            DaemonUnavailable: the connection was lost before an abort arrived.
        """
        return await self._conn.wait_aborted(self.id, deadline_in(timeout))

    async def aclose(self) -> None:
        """Tell the daemon the session is over (idempotent; bounded even when cancelled)."""
        if self._closed:
            return
        self._closed = True
        with close_scope(CLOSE_GRACE):
            await self._client._close_session(self)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
