"""A client connection's protocol state, without I/O (h11 style).

The client shells (``scoutd/client/``) only move bytes: they hand what they
want to send to :meth:`ClientState.send_request`, write the line it returns,
and feed every received chunk to :meth:`ClientState.receive_data`, which
frames it, decodes each line and routes it: an answer to the request with its
``id`` (kept until that request's caller takes it), a ``session.aborted``
notification to the session it names. Whoever reads the socket thus reads for
everyone on the connection.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from ..errors import InvalidMessages
from ..paths import safe_text
from .error_table import TOO_DEEP_REASON, too_large_limit
from .framing import OVERSIZED, LineReader
from .messages import ErrorObject, SessionAbortedParams
from .sdk_objects import model_class, sent_form

log = logging.getLogger("scoutd.client")


class Incoming(msgspec.Struct):
    """Any line from the daemon: a response (``result`` or ``error``) or a notification.

    ``result`` and ``params`` stay raw so that each call decodes its own result
    type; an empty :class:`msgspec.Raw` means the member was absent.
    """

    id: int | str | None = None
    result: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    error: ErrorObject | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class Answered(msgspec.Struct, frozen=True):
    """Event: the answer to request ``id`` arrived (take it with :meth:`ClientState.answer`)."""

    id: int


class SessionAborted(msgspec.Struct, frozen=True):
    """Event: the daemon consumed an abort for ``session``."""

    session: str
    reason: str


Event = Answered | SessionAborted


class _Request(msgspec.Struct):
    jsonrpc: str
    id: int
    method: str
    params: msgspec.Struct


# A key JSON writes as text though it is not one: ``json.dumps``' spelling of it, so that
# the daemon reads what an agent would send its provider (msgspec writes int and float
# keys so already, and asks the hook for these: a bool or None is native as a value).
_KEY_TEXT: dict[Any, str] = {True: "true", False: "false", None: "null"}


def _enc_hook(value: Any) -> Any:
    # Messages may be any mapping, as for the library; dicts take the fast path.
    if isinstance(value, Mapping):
        return dict(value)
    if value is None or type(value) is bool:
        return _KEY_TEXT[value]
    model = model_class()
    if model is not None and isinstance(value, model):
        return sent_form(value)  # an SDK's object, as the SDK sends it (as the library reads it)
    raise TypeError(f"cannot send a {type(value).__name__} to the daemon")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def _to_builtins(request: _Request) -> Any:
    return msgspec.to_builtins(request, enc_hook=_enc_hook)


def _key(key: Any) -> Any:
    if type(key) is str:
        return safe_text(key)
    if key is None or type(key) is bool:
        return _KEY_TEXT[key]
    return key  # a number the encoder writes as text; anything else, its hook refuses


def escaped_copy(value: Any) -> Any:
    """``value`` (built-in types, as ``msgspec.to_builtins`` gives them) with every text,
    keys included, escaped as the daemon escapes its own (:func:`~scoutd.paths.safe_text`)
    and every key JSON writes as text written so, nothing else changed.

    For a request that holds a lone surrogate. A loop, not recursion: it keeps every
    level, as deep as the encoder that follows goes, and refuses none of its own.
    """
    top: list[Any] = [None]
    pending: list[tuple[Any, Any, Any]] = [(value, top, 0)]  # (value, its copy's holder, slot)
    while pending:
        item, holder, slot = pending.pop()
        if type(item) is str:
            holder[slot] = safe_text(item)
        elif type(item) is dict:
            copy: dict[Any, Any] = {}
            holder[slot] = copy
            for key, child in item.items():
                name = _key(key)
                copy[name] = None  # the key's place, in the original order
                pending.append((child, copy, name))
        elif type(item) is list:
            items: list[Any] = [None] * len(item)
            holder[slot] = items
            pending.extend((child, items, index) for index, child in enumerate(item))
        else:
            holder[slot] = item
    return top[0]


_incoming = msgspec.json.Decoder(Incoming)
_aborted_params = msgspec.json.Decoder(SessionAbortedParams)


class ClientState:
    """Requests in flight, their answers, and the aborts pushed for sessions.

    Not thread-safe by itself: the shells call it under their read lock (reads)
    or between two awaits (everything else), never from two threads at once
    for the same reason a socket is read by one reader at a time.
    """

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._reader = LineReader(None)
        self._waiting: dict[int, int] = {}  # request id -> bytes of its line
        self._answers: dict[int, Incoming] = {}
        self._aborts: dict[str, str] = {}  # session id -> reason of its abort
        self.lost: str | None = None  # why the connection is gone, once it is
        # The daemon refused ``"answer": "indices"`` (it predates it): ask for
        # whole answers on this connection from then on (docs/PROTOCOL.md).
        self.indices_refused = False

    # -- requests ----------------------------------------------------------------------------

    def send_request(self, method: str, params: msgspec.Struct) -> tuple[int, bytearray]:
        """A new request: its id and the line to write (with its newline).

        The line is the buffer it was encoded into, not a copy of it: a
        conversation of a few megabytes is not copied once more to be sent.
        """
        request_id = next(self._ids)
        buffer = bytearray()
        request = _Request("2.0", request_id, method, params)
        try:
            try:
                _encoder.encode_into(request, buffer)
            except UnicodeEncodeError:
                # A text JSON cannot carry (a lone surrogate: a file name of undecodable
                # bytes in a tool output, say) goes escaped, as in the daemon's answers.
                buffer = bytearray(_encoder.encode(escaped_copy(_to_builtins(request))))
        except RecursionError:  # refused as the library in process refuses it
            raise InvalidMessages(None, TOO_DEEP_REASON) from None
        buffer += b"\n"
        self._waiting[request_id] = len(buffer)
        return request_id, buffer

    def answer(self, request_id: int) -> Incoming | None:
        """Take the answer of ``request_id`` if it has arrived."""
        return self._answers.pop(request_id, None)

    def answered(self, request_id: int) -> bool:
        """Whether the answer of ``request_id`` is here (without taking it)."""
        return request_id in self._answers

    def forget_request(self, request_id: int) -> None:
        """The caller gave up (answered, timed out or cancelled): a late answer is dropped."""
        self._waiting.pop(request_id, None)
        self._answers.pop(request_id, None)

    # -- sessions ----------------------------------------------------------------------------

    def abort_reason(self, session: str) -> str | None:
        """The reason of the abort pushed (or answered) for ``session``, if any."""
        return self._aborts.get(session)

    def record_abort(self, session: str, reason: str) -> None:
        """An abort for ``session`` (the first reason stays)."""
        self._aborts.setdefault(session, reason)

    def forget_session(self, session: str) -> None:
        self._aborts.pop(session, None)

    # -- bytes in ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed received bytes; return what they changed.

        Raises:
            msgspec.DecodeError: a line that is not a JSON-RPC message; the
                connection cannot be trusted any more.
        """
        events: list[Event] = []
        # no mutate: the time only feeds the reader's read timeout, which a client never reads
        for line in self._reader.feed(data, 0.0):  # pragma: no mutate
            if line is OVERSIZED:  # pragma: no cover - the reader has no limit here
                continue  # pragma: no mutate (unreachable: no limit, so never OVERSIZED)
            message = _incoming.decode(line)
            if message.method is not None:
                events.extend(self._notification(message))
            else:
                events.extend(self._response(message))
        return events

    def connection_lost(self, reason: str) -> None:
        """The connection is gone; the first reason given stays."""
        if self.lost is None:
            self.lost = reason

    def _notification(self, message: Incoming) -> list[Event]:
        if message.method != "session.aborted":
            log.debug("ignoring notification %r", message.method)
            return []
        # Malformed: not this protocol (an impostor, another version). Raised, so the
        # connection is given up and its sessions fail closed, rather than ignored:
        # the abort it may have carried is not lost silently, and a peer that sends
        # such lines without end cannot fill the agent's log either.
        params = _aborted_params.decode(message.params)
        self.record_abort(params.session, params.reason)
        return [SessionAborted(params.session, params.reason)]

    def _response(self, message: Incoming) -> list[Event]:
        if isinstance(message.id, int) and message.id in self._waiting:
            return [self._deliver(message.id, message)]
        if message.id is None and message.error is not None:
            # An error the daemon could not tie to a request: an oversized line
            # (the oldest waiting request that long; the connection goes on),
            # else a refusal of the whole connection, for every waiting request.
            waiting = [rid for rid in self._waiting if rid not in self._answers]
            limit = too_large_limit(message.error)
            if limit is not None:
                waiting = [rid for rid in waiting if self._waiting[rid] - 1 > limit][:1] or waiting
            return [self._deliver(rid, message) for rid in waiting]
        log.debug("discarding a late answer to request %r", message.id)
        return []

    def _deliver(self, request_id: int, message: Incoming) -> Answered:
        self._answers[request_id] = message
        return Answered(request_id)
