"""Tool traffic inside a conversation: decoding, pairing, positions, rewriting.

Every strategy starts with :func:`index_tools`, which decodes each tool
message's JSON exactly once and works out the pairs and the newest-first
positions (SPEC sections 1 and 5). A tool message whose content is not a JSON
object is *unusable*: it is not indexed, so it counts nowhere and is passed
through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .text import shorten_string

__all__ = [
    "CALL",
    "OUTPUT",
    "TOOL_ROLES",
    "ToolIndex",
    "ToolMessage",
    "call_key",
    "encode_json",
    "index_tools",
    "role_of",
    "shortened_call",
    "shortened_output",
    "with_content",
]

CALL = "function_call"
OUTPUT = "function_call_output"
TOOL_ROLES = frozenset((CALL, OUTPUT))
ARGUMENT_SIZE = 200
OUTPUT_SIZE = 400

_decode = msgspec.json.Decoder().decode
# msgspec writes compact JSON in the key order of the dict, raw UTF-8, `/`
# unescaped and lowercase \u00xx escapes: byte-identical to the original's output.
_encode = msgspec.json.Encoder().encode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def encode_json(value: Any) -> str:
    """Compact JSON text of ``value`` as the strategies write it."""
    return _encode(value).decode("utf-8")


def role_of(message: Any) -> Any:
    """The ``role`` of a message, or None when the message is not a mapping."""
    if type(message) is dict or isinstance(message, Mapping):
        return message.get("role")
    return None


def with_content(message: Mapping[str, Any], content: str) -> dict[str, Any]:
    """A new message with the same keys as ``message`` and a new ``content``."""
    changed = dict(message)
    changed["content"] = content
    return changed


@dataclass(slots=True)
class ToolMessage:
    """One usable tool message (its content decoded to a JSON object)."""

    index: int  # where it stands in the message list
    is_call: bool
    data: dict[str, Any]
    # newest-first number of its output (SPEC 5); an unpaired call takes the
    # number of the nearest newer output, or 0 when there is none
    position: int = 0
    partner: int = -1  # index into ToolIndex.tools of the other half of its pair
    number: int = 0  # outputs only: 1-based number counted oldest-first


@dataclass(slots=True)
class ToolIndex:
    """The usable tool messages of a conversation, oldest first."""

    tools: list[ToolMessage] = field(default_factory=list)
    outputs: int = 0


def _decode_object(content: Any) -> dict[str, Any] | None:
    if type(content) is not str:
        return None
    try:
        data = _decode(content)
    except (msgspec.DecodeError, UnicodeError):
        return None
    return data if type(data) is dict else None


def _pair_key(ident: Any) -> Any:
    """A hashable key for an ``id``, or None when it cannot pair."""
    if ident is None or isinstance(ident, (list, dict)):
        return None
    return ident if type(ident) is str else (type(ident).__name__, ident)


def index_tools(messages: Sequence[Any]) -> ToolIndex:
    """Decode, pair and number the usable tool messages of ``messages``.

    Pairing goes forward: a call waits under its ``id`` until an output with the
    same ``id`` arrives (a later call with the same ``id`` replaces a waiting one).
    """
    tools: list[ToolMessage] = []
    waiting: dict[Any, int] = {}
    outputs_before: list[int] = []  # per tool: outputs seen before it
    outputs = 0
    for index, message in enumerate(messages):
        role = role_of(message)
        if role != CALL and role != OUTPUT:
            continue
        data = _decode_object(message.get("content"))
        if data is None:
            continue
        key = _pair_key(data.get("id"))
        tool = ToolMessage(index, role == CALL, data)
        if tool.is_call:
            if key is not None:
                waiting[key] = len(tools)
        else:
            outputs += 1
            tool.number = outputs
            if key is not None and key in waiting:
                partner = waiting.pop(key)
                tool.partner = partner
                tools[partner].partner = len(tools)
        outputs_before.append(outputs if tool.is_call else outputs - 1)
        tools.append(tool)
    for tool, before in zip(tools, outputs_before, strict=True):
        if tool.is_call and tool.partner >= 0:
            tool.position = outputs - tools[tool.partner].number + 1
        elif tool.is_call:
            tool.position = outputs - before
        else:
            tool.position = outputs - tool.number + 1
    return ToolIndex(tools, outputs)


def call_key(data: Mapping[str, Any]) -> tuple[str, str]:
    """The repeat-detection key of a call: its name and canonical arguments.

    Object keys are sorted at every depth; values keep their JSON type, so
    ``1``, ``1.0`` and ``true`` give three different keys. Missing or null
    arguments count as ``{}``.
    """
    name = data.get("name")
    arguments = data.get("arguments")
    if arguments is None:
        arguments = {}
    name_text = name if type(name) is str else _encode_sorted(name).decode("utf-8")
    return name_text, _encode_sorted(arguments).decode("utf-8")


def shortened_call(data: Mapping[str, Any]) -> str | None:
    """New content for a call with its long top-level string arguments shortened.

    None when nothing changes (arguments missing, not an object, or short).
    """
    arguments = data.get("arguments")
    if type(arguments) is not dict:
        return None
    changed: dict[str, Any] | None = None
    for name, value in arguments.items():
        if type(value) is str and len(value) > ARGUMENT_SIZE:
            short = shorten_string(value, ARGUMENT_SIZE)
            if short != value:
                if changed is None:
                    changed = dict(arguments)
                changed[name] = short
    if changed is None:
        return None
    rewritten = dict(data)
    rewritten["arguments"] = changed
    return encode_json(rewritten)


def shortened_output(data: Mapping[str, Any]) -> str | None:
    """New content for an output with its ``content`` shortened.

    A non-string content is shortened as its compact JSON text. None when
    nothing changes (content missing, null, or short).
    """
    content = data.get("content")
    if content is None:
        return None
    text = content if type(content) is str else encode_json(content)
    if len(text) <= OUTPUT_SIZE:
        return None
    short = shorten_string(text, OUTPUT_SIZE)
    if short == text:
        return None
    rewritten = dict(data)
    rewritten["content"] = short
    return encode_json(rewritten)
