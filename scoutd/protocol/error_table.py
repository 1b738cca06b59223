"""The one table between error codes and exceptions, for both ends of the socket.

The daemon turns a library exception into an error response with
:func:`error_for`; a client turns an error response back into the exception
the library would have raised with :func:`exception_for` (docs/PROTOCOL.md,
error codes). Anything without a specific class is a :class:`RemoteError`.
"""

from __future__ import annotations

from typing import Any

from ..errors import Aborted, ConfigError, ProtocolError, RemoteError, UnknownStrategy
from .messages import (
    ABORTED,
    CONFIG_INVALID,
    INVALID_PARAMS,
    TOO_LARGE,
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


def exception_for(error: ErrorObject) -> Exception:
    """The exception a client raises for an error response.

    An abort, an unknown strategy and an invalid configuration (the daemon's
    file, or the per-call ``config`` overrides) come back as the library's own
    exceptions; everything else is a :class:`RemoteError` with code and data.
    """
    data = error.data if isinstance(error.data, dict) else {}
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
