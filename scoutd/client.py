"""Clients of the scoutd daemon: :class:`Client` (blocking) and :class:`AsyncClient` (anyio).

Both speak the line-delimited JSON-RPC 2.0 protocol of docs/PROTOCOL.md over the
daemon's Unix socket and mirror the library: ``prepare_prompt`` and ``prepare``
take the arguments of :func:`scoutd.prepare_prompt` (strategy *names* only: no
code goes over the wire) and raise the same errors (:class:`~scoutd.Aborted`,
:class:`~scoutd.UnknownStrategy`, :class:`~scoutd.ConfigError`). Anything else the
daemon refuses is a :class:`~scoutd.errors.RemoteError`; a daemon that cannot be
reached is :class:`~scoutd.errors.DaemonUnavailable`, one that does not answer in
time :class:`~scoutd.errors.DaemonTimeout`.

The daemon pushes ``session.aborted`` notifications between responses, so every
line read is dispatched: responses by ``id``, notifications to the open session
they name. A lost connection is not resumed in place: the next call connects
again, and the sessions of the old connection (which the daemon closed with it)
report the loss.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import random
import select
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, NoReturn, TypeVar

import anyio
import anyio.abc
import msgspec

from .config import Config, PromptConfig
from .delta import DeltaDecoder, DeltaMismatch, PromptDelta
from .discovery import discover_socket
from .errors import (
    Aborted,
    ConfigError,
    DaemonTimeout,
    DaemonUnavailable,
    RemoteError,
    UnknownStrategy,
)
from .formats import check_format_name
from .prepare import Prepared
from .protocol import (
    ABORTED,
    CONFIG_INVALID,
    INVALID_PARAMS,
    TOO_LARGE,
    UNKNOWN_SESSION,
    UNKNOWN_STRATEGY,
    ConfigReloadParams,
    ConfigReloadResult,
    ErrorObject,
    MetricsParams,
    MetricsResult,
    PreparePromptParams,
    SessionAbortedParams,
    SessionCloseParams,
    SessionOpenParams,
    SessionOpenResult,
    StatusParams,
)
from .strategies.report import StrategyReport

__all__ = ["AsyncClient", "AsyncSession", "Client", "Session", "default_socket_path"]

log = logging.getLogger("scoutd.client")

T = TypeVar("T")
Overrides = Config | PromptConfig | Mapping[str, Any] | None

SOCKET_ENV = "SCOUTD_SOCKET"

# One recv() asks for this much: a multi-megabyte prompt comes back in few
# system calls, and it costs nothing per idle connection.
RECV_SIZE = 256 * 1024

# A request line is never cut short by cancellation (a partial line would
# corrupt the stream for every other request on the connection); a send stuck
# this long means the daemon stopped reading, and the connection is given up.
SEND_GRACE = 30.0

# After a failed send, how long to look for the error line of a daemon that
# refused the connection: it was written before the close, so it is there at once.
REFUSAL_READ = 1.0

# The blocking Session.wait_aborted reads the socket in slices this long, so a
# request from another thread waits at most this much for its turn.
WAIT_SLICE = 0.05

# Closing a session on leaving its context manager is bounded even when the
# block was cancelled: the daemon also closes it with the connection.
CLOSE_GRACE = 5.0

# Reconnecting (``reconnect=True`` or ``reconnect()``): the first retry comes after
# RECONNECT_INITIAL_DELAY, each next one after twice as long, never more than
# RECONNECT_MAX_DELAY (a restarting daemon answers within a second or two; a
# longer gap only delays the caller), each delay with up to 50 % random jitter so
# that many clients of one restarted daemon do not come back in lockstep. The
# whole wait is bounded by the client's ``timeout``.
RECONNECT_INITIAL_DELAY = 0.05
RECONNECT_MAX_DELAY = 2.0
# connect() errors that mean "no daemon right now, maybe soon": the socket file is
# missing (between a stop and the next start), nobody listens on it (a stale file),
# or the backlog is full.
RECONNECT_ERRNOS = frozenset({errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN})


# -- wire format -------------------------------------------------------------------------


class _Request(msgspec.Struct):
    jsonrpc: str
    id: int
    method: str
    params: msgspec.Struct


class _Incoming(msgspec.Struct):
    """Any line from the daemon: a response (``result`` or ``error``) or a notification.

    ``result`` and ``params`` stay raw so that each call decodes its own result
    type; an empty :class:`msgspec.Raw` means the member was absent.
    """

    id: int | str | None = None
    result: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    error: ErrorObject | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _Messages(msgspec.Struct):
    """The part of a ``prepare_prompt`` result that ``prepare_prompt`` returns."""

    messages: list[Any]


class _SessionAnswer(msgspec.Struct):
    """A session's ``prepare_prompt`` result: the whole prompt, or a delta."""

    report: list[StrategyReport]
    messages: list[Any] | None = None
    keep: int | None = None
    append: list[Any] | None = None
    checksum: int | None = None


def _enc_hook(value: Any) -> Any:
    # Messages may be any mapping, as for the library; dicts take the fast path.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot send a {type(value).__name__} to the daemon")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
_incoming = msgspec.json.Decoder(_Incoming)
_aborted_params = msgspec.json.Decoder(SessionAbortedParams)


def _encode(request_id: int, method: str, params: msgspec.Struct) -> bytes:
    buffer = bytearray()
    _encoder.encode_into(_Request("2.0", request_id, method, params), buffer)
    buffer += b"\n"
    return bytes(buffer)


