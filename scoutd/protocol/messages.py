"""The messages of the wire protocol: error codes, params, results, notifications.

Every request's params, every result, every error's data and the notification
are msgspec Structs, so validation errors (with the field path) come from one
definition and docs/PROTOCOL.md can list them.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from .report import StrategyReport

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
# Each code by its name (the metrics' labels).
ERROR_NAMES: Final = {
    PARSE_ERROR: "PARSE_ERROR",
    INVALID_REQUEST: "INVALID_REQUEST",
    METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    INVALID_PARAMS: "INVALID_PARAMS",
    INTERNAL_ERROR: "INTERNAL_ERROR",
    ABORTED: "ABORTED",
    UNKNOWN_STRATEGY: "UNKNOWN_STRATEGY",
    FORBIDDEN: "FORBIDDEN",
    TOO_LARGE: "TOO_LARGE",
    CONFIG_INVALID: "CONFIG_INVALID",
    UNKNOWN_SESSION: "UNKNOWN_SESSION",
    SHUTTING_DOWN: "SHUTTING_DOWN",
}
# ``data.error`` of a request refused for its nesting, whichever code says it: -32700
# at ``$`` (the line nests past what the decoder walks), -32602 at ``$.params`` (its
# params did, once read). Clients recognise the refusal by code and data, never by
# the message's wording (docs/PROTOCOL.md, error codes).
TOO_DEEP: Final = "nested too deeply"

FormatName = Literal["auto", "scout", "openai-chat", "openai-responses", "anthropic"]
# How a session-less ``prepare_prompt`` answers: every prepared message, or the
# layout of the prepared prompt over the request's messages (docs/PROTOCOL.md).
AnswerForm = Literal["messages", "indices"]

# ``id`` may be a string, an integer or null; fractional numbers and booleans are refused.
RequestId = int | str | None

# The longest ``session.recall`` handle and search taken: a handle is a number, and a
# search is a text to find, not an output to send back (docs/PROTOCOL.md).
MAX_RECALL_HANDLE: Final = 64
MAX_RECALL_SEARCH: Final = 4096


# --- params -----------------------------------------------------------------------------


class PreparePromptParams(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """``prepare_prompt``: the library's ``prepare`` over the wire.

    Without ``session``, ``messages`` is the whole conversation. With a
    ``session``, the daemon keeps the conversation: ``messages`` replaces it,
    ``append`` extends it (``base``, if given, is the length the client believes
    it has), and neither reuses it as is; ``delta`` asks for the answer as a
    change of the previous prepared prompt, ``delta_replace`` for its
    replacing form (docs/PROTOCOL.md, incremental sessions); ``redeliver``
    says the client did not use the session's previous answer, whose notices
    then come again. Without a
    session, ``answer="indices"`` asks for the prepared prompt as a ``layout``
    over ``messages`` (:mod:`scoutd.protocol.layout`).
    """

    messages: list[dict[str, Any]] | None = None
    append: list[dict[str, Any]] | None = None
    base: Annotated[int, msgspec.Meta(ge=0)] | None = None
    delta: bool = False
    delta_replace: bool = False
    redeliver: bool = False  # with a session: the previous answer's notices again
    strategies: str | list[str] | None = None
    save_file: str | None = None
    session: str | None = None
    config: dict[str, Any] | None = None  # per-call overrides of [prompt] keys
    format: FormatName | None = None  # docs/FORMATS.md; a session's own by default
    cache_control: bool | None = None  # Anthropic cache hint; [prompt] cache_control by default
    answer: AnswerForm = "messages"  # without a session only

    def __post_init__(self) -> None:
        if self.answer != "messages" and self.session is not None:
            raise ValueError(
                f"`answer` {self.answer!r} is for calls without a `session` "
                "(a session answers with deltas)"
            )
        if self.session is None:
            if self.messages is None:
                raise ValueError("`messages` is required without a `session`")
            if self.append is not None or self.base is not None or self.delta or self.redeliver:
                raise ValueError("`append`, `base`, `delta` and `redeliver` need a `session`")
        elif self.messages is not None and (self.append is not None or self.base is not None):
            raise ValueError("give either `messages` or `append`, not both")
        if self.delta_replace and not self.delta:
            raise ValueError("`delta_replace` needs `delta`")


class SessionOpenParams(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    save_file: str
    pid: int | None = msgspec.field(default=None)
    messages: list[dict[str, Any]] | None = None  # the conversation so far, kept by the daemon
    format: FormatName = "auto"  # the session's message format (docs/FORMATS.md)
    # what a fleet's session=LABEL command addresses (docs/OPERATIONS.md, "A fleet")
    label: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None

    def __post_init__(self) -> None:
        if self.pid is not None and self.pid < 1:
            raise ValueError("pid must be a positive process id")


class SessionCloseParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    session: str


class SessionRecallParams(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """``session.recall``: a tool output of the session's conversation, by handle
    (``"#37"``, ``"37"`` or 37) or by a text it held (docs/PROTOCOL.md)."""

    session: str
    handle: Annotated[str, msgspec.Meta(max_length=MAX_RECALL_HANDLE)] | int | None = None
    search: Annotated[str, msgspec.Meta(max_length=MAX_RECALL_SEARCH)] | None = None


class MetricsParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class StatusParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class ConfigReloadParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


METHOD_PARAMS: Final[dict[str, type[msgspec.Struct]]] = {
    "prepare_prompt": PreparePromptParams,
    "session.open": SessionOpenParams,
    "session.close": SessionCloseParams,
    "session.recall": SessionRecallParams,
    "status": StatusParams,
    "metrics": MetricsParams,
    "config.reload": ConfigReloadParams,
}

# --- results ----------------------------------------------------------------------------


class PreparePromptResult(msgspec.Struct, kw_only=True):
    """Either ``messages`` (the whole prepared prompt), its ``layout`` over the
    request's messages (``answer="indices"``, :mod:`scoutd.protocol.layout`),
    or a delta: the first ``keep`` messages of the previous prepared prompt
    (with ``replace``, when asked for, put in by index), then ``append``;
    ``checksum`` covers those ``keep`` messages as they were (:mod:`scoutd.delta`).
    """

    messages: list[Any] | msgspec.UnsetType = msgspec.UNSET
    layout: list[Any] | msgspec.UnsetType = msgspec.UNSET
    keep: int | msgspec.UnsetType = msgspec.UNSET
    replace: list[tuple[int, Any]] | msgspec.UnsetType = msgspec.UNSET
    append: list[Any] | msgspec.UnsetType = msgspec.UNSET
    checksum: int | msgspec.UnsetType = msgspec.UNSET
    report: list[StrategyReport]


class SessionOpenResult(msgspec.Struct, kw_only=True):
    session: str


class SessionRecallResult(msgspec.Struct, kw_only=True):
    """The recall tool's answer: ``text`` (the output itself, or why there is none:
    ``found`` false), and the ``handle`` of the output returned."""

    text: str
    handle: int | None = None
    found: bool = False


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
    pending_request_bytes: int = 0  # of request lines not yet complete or not yet answered
    rescans: int = 0  # periodic rescans of the watched inboxes completed since start
    queued_response_bytes: int = 0  # of answers produced and not yet read, all connections
    session_bytes: int = 0  # what the stored conversations of all sessions hold in memory


class Latency(msgspec.Struct, kw_only=True):
    count: int  # requests measured since start
    p50_ms: float  # percentiles over the most recent requests
    p99_ms: float
    max_ms: float  # maximum since start


class MetricsResult(msgspec.Struct, kw_only=True):
    """The Prometheus text exposition of the daemon's counters (docs/PROTOCOL.md)."""

    text: str


