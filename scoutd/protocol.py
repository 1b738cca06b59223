"""The wire protocol of ``scoutd serve``: JSON-RPC 2.0, one object per line.

This module is sans-io: it turns received lines into typed requests and typed
results into response lines. Every request's params, every result, every error
and the notification are msgspec Structs, so validation errors (with the field
path) come from one definition and docs/PROTOCOL.md can list them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal, TypeVar

import msgspec

from .paths import safe_value
from .strategies.report import StrategyReport

__all__ = [
    "ABORTED",
    "CONFIG_INVALID",
    "FORBIDDEN",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "METHOD_PARAMS",
    "PARSE_ERROR",
    "SHUTTING_DOWN",
    "TOO_LARGE",
    "UNKNOWN_SESSION",
    "UNKNOWN_STRATEGY",
    "AbortedData",
    "ConfigInvalidData",
    "ConfigReloadParams",
    "ConfigReloadResult",
    "ConfigStatus",
    "Counts",
    "ErrorObject",
    "ForbiddenData",
    "Latency",
    "Notification",
    "PreparePromptParams",
    "PreparePromptResult",
    "ProtocolError",
    "Request",
    "RequestId",
    "SessionAbortedParams",
    "SessionCloseParams",
    "SessionCloseResult",
    "SessionOpenParams",
    "SessionOpenResult",
    "StatusParams",
    "StatusResult",
    "TooLargeData",
    "UnknownStrategyData",
    "decode_params",
    "decode_prepare_request",
    "decode_request",
    "encode_error",
    "encode_notification",
    "encode_result",
]

# Standard JSON-RPC 2.0 codes.
PARSE_ERROR: Final = -32700  # the line is not valid JSON (or not UTF-8)
INVALID_REQUEST: Final = -32600  # valid JSON, but not a request object (batches included)
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602  # data: {"path": "$.params...", "error": "..."}
INTERNAL_ERROR: Final = -32603
# Application codes (JSON-RPC reserves -32000..-32099 for the server).
ABORTED: Final = -32001  # data: AbortedData
UNKNOWN_STRATEGY: Final = -32002  # data: UnknownStrategyData
FORBIDDEN: Final = -32003  # data: ForbiddenData
TOO_LARGE: Final = -32004  # data: TooLargeData
CONFIG_INVALID: Final = -32005  # data: ConfigInvalidData
UNKNOWN_SESSION: Final = -32006
SHUTTING_DOWN: Final = -32007

FormatName = Literal["auto", "scout", "openai-chat", "openai-responses", "anthropic"]

# ``id`` may be a string, an integer or null; fractional numbers and booleans are refused.
RequestId = int | str | None


# --- params -----------------------------------------------------------------------------


class PreparePromptParams(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """``prepare_prompt``: the library's ``prepare`` over the wire.

    Without ``session``, ``messages`` is the whole conversation. With a
    ``session``, the daemon keeps the conversation: ``messages`` replaces it,
    ``append`` extends it (``base``, if given, is the length the client believes
    it has), and neither reuses it as is; ``delta`` asks for the answer as a
    change of the previous prepared prompt (docs/PROTOCOL.md, incremental
    sessions).
    """

    messages: list[dict[str, Any]] | None = None
    append: list[dict[str, Any]] | None = None
    base: Annotated[int, msgspec.Meta(ge=0)] | None = None
    delta: bool = False
    strategies: str | list[str] | None = None
    save_file: str | None = None
    session: str | None = None
    config: dict[str, Any] | None = None  # per-call overrides of [prompt] keys
    format: FormatName | None = None  # docs/FORMATS.md; a session's own by default
    cache_control: bool | None = None  # Anthropic cache hint; [prompt] cache_control by default

    def __post_init__(self) -> None:
        if self.session is None:
            if self.messages is None:
                raise ValueError("`messages` is required without a `session`")
            if self.append is not None or self.base is not None or self.delta:
                raise ValueError("`append`, `base` and `delta` need a `session`")
        elif self.messages is not None and (self.append is not None or self.base is not None):
            raise ValueError("give either `messages` or `append`, not both")


class SessionOpenParams(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    save_file: str
    pid: int | None = msgspec.field(default=None)
    messages: list[dict[str, Any]] | None = None  # the conversation so far, kept by the daemon
    format: FormatName = "auto"  # the session's message format (docs/FORMATS.md)

    def __post_init__(self) -> None:
        if self.pid is not None and self.pid < 1:
            raise ValueError("pid must be a positive process id")


class SessionCloseParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    session: str


class StatusParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class ConfigReloadParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


METHOD_PARAMS: Final[dict[str, type[msgspec.Struct]]] = {
    "prepare_prompt": PreparePromptParams,
    "session.open": SessionOpenParams,
    "session.close": SessionCloseParams,
    "status": StatusParams,
    "config.reload": ConfigReloadParams,
}

# --- results ----------------------------------------------------------------------------


class PreparePromptResult(msgspec.Struct, kw_only=True):
    """Either ``messages`` (the whole prepared prompt) or a delta: the first
    ``keep`` messages of the previous prepared prompt, then ``append``;
    ``checksum`` is the CRC-32 of those ``keep`` messages' compact JSON.
    """

    messages: list[Any] | msgspec.UnsetType = msgspec.UNSET
    keep: int | msgspec.UnsetType = msgspec.UNSET
    append: list[Any] | msgspec.UnsetType = msgspec.UNSET
    checksum: int | msgspec.UnsetType = msgspec.UNSET
    report: list[StrategyReport]


class SessionOpenResult(msgspec.Struct, kw_only=True):
    session: str


class SessionCloseResult(msgspec.Struct, kw_only=True):
    pass


class ConfigStatus(msgspec.Struct, kw_only=True):
    path: str | None
    generation: int
    last_reload_error: str | None


class Counts(msgspec.Struct, kw_only=True):
    connections: int = 0  # open now
    sessions: int = 0  # open now
    watches: int = 0  # inbox directories watched now
    requests: int = 0  # since start
    errors: int = 0  # error responses since start
    notices_delivered: int = 0  # inbox notices injected into prompts since start
    aborts: int = 0  # abort files consumed since start (watcher or inbox strategy)
    pending_request_bytes: int = 0  # of requests received but not yet complete or decoded
    rescans: int = 0  # periodic rescans of the watched inboxes completed since start


class Latency(msgspec.Struct, kw_only=True):
    count: int  # requests measured since start
    p50_ms: float  # percentiles over the most recent requests
    p99_ms: float
    max_ms: float  # maximum since start


class StatusResult(msgspec.Struct, kw_only=True):
    version: str
    uptime: float  # seconds
    config: ConfigStatus
    counts: Counts
    latency: Latency


class ConfigReloadResult(msgspec.Struct, kw_only=True):
    generation: int


# --- errors and notifications -----------------------------------------------------------


class AbortedData(msgspec.Struct, kw_only=True):
    reason: str
    save_file: str | None
    session: str | None


class UnknownStrategyData(msgspec.Struct, kw_only=True):
    name: str
    available: list[str]


class ForbiddenData(msgspec.Struct, kw_only=True):
    reason: str


class TooLargeData(msgspec.Struct, kw_only=True):
    limit: int


class ConfigInvalidData(msgspec.Struct, kw_only=True):
    error: str


class ErrorObject(msgspec.Struct, kw_only=True, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class SessionAbortedParams(msgspec.Struct, kw_only=True):
    session: str
    save_file: str
    reason: str


class Notification(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"]
    method: str
    params: Any


class _ResultResponse(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"]
    id: RequestId
    result: Any


class _ErrorResponse(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"]
    id: RequestId
    error: ErrorObject


class _Envelope(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"]
    method: str
    id: RequestId | msgspec.UnsetType = msgspec.UNSET
    params: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _IdOnly(msgspec.Struct):
    id: RequestId = None


class Request(msgspec.Struct, kw_only=True):
    """A decoded request; ``params`` stays raw until the method is known."""

    method: str
    id: RequestId
    notification: bool  # no ``id`` member: execute, never answer
    params: msgspec.Raw | None


class ProtocolError(Exception):
    """A request that cannot be served, with the JSON-RPC error to answer."""

    def __init__(self, code: int, message: str, data: Any = None, *, id: RequestId = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.id = id


_S = TypeVar("_S", bound=msgspec.Struct)
_encoder = msgspec.json.Encoder()
_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")


def _request_id(line: bytes) -> RequestId:
    """The id of a structurally invalid request, when one can be read (else null)."""
    try:
        return msgspec.json.decode(line, type=_IdOnly).id
    except msgspec.DecodeError:
        return None


def decode_request(line: bytes) -> Request:
    """Decode one received line (without its newline) into a :class:`Request`.

    Raises:
        ProtocolError: PARSE_ERROR for invalid JSON or UTF-8, INVALID_REQUEST for a
            batch, a non-object or a request with missing or mistyped members.
    """
    try:
        envelope = msgspec.json.decode(line, type=_Envelope)
    except msgspec.ValidationError as exc:
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError as parse_exc:
            raise ProtocolError(PARSE_ERROR, f"parse error: {parse_exc}") from None
        if isinstance(value, list):
            raise ProtocolError(
                INVALID_REQUEST, "invalid request: batch requests are not supported"
            ) from None
        raise ProtocolError(
            INVALID_REQUEST, f"invalid request: {exc}", id=_request_id(line)
        ) from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(PARSE_ERROR, f"parse error: {exc}") from None
    notification = envelope.id is msgspec.UNSET
    return Request(
        method=envelope.method,
        id=None if isinstance(envelope.id, msgspec.UnsetType) else envelope.id,
        notification=notification,
        params=None if isinstance(envelope.params, msgspec.UnsetType) else envelope.params,
    )


class _PrepareEnvelope(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"]
    method: Literal["prepare_prompt"]
    id: RequestId | msgspec.UnsetType = msgspec.UNSET
    params: PreparePromptParams


_decode_prepare = msgspec.json.Decoder(_PrepareEnvelope).decode


def decode_prepare_request(line: bytes) -> tuple[Request, PreparePromptParams] | None:
    """Decode a well-formed ``prepare_prompt`` request in one pass.

    Large requests are nearly all ``prepare_prompt``: decoding envelope and
    params at once saves a second pass over megabytes of messages. Returns
    None for anything else (another method, or an invalid request), which the
    caller then decodes the general way, for the precise error.
    """
    try:
        envelope = _decode_prepare(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    notification = isinstance(envelope.id, msgspec.UnsetType)
    request = Request(
        method=envelope.method,
        id=None if isinstance(envelope.id, msgspec.UnsetType) else envelope.id,
        notification=notification,
        params=None,
    )
    return request, envelope.params


def decode_params(request: Request, kind: type[_S]) -> _S:
    """Validate ``request.params`` against the method's Struct.

    Absent or null params count as ``{}``. Raises ProtocolError(INVALID_PARAMS) whose
    message and ``data.path`` name the offending field (``$.params.messages[3]``).
    """
    raw = b"{}" if request.params is None else request.params
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _PATH.search(text)
        path = "$.params" + (match.group("path") if match else "")
        if match:
            text = text[: match.start()]
        raise ProtocolError(
            INVALID_PARAMS,
            f"invalid params: {text} - at `{path}`",
            {"path": path, "error": text},
            id=request.id,
        ) from None
    except msgspec.DecodeError as exc:  # pragma: no cover - the envelope already parsed it
        # no mutate: unreachable, so no mutant of these lines can be observed
        message = f"invalid params: {exc}"  # pragma: no mutate
        raise ProtocolError(INVALID_PARAMS, message, id=request.id) from None  # pragma: no mutate


def _encode_line(message: msgspec.Struct) -> bytes:
    """One JSON line; never raises for a string that holds lone surrogates.

    A path that is not valid UTF-8 reaches us as such a string (in an abort
    reason, an error message): the line is then encoded again with every
    string escaped (:func:`scoutd.paths.safe_text`) instead of failing.
    """
    try:
        return _encoder.encode(message) + b"\n"
    except UnicodeEncodeError:
        return _encoder.encode(safe_value(msgspec.to_builtins(message))) + b"\n"


def encode_result(id: RequestId, result: Any) -> bytes:
    """A success response line (with its trailing newline)."""
    return _encode_line(_ResultResponse(jsonrpc="2.0", id=id, result=result))


def encode_error(id: RequestId, code: int, message: str, data: Any = None) -> bytes:
    """An error response line (with its trailing newline)."""
    error = ErrorObject(code=code, message=message, data=data)
    return _encode_line(_ErrorResponse(jsonrpc="2.0", id=id, error=error))


def encode_notification(method: str, params: Any) -> bytes:
    """A server-to-client notification line (no ``id``)."""
    return _encode_line(Notification(jsonrpc="2.0", method=method, params=params))


# --- framing ----------------------------------------------------------------------------

OVERSIZED: Final = None  # LineReader.feed yields this for a line over the limit


class LineReader:
    """Split received bytes into lines of at most ``limit`` bytes (sans-io).

    :meth:`feed` returns complete lines (without ``\\n`` or a trailing ``\\r``;
    blank lines are skipped) and :data:`OVERSIZED` once for every line longer
    than ``limit``, as soon as the limit is passed; the rest of such a line is
    discarded up to its newline. ``started`` is the time the first byte of the
    current unfinished line arrived (None between lines), for the read timeout.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.started: float | None = None
        # The unfinished line, as received: joined once when its newline comes,
        # so a line of many megabytes is copied once, not at every chunk.
        self._parts: list[bytes] = []
        self._size = 0
        self._discarding = False  # pragma: no mutate (only truth-tested: None is the same)

    @property
    def partial(self) -> bool:
        return self.started is not None

    @property
    def pending(self) -> int:
        """Bytes of the unfinished line held now."""
        return self._size

    def feed(self, data: bytes, now: float) -> list[bytes | None]:
        out: list[bytes | None] = []
        pos = 0
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                return out
            self._discarding = False  # pragma: no mutate (only truth-tested: None is the same)
            self.started = None
            pos = end + 1
        while pos < len(data):
            end = data.find(b"\n", pos)
            if end < 0:
                if self.started is None:
                    self.started = now
                # no mutate: data[0:] equals data (the test only saves a copy)
                self._parts.append(data[pos:] if pos else data)  # pragma: no mutate
                self._size += len(data) - pos
                # (+1: a trailing "\r" before the coming newline does not count)
                if self._size > self.limit + 1:
                    # at once: the client learns before sending it all (no mutate:
                    # OVERSIZED is None, so a mutant writing None is the same)
                    out.append(OVERSIZED)  # pragma: no mutate
                    self._parts.clear()
                    self._size = 0
                    self._discarding = True
                break
            if self._parts:
                self._parts.append(data[pos:end])
                line = b"".join(self._parts)
                self._parts.clear()
                self._size = 0
            else:
                line = data[pos:end]
            pos = end + 1
            self.started = None
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > self.limit:
                out.append(OVERSIZED)
            elif line.strip():
                out.append(line)
        return out