class _LineSplitter:
    """Cuts a byte stream into ``\\n``-terminated lines, keeping the partial tail.

    The tail is scanned once: a line of many megabytes arriving in small chunks
    costs linear time, not quadratic.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        lines: list[bytes] = []
        start = 0
        end = buffer.find(b"\n", self._scanned)
        while end >= 0:
            lines.append(bytes(buffer[start:end]))
            start = end + 1
            end = buffer.find(b"\n", start)
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        return lines


def _backoff() -> Iterator[float]:
    """Delays between connection attempts: exponential, capped, jittered."""
    delay = RECONNECT_INITIAL_DELAY
    while True:
        yield delay * random.uniform(0.5, 1.0)
        delay = min(delay * 2, RECONNECT_MAX_DELAY)


def _retry_connect(exc: BaseException) -> bool:
    """Whether a failed connect is worth retrying (the daemon may be restarting)."""
    return isinstance(exc, OSError) and exc.errno in RECONNECT_ERRNOS


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the daemon has closed this connection (end of stream waiting to be read).

    Pending lines (a notification) mean it is still open; only a bare end of
    stream, or an error, counts as closed. Never blocks.
    """
    try:
        poller = select.poll()  # not sock.recv: with a timeout set, Python would wait
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False  # nothing to read: open and quiet
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:  # reset, or already closed
        return True


def _unavailable(socket_path: str, exc: BaseException, attempts: int) -> DaemonUnavailable:
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or "timed out"
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    return DaemonUnavailable(
        f"cannot connect to scoutd at {socket_path}: {reason}{tried} (is the daemon running?)"
    )


def default_socket_path() -> str:
    """The socket used when none is given (docs/OPERATIONS.md, "Finding the daemon")."""
    return discover_socket()


def _overrides(config: Overrides) -> dict[str, Any] | None:
    """Per-call ``[prompt]`` overrides as sent over the wire."""
    if config is None:
        return None
    if isinstance(config, Config):
        config = config.prompt
    if isinstance(config, PromptConfig):
        values: dict[str, Any] = msgspec.to_builtins(config)
        return values
    if isinstance(config, Mapping):
        return dict(config)
    raise TypeError(
        f"config must be a mapping of [prompt] overrides or a PromptConfig, "
        f"got {type(config).__name__}"
    )


def _prepare_params(
    messages: Sequence[Any],
    strategies: str | Sequence[str] | None,
    save_file: str | os.PathLike[str] | None,
    session: str | _SessionBase | None,
    config: Overrides,
    format: str | None = None,
    cache_control: bool | None = None,
) -> PreparePromptParams:
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
    names: str | list[str] | None = None
    if isinstance(strategies, str):
        names = strategies
    elif strategies is not None:
        if not isinstance(strategies, Sequence) or not all(isinstance(s, str) for s in strategies):
            raise TypeError(
                "strategies must be a comma-separated string or a list of names "
                "(a callable cannot be sent to the daemon)"
            )
        names = list(strategies)
    return PreparePromptParams(
        messages=messages,  # type: ignore[arg-type]  # encoded as is, any sequence of mappings
        strategies=names,
        save_file=None if save_file is None else os.fspath(save_file),
        session=session.id if isinstance(session, _SessionBase) else session,
        config=_overrides(config),
        format=None if format is None else check_format_name(format),  # type: ignore[arg-type]
        cache_control=cache_control,
    )


def _remote_exception(error: ErrorObject) -> Exception:
    """The library exception for an error response (docs/PROTOCOL.md, error codes)."""
    data = error.data if isinstance(error.data, dict) else {}
    if error.code == ABORTED:
        reason = data.get("reason")
        return Aborted(reason if isinstance(reason, str) else error.message)
    if error.code == UNKNOWN_STRATEGY:
        name, available = data.get("name"), data.get("available")
        if isinstance(name, str) and isinstance(available, list):
            return UnknownStrategy(name, [str(each) for each in available])
    if error.code == CONFIG_INVALID:
        detail = data.get("error")
        return ConfigError(detail if isinstance(detail, str) else error.message)
    if error.code == INVALID_PARAMS and _about_overrides(data.get("path")):
        detail = data.get("error")
        return ConfigError(detail if isinstance(detail, str) else error.message)
    return RemoteError(error.code, error.message, error.data)


def _about_overrides(path: Any) -> bool:
    """Whether an INVALID_PARAMS ``data.path`` points into the per-call ``config``."""
    return isinstance(path, str) and (
        path == "$.params.config" or path.startswith(("$.params.config.", "$.params.config["))
    )


def _raise_remote(registry: _Registry, params: msgspec.Struct, error: ErrorObject) -> NoReturn:
    """Raise the exception for an error answer; an abort also marks the session it names."""
    exception = _remote_exception(error)
    session = params.session if isinstance(params, PreparePromptParams) else None
    if isinstance(exception, Aborted) and session is not None:
        registry.aborted(session, exception.reason)
    raise exception


def _about_base(exc: RemoteError) -> bool:
    """Whether an error says the session's conversation is not what we believed."""
    data = exc.data if isinstance(exc.data, dict) else {}
    return exc.code == INVALID_PARAMS and data.get("path") == "$.params.base"


def _too_large_limit(error: ErrorObject) -> int | None:
    """The line limit of a TOO_LARGE error about one of our lines (else ``None``)."""
    if error.code != TOO_LARGE or not isinstance(error.data, dict):
        return None
    limit = error.data.get("limit")
    return limit if isinstance(limit, int) else None


