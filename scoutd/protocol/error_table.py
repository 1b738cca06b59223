"""The one table between error codes and exceptions, for both ends of the socket.

The daemon turns a library exception into an error response with
:func:`error_for`; a client turns an error response back into the exception
the library would have raised with :func:`exception_for` (docs/PROTOCOL.md,
error codes). Anything without a specific class is a :class:`RemoteError`.

An answer that means what a library exception means in process (a message list
that breaks the rule, formats mixed, nesting too deep, a session that is no
longer open) is raised as a :class:`RemoteError` that is also that exception's
class: a caller that moved from the library to the daemon catches what it
caught before, and one that reads ``code`` and ``data`` reads them still.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import (
    Aborted,
    ConfigError,
    FormatError,
    InvalidMessages,
    ProtocolError,
    RemoteError,
    SessionClosed,
    UnknownStrategy,
)
from .messages import (
    ABORTED,
    CONFIG_INVALID,
    INVALID_PARAMS,
    PARSE_ERROR,
    TOO_DEEP,
    TOO_LARGE,
    UNKNOWN_SESSION,
    UNKNOWN_STRATEGY,
    AbortedData,
    ConfigInvalidData,
    ErrorObject,
    RequestId,
    UnknownStrategyData,
)

# The code each library exception travels as; the reverse of exception_for.
CODE_OF: dict[type[Exception], int] = {
    Aborted: ABORTED,
    UnknownStrategy: UNKNOWN_STRATEGY,
    ConfigError: CONFIG_INVALID,
}


# The reason the library gives messages nested past what the interpreter walks
# (engine.message_rules.too_deep); the daemon's refusal says TOO_DEEP in its data.
TOO_DEEP_REASON = "nested too deeply to read (past the recursion limit)"
# Where each code that may refuse a request for its nesting says it is (data.path).
_TOO_DEEP_AT = {PARSE_ERROR: "$", INVALID_PARAMS: "$.params"}
# A message of the list, as the wire types name it: `$.params.messages[3]`.
_MESSAGE_PATH = re.compile(r"\$\.params\.(?P<field>messages|append)\[(?P<index>\d+)\]")


class RemoteInvalidMessages(RemoteError, InvalidMessages):
    """The daemon refused the messages as the library refuses them in process:
    ``position`` counts from the conversation's start, as a session's does."""

    def __init__(
        self, code: int, message: str, data: object, position: int | None, reason: str
    ) -> None:
        # RemoteError's own __init__ would hand its text on to InvalidMessages' (the MRO)
        Exception.__init__(self, f"{message} (code {code})")
        self.code, self.message, self.data = code, message, data
        self.position, self.reason = position, reason


class RemoteFormatError(RemoteError, FormatError):
    """The daemon found the messages' formats mixed, as the library does in process."""


class RemoteSessionClosed(RemoteError, SessionClosed):
    """The daemon holds no such session (closed, or gone with its connection)."""


def error_for(
    exc: Aborted | UnknownStrategy | ConfigError,
    id: RequestId,
    *,
    save_file: str | None = None,
    session: str | None = None,
    prefix: str = "",
) -> ProtocolError:
    """The error response for a library exception raised while serving request ``id``.

    ``save_file`` and ``session`` name what an abort was about; ``prefix`` is
    put before the message (``"aborted: "``, ``"invalid configuration: "``).
    """
    data: Any
    if isinstance(exc, Aborted):
        data = AbortedData(reason=exc.reason, save_file=save_file, session=session)
        return ProtocolError(ABORTED, f"{prefix}{exc.reason}", data, id=id)
    if isinstance(exc, UnknownStrategy):
        data = UnknownStrategyData(name=exc.name, available=exc.available)
        return ProtocolError(UNKNOWN_STRATEGY, f"{prefix}{exc}", data, id=id)
    data = ConfigInvalidData(error=str(exc))
    return ProtocolError(CONFIG_INVALID, f"{prefix}{exc}", data, id=id)


