"""Lines to typed requests and typed answers to lines, for the daemon (sans-io)."""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar

import msgspec

from ..errors import ProtocolError
from ..paths import safe_value
from .messages import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    TOO_DEEP,
    Envelope,
    ErrorObject,
    ErrorResponse,
    IdOnly,
    Notification,
    PreparePromptParams,
    Request,
    RequestId,
    ResultResponse,
)

_S = TypeVar("_S", bound=msgspec.Struct)
_encoder = msgspec.json.Encoder()
_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")


def _request_id(line: bytes) -> RequestId:
    """The id of a structurally invalid request, when one can be read (else null)."""
    try:
        return msgspec.json.decode(line, type=IdOnly).id
    except msgspec.DecodeError:
        return None


# A top-level member whose value is a scalar (or the start of a nested one): what the
# id of a line too deep to decode is read from, before the nesting.
_MEMBER = re.compile(
    rb'[ \t\r\n]*[{,][ \t\r\n]*("(?:[^"\\]++|\\.)*+")[ \t\r\n]*:[ \t\r\n]*'
    rb'("(?:[^"\\]++|\\.)*+"|-?[0-9][0-9.eE+-]*+|true|false|null|[\[{])',
    re.DOTALL,
)
# Members looked at, at most: a request has four; more is not worth the time.
_MEMBERS_READ = 16


def _id_before_nesting(line: bytes) -> RequestId:
    """The ``id`` of a line too deep to decode, when its members before the first
    nested value give one (as the clients write a request: ``jsonrpc``, ``id``,
    ``method``, then ``params``); else null. A loop over at most a few members, so
    it never recurses and costs next to nothing, however long the line.
    """
    found: RequestId = None
    position = 0
    for _ in range(_MEMBERS_READ):
        member = _MEMBER.match(line, position)
        if member is None or member[2] in (b"[", b"{"):
            break
        position = member.end()
        try:
            if msgspec.json.decode(member[1], type=str) == "id":
                found = msgspec.json.decode(member[2], type=RequestId)  # the last one wins
        except msgspec.DecodeError:  # an id of the wrong type, or a malformed text
            found = None
    return found


def too_deep(line: bytes) -> ProtocolError:
    """The error for a line nesting deeper than the decoder walks: PARSE_ERROR with
    ``data`` ``{"path": "$", "error": TOO_DEEP}`` and the request's id when it can
    be read (:func:`_id_before_nesting`), so that only its own caller gets it."""
    data = {"path": "$", "error": TOO_DEEP}
    return ProtocolError(PARSE_ERROR, f"parse error: {TOO_DEEP}", data, id=_id_before_nesting(line))


def decode_request(line: bytes) -> Request:
    """Decode one received line (without its newline) into a :class:`Request`.

    Raises:
        ProtocolError: PARSE_ERROR for invalid JSON or UTF-8, or JSON nested too
            deeply to decode (:func:`too_deep`), INVALID_REQUEST for a batch, a
            non-object or a request with missing or mistyped members.
    """
    try:
        return _decode_request(line)
    except RecursionError:  # msgspec stops at the interpreter's recursion limit
        raise too_deep(line) from None


def _decode_request(line: bytes) -> Request:
    try:
        envelope = msgspec.json.decode(line, type=Envelope)
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
    params = envelope.params
    return Request(
        method=envelope.method,
        id=None if isinstance(envelope.id, msgspec.UnsetType) else envelope.id,
        notification=notification,
        # `null` as absent (docs/PROTOCOL.md, "Framing"): a Raw holds it as its 4 bytes
        params=None if isinstance(params, msgspec.UnsetType) or _null(params) else params,
    )


def _null(raw: msgspec.Raw) -> bool:
    """Whether ``raw`` is JSON's ``null`` (compared only when it is that short)."""
    return len(raw) == len(b"null") and bytes(raw) == b"null"


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

    Raises:
        ProtocolError: the line nests too deeply to decode (:func:`too_deep`).
    """
    try:
        envelope = _decode_prepare(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    except RecursionError:
        raise too_deep(line) from None
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
    return _encode_line(ResultResponse(jsonrpc="2.0", id=id, result=result))


def encode_error(id: RequestId, code: int, message: str, data: Any = None) -> bytes:
    """An error response line (with its trailing newline)."""
    error = ErrorObject(code=code, message=message, data=data)
    return _encode_line(ErrorResponse(jsonrpc="2.0", id=id, error=error))


def encode_notification(method: str, params: Any) -> bytes:
    """A server-to-client notification line (no ``id``)."""
    return _encode_line(Notification(jsonrpc="2.0", method=method, params=params))