# -- sessions, shared by both clients ------------------------------------------------------


class _SessionBase:
    """What both session classes expose: ``id``, ``aborted``, ``reason``, ``lost``.

    It also holds the incremental state: how much of the caller's conversation
    the daemon already has, and the prepared prompt the deltas apply to.
    """

    def __init__(
        self, registry: _Registry, session_id: str, save_file: str, pid: int | None
    ) -> None:
        self.id = session_id
        self.save_file = save_file
        self.pid = pid
        self.aborted = False
        self.reason: str | None = None
        self._registry = registry
        self._closed = False
        self._sent = 0  # conversation messages the daemon holds
        # What was sent, message by message, to notice a conversation that changed.
        self._seen: list[tuple[Any, Any]] = []
        self._prompt = DeltaDecoder()

    @property
    def lost(self) -> bool:
        """Whether the connection that carried this session is gone."""
        return self._registry.lost is not None

    def _mark_aborted(self, reason: str) -> None:
        if not self.aborted:
            self.reason, self.aborted = reason, True
        self._wake()

    def _wake(self) -> None:
        """Wake whoever waits for a change (abort or loss)."""

    def _lost_error(self, socket_path: str) -> DaemonUnavailable:
        return DaemonUnavailable(
            f"connection to scoutd at {socket_path} lost: {self._registry.lost}"
        )

    def _params(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None,
        config: Overrides,
        *,
        whole: bool,
    ) -> PreparePromptParams:
        """Only what was appended since the last call, unless ``whole`` (or it changed)."""
        params = _prepare_params(messages, strategies, None, self.id, config)
        sent = self._sent
        if not whole and 0 < sent <= len(messages) and self._unchanged(messages):
            return msgspec.structs.replace(
                params, messages=None, append=list(messages[sent:]), base=sent, delta=True
            )
        return msgspec.structs.replace(params, delta=not whole)

    def _unchanged(self, messages: Sequence[Any]) -> bool:
        """Whether the first messages are still the very ones sent, with the same values.

        O(messages) identity and shallow comparisons, no encoding: a message that
        was replaced, or whose keys were reassigned in place, is noticed.
        """
        return all(
            message is sent and _shape(message) == shape
            for message, (sent, shape) in zip(messages, self._seen, strict=False)
        )

    def _absorb(
        self, answer: _SessionAnswer, messages: Sequence[Any], params: PreparePromptParams
    ) -> Prepared:
        """Apply the answer to the held prompt; remember what the daemon now has."""
        if answer.keep is not None:
            prompt = self._prompt.apply(
                PromptDelta(
                    keep=answer.keep, append=answer.append or [], checksum=answer.checksum or 0
                )
            )
        else:
            prompt = self._prompt.full(answer.messages or [])
        start = self._sent if params.append is not None else 0
        del self._seen[start:]
        self._seen += [(message, _shape(message)) for message in messages[start:]]
        self._sent = len(messages)
        return Prepared(messages=prompt, report=answer.report)

    def _forget(self) -> None:
        """The daemon's conversation is not the one we believed: start over."""
        self._sent = 0
        self._seen.clear()


def _shape(message: Any) -> Any:
    """A message's top-level values, to compare with what was sent (see ``_unchanged``)."""
    if type(message) is dict:
        return tuple(message.items())
    return None


