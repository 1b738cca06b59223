"""What travels through Redis: commands, receipts, heartbeats and session events (pure).

Each stream entry holds one JSON document in one field (``FIELD``), decoded
into a frozen Struct that forbids unknown fields: a host reads nothing from a
stream but these shapes, and acts on nothing but a notice or an abort
(docs/OPERATIONS.md, "A fleet").
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

import msgspec

from ..paths import safe_value

__all__ = [
    "FIELD",
    "MAX_ISSUED",
    "MAX_PATTERN_PARTS",
    "MAX_TEXT_BYTES",
    "Command",
    "HostBeat",
    "Keys",
    "Receipt",
    "SessionEvent",
    "SessionView",
    "TargetError",
    "check_pattern",
    "decode_beat",
    "decode_command",
    "encode",
    "new_command_id",
]

FIELD = "d"  # the one field of a stream entry: the JSON document
# A notice is a message to a model, and an abort's reason is shown to the agent:
# bounded like the inbox's own files (PromptConfig.inbox_max_bytes' default).
MAX_TEXT_BYTES = 1024 * 1024
# A command id is ours (the publisher's), not the stream's: the operator knows it
# before the XADD returns, and a host keys its record of deliveries on it.
CommandId = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]
Selector = Literal["all", "host", "label", "chat", "session"]
# The latest issue time a command may carry (seconds since the epoch, in 2286): its
# notice's name holds it in nanoseconds, in 20 digits.
MAX_ISSUED = 1e10
# The most components a chat glob may have: a host walks that deep at most.
MAX_PATTERN_PARTS = 64


class TargetError(ValueError):
    """A target that names no chats the way the fleet addresses them."""


def check_pattern(pattern: str) -> None:
    """Refuse a chat glob that is not absolute, climbs (``..``), holds a NUL or is
    deeper than :data:`MAX_PATTERN_PARTS` components."""
    if not pattern.startswith("/"):
        raise TargetError(f"chat pattern {pattern!r} is not an absolute path")
    parts = pattern.split("/")
    if "\0" in pattern or ".." in parts:
        raise TargetError(f"chat pattern {pattern!r} holds '..' or a NUL")
    if len(parts) - 1 > MAX_PATTERN_PARTS:
        raise TargetError(f"chat pattern has over {MAX_PATTERN_PARTS} components")


_encode = msgspec.json.Encoder().encode


def encode(value: Any) -> bytes:
    """The JSON of ``value``, always: a string that cannot be UTF-8 (a path's
    undecodable byte, as Python keeps it) is written escaped (``\\xNN``), so that
    no name on a host can stop its receipts or heartbeats (docs/OPERATIONS.md)."""
    try:
        return _encode(value)
    except UnicodeEncodeError:
        return _encode(safe_value(msgspec.to_builtins(value)))


class Command(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A notice or an abort for the chats ``selector`` = ``value`` names."""

    id: CommandId
    kind: Literal["notice", "abort"]
    selector: Selector
    value: Annotated[str, msgspec.Meta(max_length=4096)] = ""
    text: str = ""  # the notice, or the abort's reason
    # the publisher's clock, seconds since the epoch
    issued: Annotated[float, msgspec.Meta(ge=0, le=MAX_ISSUED)] = 0.0
    by: Annotated[str, msgspec.Meta(max_length=200)] = ""  # who published it (informative)

    def __post_init__(self) -> None:
        if len(self.text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
            raise ValueError(f"text is over {MAX_TEXT_BYTES} bytes")
        if self.kind == "notice" and not self.text.strip():
            raise ValueError("a notice needs a text")
        if (self.selector == "all") != (self.value == ""):
            raise ValueError("selector 'all' takes no value; every other selector needs one")
        if self.selector == "chat":  # refused here, whoever published it, as by the CLI
            check_pattern(self.value)


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """What one host did with one command: the chats it reached, when."""

    command: str
    host: str
    at: float
    chats: list[str] = msgspec.field(default_factory=list)  # save files written to
    already: list[str] = msgspec.field(default_factory=list)  # delivered before (a redelivery)
    refused: list[str] = msgspec.field(default_factory=list)  # why a match was not delivered
    error: str | None = None  # the command could not be read or applied at all


class SessionView(msgspec.Struct, frozen=True, kw_only=True):
    """One open session as the fleet sees it (the daemon hands these over)."""

    id: str
    save_file: str  # resolved
    label: str | None = None  # given by its client at session.open
    aborted: bool = False


class HostBeat(msgspec.Struct, frozen=True, kw_only=True):
    """A host's heartbeat: alive at ``at``, serving these sessions."""

    host: str
    at: float
    labels: list[str] = msgspec.field(default_factory=list)
    roots: list[str] = msgspec.field(default_factory=list)
    interval: float = 5.0
    sessions: int = 0
    listed: list[SessionView] = msgspec.field(default_factory=list)  # the first MAX_LISTED
    delivered: int = 0  # commands delivered since start
    version: str = ""
    instance: str = ""  # this run of the daemon: random at each start
    conflict: str = ""  # why another daemon is seen beating under this name; "": none


class SessionEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A session opened, aborted or closed on a host."""

    host: str
    at: float
    event: Literal["opened", "aborted", "closed"]
    session: str
    save_file: str


_command_decoder = msgspec.json.Decoder(Command)
_beat_decoder = msgspec.json.Decoder(HostBeat)


def decode_beat(data: bytes | str) -> HostBeat:
    """A heartbeat as a host wrote it (``msgspec.DecodeError``, or ``RecursionError`` for
    an unknown field nested past the decoder's depth, otherwise)."""
    return _beat_decoder.decode(data)


def decode_command(data: bytes) -> Command:
    """A stream entry's document as a :class:`Command` (``msgspec.ValidationError`` otherwise)."""
    return _command_decoder.decode(data)


def new_command_id() -> str:
    return secrets.token_hex(16)


class Keys(msgspec.Struct, frozen=True):
    """The Redis keys of one fleet, all under ``prefix`` (one ACL pattern covers them)."""

    prefix: str

    @property
    def commands(self) -> str:
        return f"{self.prefix}:commands"  # stream: operators write, hosts read

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"  # stream: session events, hosts write

    @property
    def hosts(self) -> str:
        return f"{self.prefix}:hosts"  # hash: host -> its last HostBeat

    def receipts(self, command: str) -> str:
        return f"{self.prefix}:receipt:{command}"  # hash: host -> Receipt, expires

    @staticmethod
    def group(host: str) -> str:
        return f"host:{host}"  # each host's own consumer group on the command stream