class DaemonIdentity(msgspec.Struct, kw_only=True):
    """Who the daemon acts as and where it serves: what ``scoutd notify`` and
    ``scoutd abort`` check a chat against (docs/PROTOCOL.md, ``status``)."""

    uid: int
    gid: int
    groups: list[int]  # supplementary groups
    allowed_roots: list[str]  # resolved, as the daemon compares save files


class FleetStatus(msgspec.Struct, kw_only=True):
    """The daemon's link to its fleet (docs/OPERATIONS.md, "A fleet")."""

    host: str
    connected: bool  # Redis answers now
    caught_up: bool  # the commands pending for this host were read since the last connect
    last_error: str | None = None
    disconnected_for: float = 0.0  # seconds since the link was lost (0 while connected)
    commands: int = 0  # commands read and acknowledged since start
    delivered: int = 0  # chats written to since start
    reconnects: int = 0


class StatusResult(msgspec.Struct, kw_only=True):
    version: str
    uptime: float  # seconds
    config: ConfigStatus
    counts: Counts
    latency: Latency
    daemon: DaemonIdentity | None = None  # None from a daemon older than the field
    fleet: FleetStatus | None = None  # None without a [fleet] table


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


class TooLargeData(msgspec.Struct, kw_only=True, omit_defaults=True):
    limit: int
    key: str = ""  # the configuration key of the bound passed


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


class ResultResponse(msgspec.Struct, kw_only=True):
    """A success response as the daemon writes it."""

    jsonrpc: Literal["2.0"]
    id: RequestId
    result: Any


class ErrorResponse(msgspec.Struct, kw_only=True):
    """An error response as the daemon writes it."""

    jsonrpc: Literal["2.0"]
    id: RequestId
    error: ErrorObject


class Envelope(msgspec.Struct, kw_only=True):
    """A request's members, params left raw until the method is known."""

    jsonrpc: Literal["2.0"]
    method: str
    id: RequestId | msgspec.UnsetType = msgspec.UNSET
    params: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class IdOnly(msgspec.Struct):
    """Just the ``id`` of a line, to answer a structurally invalid request."""

    id: RequestId = None


class Request(msgspec.Struct, kw_only=True):
    """A decoded request; ``params`` stays raw until the method is known."""

    method: str
    id: RequestId
    notification: bool  # no ``id`` member: execute, never answer
    params: msgspec.Raw | None