class _Registry:
    """The sessions opened on one connection, and the notifications that name them."""

    def __init__(self) -> None:
        self.sessions: dict[str, _SessionBase] = {}
        # session.aborted that arrived before the session.open answer was handled
        self.unclaimed: dict[str, str] = {}
        self.lost: str | None = None

    def register(self, session: _SessionBase) -> None:
        self.sessions[session.id] = session
        reason = self.unclaimed.pop(session.id, None)
        if reason is not None:
            session._mark_aborted(reason)
        if self.lost is not None:
            session._wake()

    def forget(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)
        self.unclaimed.pop(session_id, None)

    def aborted(self, session_id: str, reason: str) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            self.unclaimed[session_id] = reason
        else:
            session._mark_aborted(reason)

    def notification(self, message: _Incoming) -> None:
        if message.method != "session.aborted":
            log.debug("ignoring notification %r", message.method)
            return
        try:
            params = _aborted_params.decode(message.params)
        except msgspec.DecodeError:
            log.warning("ignoring a malformed session.aborted notification")
            return
        self.aborted(params.session, params.reason)

    def mark_lost(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
        for session in self.sessions.values():
            session._wake()


# -- blocking client -----------------------------------------------------------------------


class _Connection(_Registry):
    """One socket to the daemon (blocking client)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.splitter = _LineSplitter()
        self.lines: deque[bytes] = deque()


class Client:
    """A blocking client of the scoutd daemon (plain :mod:`socket`, thread-safe).

    Args:
        socket_path: the daemon's socket; default: found as docs/OPERATIONS.md
            says ("Finding the daemon": ``$SCOUTD_SOCKET``, the configured
            ``[daemon] socket_path``, the user's socket, the system socket).
        timeout: seconds allowed for connecting and for each answer (``None``:
            no limit).
        reconnect: when the daemon cannot be reached (not running, restarting),
            keep trying to connect with exponential backoff (see
            :data:`RECONNECT_INITIAL_DELAY`) for up to ``timeout`` seconds before
            raising :class:`~scoutd.errors.DaemonUnavailable`, instead of
            raising at once.

    Resource handling: the connection opens at the first call (or on entering
    ``with``) and closes with :meth:`close` or on leaving ``with``. Closing it
    closes, in the daemon, every session opened on it.

    Error handling: one request is in flight at a time (threads take turns). A
    timeout leaves the connection usable (a late answer is discarded); a lost
    connection raises :class:`~scoutd.errors.DaemonUnavailable`, and the next
    call connects anew (with ``reconnect``, waiting for the daemon to come
    back). A request in flight when the connection was lost may or may not have
    run: it is never sent again. Sessions do not survive their connection: open
    them again after a loss.
    """

    def __init__(
        self,
        socket_path: str | None = None,
        *,
        timeout: float | None = 60.0,
        reconnect: bool = False,
    ) -> None:
        self.socket_path = socket_path if socket_path is not None else default_socket_path()
        self.timeout = timeout
        self.reconnect_on_loss = reconnect
        self._lock = threading.RLock()
        self._conn: _Connection | None = None
        self._ids = itertools.count(1)

    def prepare_prompt(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        save_file: str | os.PathLike[str] | None = None,
        session: str | Session | None = None,
        config: Overrides = None,
        format: str | None = None,
        cache_control: bool | None = None,
    ) -> list[Any]:
        """The prepared prompt, computed by the daemon (see :func:`scoutd.prepare_prompt`).

        Raises:
            Aborted: an abort file was consumed for this save file or session.
            UnknownStrategy: a strategy name the daemon does not know.
            ConfigError: invalid per-call overrides.
        """
        params = _prepare_params(
            messages, strategies, save_file, session, config, format, cache_control
        )
        return self._call("prepare_prompt", params, _Messages).messages

    def prepare(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        save_file: str | os.PathLike[str] | None = None,
        session: str | Session | None = None,
        config: Overrides = None,
        format: str | None = None,
        cache_control: bool | None = None,
    ) -> Prepared:
        """Like :meth:`prepare_prompt`, plus what each strategy did (``.report``)."""
        params = _prepare_params(
            messages, strategies, save_file, session, config, format, cache_control
        )
        return self._call("prepare_prompt", params, Prepared)

    def open_session(
        self, save_file: str | os.PathLike[str], pid: int | None = None, format: str = "auto"
    ) -> Session:
        """Register a running agent session; prefer the :meth:`session` context manager.

        ``format`` is the message format of the session's conversation (docs/FORMATS.md).
        """
        params = SessionOpenParams(
            save_file=os.fspath(save_file),
            pid=pid,
            format=check_format_name(format),  # type: ignore[arg-type]
        )
        with self._lock:
            opened = self._call("session.open", params, SessionOpenResult)
            assert self._conn is not None  # a successful call leaves it connected
            session = Session(self, self._conn, opened.session, params.save_file, pid)
            self._conn.register(session)
        return session

    @contextlib.contextmanager
    def session(
        self, save_file: str | os.PathLike[str], pid: int | None = None, format: str = "auto"
    ) -> Iterator[Session]:
        """Open a session for ``save_file`` for the duration of a ``with`` block."""
        opened = self.open_session(save_file, pid, format)
        try:
            yield opened
        finally:
            opened.close()

    def status(self) -> dict[str, Any]:
        """The daemon's status: version, uptime, config, counts, latency."""
        return self._call("status", StatusParams(), dict[str, Any])

    def metrics(self) -> str:
        """The daemon's counters as Prometheus text exposition (docs/PROTOCOL.md, metrics)."""
        return self._call("metrics", MetricsParams(), MetricsResult).text

    def reload_config(self) -> int:
        """Make the daemon re-read its configuration now; returns the new generation.

        Raises:
            ConfigError: the file is invalid (the daemon keeps the last good config).
        """
        return self._call("config.reload", ConfigReloadParams(), ConfigReloadResult).generation

    def connect(self) -> None:
        """Connect now instead of at the first call (a no-op when connected)."""
        with self._lock:
            self._connection()

    def reconnect(self) -> None:
        """Drop the current connection (if any) and connect again, with backoff.

        Waits up to ``timeout`` seconds for the daemon to accept, whatever the
        ``reconnect`` setting. Sessions of the old connection are lost.

        Raises:
            DaemonUnavailable: the daemon could not be reached in time.
        """
        with self._lock:
            if self._conn is not None:
                self._lose(self._conn, "the client reconnected")
            self._connection(retry=True)

    def close(self) -> None:
        """Close the connection (the daemon closes its sessions). Idempotent."""
        with self._lock:
            if self._conn is not None:
                self._lose(self._conn, "the client closed the connection")

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing (callers hold self._lock) ------------------------------------------------

    def _connection(self, *, retry: bool | None = None) -> _Connection:
        """The current connection, or a new one; ``retry``: back off and try again.

        A connection the daemon has closed meanwhile (its ``idle_timeout``, or a
        restart) is replaced here, before a request is written into it: otherwise
        the first call after a quiet spell would fail with a broken pipe.
        """
        if self._conn is not None:
            if not _closed_by_peer(self._conn.sock):
                return self._conn
            self._lose(self._conn, "the daemon closed the connection")
        retry = self.reconnect_on_loss if retry is None else retry
        deadline = _deadline(self.timeout)
        delays = _backoff()
        attempts = 0
        while True:
            attempts += 1
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(_remaining(deadline))
                sock.connect(self.socket_path)
            except OSError as exc:
                sock.close()
                remaining = _remaining(deadline)
                if retry and _retry_connect(exc) and (remaining is None or remaining > 0):
                    delay = next(delays) if remaining is None else min(next(delays), remaining)
                    log.debug("scoutd at %s: %s; retrying in %.2f s", self.socket_path, exc, delay)
                    time.sleep(delay)  # the last attempt comes at the deadline
                    continue
                raise _unavailable(self.socket_path, exc, attempts) from exc
            self._conn = _Connection(sock)
            return self._conn

    def _lose(self, conn: _Connection, reason: str) -> None:
        """Give up a connection: close it and tell its sessions."""
        conn.mark_lost(reason)
        with contextlib.suppress(OSError):
            conn.sock.close()
        if self._conn is conn:
            self._conn = None

    def _broken(self, conn: _Connection, reason: str, cause: BaseException | None) -> NoReturn:
        self._lose(conn, reason)
        raise DaemonUnavailable(f"connection to scoutd at {self.socket_path} lost: {reason}") from (
            cause
        )

    def _call(self, method: str, params: msgspec.Struct, kind: type[T]) -> T:
        """Send one request and read until its answer, dispatching what comes between."""
        deadline = _deadline(self.timeout)
        if not self._lock.acquire(timeout=-1 if self.timeout is None else self.timeout):
            raise DaemonTimeout(f"the scoutd client was busy for {self.timeout} s")
        try:
            conn = self._connection()
            request_id = next(self._ids)
            line = _encode(request_id, method, params)
            try:
                conn.sock.settimeout(_remaining(deadline))
                conn.sock.sendall(line)
            except TimeoutError as exc:
                # part of the line may be out: the stream is unusable now
                self._lose(conn, "timed out while sending a request")
                raise DaemonTimeout(
                    f"scoutd at {self.socket_path} did not take a request within {self.timeout} s"
                ) from exc
            except OSError as exc:
                refusal = self._refusal(conn, deadline)
                if refusal is not None:  # refused and closed before the line went out
                    self._lose(conn, "the daemon refused the connection")
                    _raise_remote(conn, params, refusal)
                self._broken(conn, exc.strerror or str(exc), exc)
            except BaseException:
                self._lose(conn, "interrupted while sending a request")
                raise
            while True:
                message = self._read_message(conn, deadline)
                if message is None:
                    raise DaemonTimeout(
                        f"scoutd at {self.socket_path} did not answer {method} "
                        f"within {self.timeout} s"
                    )
                if message.id == request_id:
                    break
                if message.id is None and message.error is not None:
                    # not tied to a request: ours unless it is about a longer line
                    limit = _too_large_limit(message.error)
                    if limit is None or len(line) - 1 > limit:
                        break
                log.debug("discarding a late answer to request %r", message.id)
        finally:
            self._lock.release()
        if message.error is not None:
            _raise_remote(conn, params, message.error)
        return msgspec.json.decode(message.result, type=kind)

    def _refusal(self, conn: _Connection, deadline: float | None) -> ErrorObject | None:
        """The error a daemon wrote before closing a connection it refused, if any.

        A refused peer (not allowed, too many connections) gets one error line
        and a closed socket; a request written after the close fails with a
        broken pipe, but the refusal is still there to read.
        """
        data = b""
        with contextlib.suppress(OSError):
            conn.sock.settimeout(min(_remaining(deadline) or REFUSAL_READ, REFUSAL_READ))
            while b"\n" not in data and len(data) < RECV_SIZE:
                chunk = conn.sock.recv(RECV_SIZE)
                if not chunk:
                    break
                data += chunk
        try:
            message = _incoming.decode(data.partition(b"\n")[0])
        except msgspec.DecodeError:
            return None
        return message.error if message.id is None and message.method is None else None

    def _read_message(
        self,
        conn: _Connection,
        deadline: float | None,
        until: Callable[[], bool] | None = None,
    ) -> _Incoming | None:
        """The next response on ``conn``; notifications met on the way are dispatched.

        Returns ``None`` when ``deadline`` passes first, or after a notification
        that makes ``until()`` true.
        """
        while True:
            while not conn.lines:
                remaining = _remaining(deadline)
                if remaining is not None and remaining <= 0:
                    return None
                try:
                    conn.sock.settimeout(remaining)
                    data = conn.sock.recv(RECV_SIZE)
                except TimeoutError:
                    return None
                except OSError as exc:
                    self._broken(conn, exc.strerror or str(exc), exc)
                if not data:
                    self._broken(conn, "the daemon closed the connection", None)
                conn.lines.extend(conn.splitter.feed(data))
            try:
                message = _incoming.decode(conn.lines.popleft())
            except msgspec.DecodeError as exc:
                self._broken(conn, f"invalid line from the daemon: {exc}", exc)
            if message.method is None:
                return message
            conn.notification(message)
            if until is not None and until():
                return None

    def _poll(self, session: Session, seconds: float) -> None:
        """Read for up to ``seconds`` unless another thread is using the socket."""
        if not self._lock.acquire(timeout=seconds):
            return
        try:
            if self._conn is session._registry:
                message = self._read_message(
                    self._conn, _deadline(seconds), lambda: session.aborted
                )
                if message is not None:
                    log.debug("discarding a late answer to request %r", message.id)
        except DaemonUnavailable:
            pass  # the session is marked lost
        finally:
            self._lock.release()

    def _close_session(self, session: Session) -> None:
        with self._lock:
            session._registry.forget(session.id)
            if self._conn is not session._registry:
                return  # the daemon closed it with its connection
            try:
                self._call("session.close", SessionCloseParams(session=session.id), dict[str, Any])
            except RemoteError as exc:
                if exc.code != UNKNOWN_SESSION:
                    raise
            except DaemonUnavailable:
                pass  # the daemon closes the sessions of a lost connection
            except DaemonTimeout:
                log.warning("scoutd did not confirm closing session %s", session.id)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


class Session(_SessionBase):
    """An agent session registered with the daemon (blocking client).

    ``aborted`` and ``reason`` are set when the daemon's ``session.aborted`` is
    read (by any call on the client, or by :meth:`wait_aborted`), or when a
    :meth:`prepare_prompt` of the session fails with :class:`~scoutd.Aborted`.
    """

    def __init__(
        self, client: Client, conn: _Connection, session_id: str, save_file: str, pid: int | None
    ) -> None:
        super().__init__(conn, session_id, save_file, pid)
        self._client = client

    def prepare_prompt(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        config: Overrides = None,
    ) -> list[Any]:
        """:meth:`Client.prepare_prompt` for this session (and its save file).

        Incremental: the daemon keeps the conversation, so only the messages
        appended since the previous call are sent, and the answer comes back as a
        checked delta of the previous prepared prompt. Pass the whole, growing
        conversation every time; if an earlier message was replaced or its keys
        reassigned, the whole conversation is sent again.
        """
        return self.prepare(messages, strategies, config=config).messages

    def prepare(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        config: Overrides = None,
    ) -> Prepared:
        """:meth:`prepare_prompt` plus what each strategy did (``.report``)."""
        for whole in (False, True):
            params = self._params(messages, strategies, config, whole=whole)
            try:
                answer = self._client._call("prepare_prompt", params, _SessionAnswer)
                return self._absorb(answer, messages, params)
            except RemoteError as exc:
                if whole or not _about_base(exc):
                    raise
            except DeltaMismatch:
                if whole:
                    raise
            self._forget()
        raise AssertionError("unreachable")

    def wait_aborted(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: no limit) for an abort; return ``aborted``.

        Reads the socket meanwhile, whenever no other call is using it.

        Raises:
            DaemonUnavailable: the connection was lost before an abort arrived.
        """
        deadline = _deadline(timeout)
        while not self.aborted:
            if self.lost:
                raise self._lost_error(self._client.socket_path)
            remaining = _remaining(deadline)
            if remaining is not None and remaining <= 0:
                break
            self._client._poll(
                self, WAIT_SLICE if remaining is None else min(WAIT_SLICE, remaining)
            )
        return self.aborted

    def close(self) -> None:
        """Tell the daemon the session is over (idempotent)."""
        if not self._closed:
            self._closed = True
            self._client._close_session(self)

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- async client --------------------------------------------------------------------------


class _Pending:
    """Where the reader task delivers one request's answer."""

    __slots__ = ("done", "error", "message", "size")

    def __init__(self, size: int) -> None:
        self.size = size  # bytes of the request line, to place a TOO_LARGE without id
        self.done = anyio.Event()
        self.message: _Incoming | None = None
        self.error: Exception | None = None

    def deliver(self, message: _Incoming | None, error: Exception | None = None) -> None:
        if not self.done.is_set():
            self.message, self.error = message, error
            self.done.set()


class _AsyncConnection(_Registry):
    """One socket to the daemon and the requests waiting on it."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        super().__init__()
        self.stream = stream
        self.send_lock = anyio.Lock()
        self.pending: dict[int, _Pending] = {}

    def dispatch(self, message: _Incoming) -> None:
        if message.method is not None:
            self.notification(message)
        elif isinstance(message.id, int) and message.id in self.pending:
            self.pending[message.id].deliver(message)
        elif message.id is None and message.error is not None:
            # An error the daemon could not tie to a request: an oversized line
            # (the oldest waiting request that long; the connection goes on),
            # else a refusal of the whole connection, for every waiting request.
            limit = _too_large_limit(message.error)
            waiting = [p for p in self.pending.values() if not p.done.is_set()]
            if limit is not None:
                waiting = [p for p in waiting if p.size - 1 > limit][:1] or waiting
            for pending in waiting:
                pending.deliver(message)
        else:
            log.debug("discarding a late answer to request %r", message.id)


class AsyncClient:
    """An anyio client of the scoutd daemon; concurrent requests share one connection.

    Use it as ``async with AsyncClient() as client:``. A reader task in the
    client's own task group delivers each answer to the request with its ``id``
    and each ``session.aborted`` notification to its session, as they arrive.

    Args:
        socket_path: the daemon's socket; default: found as docs/OPERATIONS.md
            says ("Finding the daemon": ``$SCOUTD_SOCKET``, the configured
            ``[daemon] socket_path``, the user's socket, the system socket).
        timeout: seconds allowed for connecting and for each answer (``None``:
            no limit).
        reconnect: when the daemon cannot be reached (not running, restarting),
            keep trying to connect with exponential backoff for up to
            ``timeout`` seconds, as :class:`Client` does.

    Error handling: a lost connection fails every request in flight with
    :class:`~scoutd.errors.DaemonUnavailable` (they are never sent again); the
    next call connects anew (with ``reconnect``, waiting for the daemon to come
    back). A cancelled or timed-out request leaves the connection usable (its
    answer is discarded when it comes). Sessions do not survive their connection.
    """

    def __init__(
        self,
        socket_path: str | None = None,
        *,
        timeout: float | None = 60.0,
        reconnect: bool = False,
    ) -> None:
        self.socket_path = socket_path if socket_path is not None else default_socket_path()
        self.timeout = timeout
        self.reconnect_on_loss = reconnect
        self._ids = itertools.count(1)
        self._conn: _AsyncConnection | None = None
        self._connect_lock = anyio.Lock()
        self._stack: contextlib.AsyncExitStack | None = None
        self._tasks: anyio.abc.TaskGroup | None = None

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
        """The prepared prompt, computed by the daemon (see :meth:`Client.prepare_prompt`)."""
        params = _prepare_params(
            messages, strategies, save_file, session, config, format, cache_control
        )
        return (await self._call("prepare_prompt", params, _Messages)).messages

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
        params = _prepare_params(
            messages, strategies, save_file, session, config, format, cache_control
        )
        return await self._call("prepare_prompt", params, Prepared)

    async def open_session(
        self, save_file: str | os.PathLike[str], pid: int | None = None, format: str = "auto"
    ) -> AsyncSession:
        """Register a running agent session; prefer the :meth:`session` context manager.

        ``format`` is the message format of the session's conversation (docs/FORMATS.md).
        """
        params = SessionOpenParams(
            save_file=os.fspath(save_file),
            pid=pid,
            format=check_format_name(format),  # type: ignore[arg-type]
        )
        conn = await self._connection()
        opened = await self._call("session.open", params, SessionOpenResult, conn)
        session = AsyncSession(self, conn, opened.session, params.save_file, pid)
        conn.register(session)
        return session

    @contextlib.asynccontextmanager
    async def session(
        self, save_file: str | os.PathLike[str], pid: int | None = None, format: str = "auto"
    ) -> AsyncIterator[AsyncSession]:
        """Open a session for ``save_file`` for the duration of an ``async with`` block."""
        opened = await self.open_session(save_file, pid, format)
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
        """Make the daemon re-read its configuration now; returns the new generation."""
        result = await self._call("config.reload", ConfigReloadParams(), ConfigReloadResult)
        return result.generation

    async def aclose(self) -> None:
        """Close the connection; requests in flight fail. Idempotent."""
        if self._conn is not None:
            await self._lose(self._conn, "the client closed the connection")

    async def __aenter__(self) -> AsyncClient:
        if self._stack is not None:
            raise RuntimeError("this AsyncClient is already in use")
        # Connect first: an error raised inside the task group would come out
        # wrapped in an ExceptionGroup.
        stream = await self._open_stream()
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(stream.aclose)
            self._tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.push_async_callback(self.aclose)
            self._adopt(stream, self._tasks)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack, self._tasks = self._stack, None, None
        if stack is None:
            return None
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The task group wraps the block's own exception; the reader task
            # never raises, so a group of just that exception is the block's
            # error, left to propagate as itself.
            if exc is not None and group.exceptions == (exc,):
                return False
            raise

    # -- plumbing ----------------------------------------------------------------------------

    async def _open_stream(self, *, retry: bool | None = None) -> anyio.abc.ByteStream:
        """Connect; ``retry`` (default: the ``reconnect`` setting): back off and try again."""
        retry = self.reconnect_on_loss if retry is None else retry
        deadline = _deadline(self.timeout)
        delays = _backoff()
        attempts = 0
        while True:
            attempts += 1
            try:
                with anyio.fail_after(_remaining(deadline)):
                    return await anyio.connect_unix(self.socket_path)
            except (OSError, TimeoutError) as exc:
                remaining = _remaining(deadline)
                if retry and _retry_connect(exc) and (remaining is None or remaining > 0):
                    delay = next(delays) if remaining is None else min(next(delays), remaining)
                    log.debug("scoutd at %s: %s; retrying in %.2f s", self.socket_path, exc, delay)
                    await anyio.sleep(delay)  # the last attempt comes at the deadline
                    continue
                raise _unavailable(self.socket_path, exc, attempts) from exc

    async def reconnect(self) -> None:
        """Drop the current connection (if any) and connect again, with backoff.

        Waits up to ``timeout`` seconds for the daemon, whatever the ``reconnect``
        setting. Requests in flight on the old connection fail; its sessions are lost.

        Raises:
            DaemonUnavailable: the daemon could not be reached in time.
        """
        if self._tasks is None:
            raise RuntimeError("use AsyncClient as `async with AsyncClient(...) as client:`")
        if self._conn is not None:
            await self._lose(self._conn, "the client reconnected")
        async with self._connect_lock:
            if self._conn is None:
                self._adopt(await self._open_stream(retry=True), self._tasks)

    def _adopt(self, stream: anyio.abc.ByteStream, tasks: anyio.abc.TaskGroup) -> _AsyncConnection:
        conn = _AsyncConnection(stream)
        tasks.start_soon(self._reader, conn)
        self._conn = conn
        return conn

    async def _connection(self) -> _AsyncConnection:
        """The current connection, or a new one (after a loss) with a new reader task."""
        if self._conn is not None:
            return self._conn
        async with self._connect_lock:
            if self._conn is not None:
                return self._conn
            if self._tasks is None:
                raise RuntimeError("use AsyncClient as `async with AsyncClient(...) as client:`")
            return self._adopt(await self._open_stream(), self._tasks)

    async def _lose(self, conn: _AsyncConnection, reason: str) -> None:
        """Give up a connection: fail its requests, tell its sessions, close it."""
        conn.mark_lost(reason)
        if self._conn is conn:
            self._conn = None
        error = DaemonUnavailable(f"connection to scoutd at {self.socket_path} lost: {conn.lost}")
        for pending in conn.pending.values():
            pending.deliver(None, error)
        with anyio.CancelScope(shield=True):
            await conn.stream.aclose()

    async def _reader(self, conn: _AsyncConnection) -> None:
        """Deliver every line of ``conn`` until it ends; never raises."""
        splitter = _LineSplitter()
        reason = "the daemon closed the connection"
        try:
            while True:
                for line in splitter.feed(await conn.stream.receive(RECV_SIZE)):
                    conn.dispatch(_incoming.decode(line))
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass
        except (anyio.BrokenResourceError, OSError) as exc:
            reason = str(exc.__cause__ or exc) or "connection reset"
        except msgspec.DecodeError as exc:
            reason = f"invalid line from the daemon: {exc}"
        except Exception as exc:  # the reader must never take the task group down
            log.exception("scoutd client reader failed")
            reason = f"client reader failed: {exc!r}"
        finally:
            await self._lose(conn, reason)

    async def _call(
        self,
        method: str,
        params: msgspec.Struct,
        kind: type[T],
        conn: _AsyncConnection | None = None,
    ) -> T:
        conn = conn or await self._connection()
        request_id = next(self._ids)
        line = _encode(request_id, method, params)
        pending = conn.pending[request_id] = _Pending(len(line))
        try:
            await self._send(conn, line)
            try:
                with anyio.fail_after(self.timeout):
                    await pending.done.wait()
            except TimeoutError as exc:
                raise DaemonTimeout(
                    f"scoutd at {self.socket_path} did not answer {method} within {self.timeout} s"
                ) from exc
        finally:
            conn.pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        assert pending.message is not None
        if pending.message.error is not None:
            _raise_remote(conn, params, pending.message.error)
        return msgspec.json.decode(pending.message.result, type=kind)

    async def _send(self, conn: _AsyncConnection, line: bytes) -> None:
        """Write one whole line: cancellation waits for the line to be out."""
        failure: BaseException | None = None
        if conn.lost is None:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(SEND_GRACE) as scope:
                    try:
                        async with conn.send_lock:
                            await conn.stream.send(line)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                        failure = exc
                if scope.cancelled_caught:
                    await self._lose(conn, f"the daemon took no request for {SEND_GRACE} s")
                elif failure is not None and conn.lost is None:
                    await self._lose(conn, str(failure) or type(failure).__name__)
        if conn.lost is not None:
            raise DaemonUnavailable(
                f"connection to scoutd at {self.socket_path} lost: {conn.lost}"
            ) from failure

    async def _close_session(self, session: AsyncSession) -> None:
        conn = session._registry
        conn.forget(session.id)
        if conn is not self._conn:
            return  # the daemon closed it with its connection
        try:
            await self._call(
                "session.close", SessionCloseParams(session=session.id), dict[str, Any]
            )
        except RemoteError as exc:
            if exc.code != UNKNOWN_SESSION:
                raise
        except DaemonUnavailable:
            pass  # the daemon closes the sessions of a lost connection
        except DaemonTimeout:
            log.warning("scoutd did not confirm closing session %s", session.id)


class AsyncSession(_SessionBase):
    """An agent session registered with the daemon (async client).

    ``aborted`` and ``reason`` are set as soon as the client's reader task meets
    the daemon's ``session.aborted``, or when a :meth:`prepare_prompt` of the
    session fails with :class:`~scoutd.Aborted`.
    """

    def __init__(
        self,
        client: AsyncClient,
        conn: _AsyncConnection,
        session_id: str,
        save_file: str,
        pid: int | None,
    ) -> None:
        super().__init__(conn, session_id, save_file, pid)
        self._client = client
        self._changed = anyio.Event()
        self._busy = anyio.Lock()  # one prepare at a time: the incremental state is shared

    def _wake(self) -> None:
        self._changed.set()

    async def prepare_prompt(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        config: Overrides = None,
    ) -> list[Any]:
        """:meth:`AsyncClient.prepare_prompt` for this session (incremental, as
        :meth:`Session.prepare_prompt`)."""
        return (await self.prepare(messages, strategies, config=config)).messages

    async def prepare(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None = None,
        *,
        config: Overrides = None,
    ) -> Prepared:
        """:meth:`prepare_prompt` plus what each strategy did (``.report``)."""
        async with self._busy:
            for whole in (False, True):
                params = self._params(messages, strategies, config, whole=whole)
                try:
                    answer = await self._client._call("prepare_prompt", params, _SessionAnswer)
                    return self._absorb(answer, messages, params)
                except RemoteError as exc:
                    if whole or not _about_base(exc):
                        raise
                except DeltaMismatch:
                    if whole:
                        raise
                self._forget()
        raise AssertionError("unreachable")

    # The timeout parameter mirrors Session.wait_aborted: an expired wait is an
    # answer (False), not an error, which a caller's fail_after cannot express.
    async def wait_aborted(self, timeout: float | None) -> bool:  # noqa: ASYNC109
        """Wait up to ``timeout`` seconds (``None``: no limit) for an abort; return ``aborted``.

        Raises:
            DaemonUnavailable: the connection was lost before an abort arrived.
        """
        with anyio.move_on_after(timeout):
            await self._changed.wait()
        if not self.aborted and self.lost:
            raise self._lost_error(self._client.socket_path)
        return self.aborted

    async def aclose(self) -> None:
        """Tell the daemon the session is over (idempotent; bounded even when cancelled)."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE):
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