def exception_for(error: ErrorObject, base: int = 0) -> Exception:
    """The exception a client raises for an error response.

    An abort, an unknown strategy and an invalid configuration (the daemon's
    file, or the per-call ``config`` overrides) come back as the library's own
    exceptions; refused messages, mixed formats and an unknown session as the
    :class:`RemoteError` subclasses above; everything else is a plain
    :class:`RemoteError` with code and data. ``base``: the messages the session
    held before an ``append`` (its positions are counted from there).
    """
    data = error.data if isinstance(error.data, dict) else {}
    like = _library_error(error, data, base)
    if like is not None:
        return like
    if error.code == ABORTED:
        reason = data.get("reason")
        return Aborted(reason if isinstance(reason, str) else error.message)
    if error.code == UNKNOWN_STRATEGY:
        name, available = data.get("name"), data.get("available")
        if isinstance(name, str) and isinstance(available, list):
            return UnknownStrategy(name, [str(each) for each in available])
    if error.code == CONFIG_INVALID or (
        error.code == INVALID_PARAMS and about_overrides(data.get("path"))
    ):
        detail = data.get("error")
        return ConfigError(detail if isinstance(detail, str) else error.message)
    return RemoteError(error.code, error.message, error.data)


def _library_error(error: ErrorObject, data: dict[str, Any], base: int) -> RemoteError | None:
    """The answer as the library's own exception class, when it means one."""
    path, detail = data.get("path"), data.get("error")
    if error.code == UNKNOWN_SESSION:
        return RemoteSessionClosed(error.code, error.message, error.data)
    # Code and data, never the message's wording (docs/PROTOCOL.md, error codes).
    if detail == TOO_DEEP and path is not None and _TOO_DEEP_AT.get(error.code) == path:
        return RemoteInvalidMessages(error.code, error.message, error.data, None, TOO_DEEP_REASON)
    if error.code != INVALID_PARAMS or not isinstance(path, str) or not isinstance(detail, str):
        return None
    if path == "$.params.messages" and not detail.startswith("Expected "):
        return RemoteFormatError(error.code, error.message, error.data)
    found = _MESSAGE_PATH.fullmatch(path)
    if found is None:
        return None
    position = int(found["index"]) + (base if found["field"] == "append" else 0)
    return RemoteInvalidMessages(error.code, error.message, error.data, position, detail)


def about_overrides(path: Any) -> bool:
    """Whether an INVALID_PARAMS ``data.path`` points into the per-call ``config``."""
    return isinstance(path, str) and (
        path == "$.params.config" or path.startswith(("$.params.config.", "$.params.config["))
    )


def about_base(exc: RemoteError) -> bool:
    """Whether an error says a session's conversation is not what the client believed."""
    data = exc.data if isinstance(exc.data, dict) else {}
    return exc.code == INVALID_PARAMS and data.get("path") == "$.params.base"


def about_replace(exc: RemoteError) -> bool:
    """Whether an error refuses ``delta_replace`` (a daemon older than that param)."""
    data = exc.data if isinstance(exc.data, dict) else {}
    return exc.code == INVALID_PARAMS and "`delta_replace`" in str(data.get("error"))


def about_field(exc: RemoteError, name: str) -> bool:
    """Whether an error refuses the param ``name`` as unknown (a daemon older than it)."""
    data = exc.data if isinstance(exc.data, dict) else {}
    return (
        exc.code == INVALID_PARAMS
        and data.get("path") == "$.params"
        and f"unknown field `{name}`" in str(data.get("error"))
    )


def too_large_limit(error: ErrorObject) -> int | None:
    """The line limit of a TOO_LARGE error (else ``None``)."""
    if error.code != TOO_LARGE or not isinstance(error.data, dict):
        return None
    limit = error.data.get("limit")
    return limit if isinstance(limit, int) else None
