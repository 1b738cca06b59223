"""The wire protocol of ``scoutd serve``: JSON-RPC 2.0, one object per line (no I/O).

Shared by the daemon and the clients (docs/PROTOCOL.md):

- :mod:`.messages`: error codes and every message as a msgspec Struct;
- :mod:`.framing`: the one line reader both ends use;
- :mod:`.codec`: lines to typed requests and typed answers to lines (daemon);
- :mod:`.error_table`: error codes to exceptions and back (both ends);
- :mod:`.layout`: the indices answer of ``prepare_prompt``, built and applied;
- :mod:`.client_state`: a client connection's requests, answers and aborts.

Every name the single-module version of this package defined is re-exported
here, so ``from scoutd import protocol; protocol.X`` keeps working.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ..errors import ProtocolError
    from .codec import (
        decode_params,
        decode_prepare_request,
        decode_request,
        encode_error,
        encode_notification,
        encode_result,
    )
    from .framing import OVERSIZED, LineReader
    from .messages import (
        ABORTED,
        CONFIG_INVALID,
        FORBIDDEN,
        INTERNAL_ERROR,
        INVALID_PARAMS,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        METHOD_PARAMS,
        PARSE_ERROR,
        SHUTTING_DOWN,
        TOO_LARGE,
        UNKNOWN_SESSION,
        UNKNOWN_STRATEGY,
        AbortedData,
        AnswerForm,
        ConfigInvalidData,
        ConfigReloadParams,
        ConfigReloadResult,
        ConfigStatus,
        Counts,
        DaemonIdentity,
        ErrorObject,
        FleetStatus,
        ForbiddenData,
        FormatName,
        Latency,
        MetricsParams,
        MetricsResult,
        Notification,
        PreparePromptParams,
        PreparePromptResult,
        Request,
        RequestId,
        SessionAbortedParams,
        SessionCloseParams,
        SessionCloseResult,
        SessionOpenParams,
        SessionOpenResult,
        SessionRecallParams,
        SessionRecallResult,
        StatusParams,
        StatusResult,
        TooLargeData,
        UnknownStrategyData,
    )

# Imported on first use: a module that needs only the format names or the report
# types loads neither the codec nor the messages (docs/ARCHITECTURE.md, "Layers").
__getattr__ = lazy_attributes(
    __name__,
    {
        "ProtocolError": "..errors",
        "decode_params": ".codec",
        "decode_prepare_request": ".codec",
        "decode_request": ".codec",
        "encode_error": ".codec",
        "encode_notification": ".codec",
        "encode_result": ".codec",
        "OVERSIZED": ".framing",
        "LineReader": ".framing",
        "ABORTED": ".messages",
        "CONFIG_INVALID": ".messages",
        "FORBIDDEN": ".messages",
        "INTERNAL_ERROR": ".messages",
        "INVALID_PARAMS": ".messages",
        "INVALID_REQUEST": ".messages",
        "METHOD_NOT_FOUND": ".messages",
        "METHOD_PARAMS": ".messages",
        "PARSE_ERROR": ".messages",
        "SHUTTING_DOWN": ".messages",
        "TOO_LARGE": ".messages",
        "UNKNOWN_SESSION": ".messages",
        "UNKNOWN_STRATEGY": ".messages",
        "AbortedData": ".messages",
        "AnswerForm": ".messages",
        "ConfigInvalidData": ".messages",
        "ConfigReloadParams": ".messages",
        "ConfigReloadResult": ".messages",
        "ConfigStatus": ".messages",
        "Counts": ".messages",
        "DaemonIdentity": ".messages",
        "ErrorObject": ".messages",
        "FleetStatus": ".messages",
        "ForbiddenData": ".messages",
        "FormatName": ".messages",
        "Latency": ".messages",
        "MetricsParams": ".messages",
        "MetricsResult": ".messages",
        "Notification": ".messages",
        "PreparePromptParams": ".messages",
        "PreparePromptResult": ".messages",
        "Request": ".messages",
        "RequestId": ".messages",
        "SessionAbortedParams": ".messages",
        "SessionCloseParams": ".messages",
        "SessionCloseResult": ".messages",
        "SessionRecallParams": ".messages",
        "SessionRecallResult": ".messages",
        "SessionOpenParams": ".messages",
        "SessionOpenResult": ".messages",
        "StatusParams": ".messages",
        "StatusResult": ".messages",
        "TooLargeData": ".messages",
        "UnknownStrategyData": ".messages",
    },
)

__all__ = [
    # error codes
    "ABORTED",
    "CONFIG_INVALID",
    "FORBIDDEN",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SHUTTING_DOWN",
    "TOO_LARGE",
    "UNKNOWN_SESSION",
    "UNKNOWN_STRATEGY",
    # messages
    "METHOD_PARAMS",
    "AbortedData",
    "AnswerForm",
    "ConfigInvalidData",
    "ConfigReloadParams",
    "ConfigReloadResult",
    "ConfigStatus",
    "Counts",
    "DaemonIdentity",
    "FleetStatus",
    "ErrorObject",
    "ForbiddenData",
    "FormatName",
    "Latency",
    "Notification",
    "PreparePromptParams",
    "PreparePromptResult",
    "Request",
    "RequestId",
    "SessionAbortedParams",
    "SessionCloseParams",
    "SessionCloseResult",
    "SessionRecallParams",
    "SessionRecallResult",
    "SessionOpenParams",
    "SessionOpenResult",
    "MetricsParams",
    "MetricsResult",
    "StatusParams",
    "StatusResult",
    "TooLargeData",
    "UnknownStrategyData",
    # codec and framing
    "OVERSIZED",
    "LineReader",
    "ProtocolError",
    "decode_params",
    "decode_prepare_request",
    "decode_request",
    "encode_error",
    "encode_notification",
    "encode_result",
]
