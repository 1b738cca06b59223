"""The texts of a message, by who wrote them, in every supported format.

The hidden-fact measure (:mod:`.facts`) needs to know, for each message of a
recorded conversation, which text came from the operator (system and user
text), which from the agent (its text, its reasoning and its tool-call
arguments) and which from a tool (tool outputs). Each :class:`Part` says it,
and for tool traffic carries the call id that pairs a call with its output,
the tool's name and, for a call, its arguments as text. A Responses call of a
built-in kind (shell, local shell, apply_patch, computer, custom) and an OpenAI
Chat ``custom`` call are read as the strategies see them
(:mod:`scoutd.formats.openai_responses_items`): their action or input is the
agent's, their outputs' text (shell chunks, a log) a tool's; a screenshot holds
no text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ..formats import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, SCOUT
from ..formats.openai_responses_items import (
    CALL_KINDS,
    COMPUTER_OUTPUT,
    OUTPUT_KINDS,
    call_arguments,
    call_name,
    output_id,
    output_text,
)

__all__ = ["ACTION", "OUTPUT", "SOURCE", "Part", "message_parts", "strings"]

SOURCE = "source"  # system and user text: what the operator gave the agent
ACTION = "action"  # what the agent wrote: text, reasoning, tool-call arguments
OUTPUT = "output"  # what a tool returned

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder(order="deterministic").encode


@dataclass(frozen=True, slots=True)
class Part:
    """One text of a message: its kind, the text, and for tool traffic its pairing."""

    kind: str
    text: str
    call_id: str | None = None
    tool: str | None = None  # a call's tool name (calls only)
    # A call's arguments as the strategies see them: a function call's JSON text, the
    # object of a call of another kind (a Responses shell, apply_patch, computer or
    # custom call). None: the text is the arguments.
    arguments: Any = None


def strings(value: Any) -> Iterator[str]:
    """Every string and number inside a JSON-like value, depth first.

    A number is given as its JSON text: a tool call's arguments are what the
    agent wrote, and ``{"offset": 1200}`` names 1200 as much as the JSON text
    of an OpenAI call's arguments does (a boolean or null names nothing).
    """
    if type(value) is str:
        yield value
    elif type(value) is int or type(value) is float:
        yield _encode(value).decode()
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def _arguments_text(arguments: Any) -> str:
    """The text of a function call's arguments, read as an Anthropic input is: the
    strings and numbers of the JSON they hold (``"a\\nb"`` is ``a``, a line break,
    ``b``, not the escape), or the text itself when it is no JSON."""
    if type(arguments) is str:
        text: str = arguments
        try:
            arguments = _decode(text)
        except (msgspec.DecodeError, UnicodeError, RecursionError):
            return text
    return arguments if type(arguments) is str else "\n".join(strings(arguments))


def _text(value: Any) -> str:
    """The text of a content value: a string, or the ``text`` of its blocks."""
    if type(value) is str:
        return value
    if isinstance(value, list):
        texts = []
        for block in value:
            if type(block) is str:
                texts.append(block)
            elif isinstance(block, Mapping) and type(block.get("text")) is str:
                texts.append(block["text"])
        return "\n".join(texts)
    return ""


def _ident(value: Any) -> str | None:
    return value if type(value) is str else None


def _openai_chat(message: Mapping[str, Any]) -> list[Part]:
    role = message.get("role")
    if role == "tool":
        return [Part(OUTPUT, _text(message.get("content")), _ident(message.get("tool_call_id")))]
    if role != "assistant":
        return [Part(SOURCE, _text(message.get("content")))]
    parts = [Part(ACTION, _text(message.get("content")))]
    reasoning = message.get("reasoning_content")
    if type(reasoning) is str:
        parts.append(Part(ACTION, reasoning))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        custom = call.get("custom")
        if call.get("type") == "custom" and isinstance(custom, Mapping):
            given = custom.get("input")  # a freeform tool's text: its one argument
            text = given if type(given) is str else ""
            name = _ident(custom.get("name"))
            parts.append(Part(ACTION, text, _ident(call.get("id")), name, {"input": text}))
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        arguments = function.get("arguments")
        ident, name = _ident(call.get("id")), _ident(function.get("name"))
        parts.append(Part(ACTION, _arguments_text(arguments), ident, name, arguments))
    return parts


def _anthropic(message: Mapping[str, Any]) -> list[Part]:
    content = message.get("content")
    mine = message.get("role") == "assistant"
    if not isinstance(content, list):
        return [Part(ACTION if mine else SOURCE, _text(content))]
    parts = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            parts.append(
                Part(OUTPUT, _text(block.get("content")), _ident(block.get("tool_use_id")))
            )
        elif kind == "tool_use":
            text = "\n".join(strings(block.get("input")))
            parts.append(Part(ACTION, text, _ident(block.get("id")), _ident(block.get("name"))))
        elif kind == "text" and type(block.get("text")) is str:
            parts.append(Part(ACTION if mine else SOURCE, block["text"]))
        elif kind == "thinking" and type(block.get("thinking")) is str:
            parts.append(Part(ACTION, block["thinking"]))
    return parts


def _openai_responses(item: Mapping[str, Any]) -> list[Part]:
    kind = item.get("type")
    if kind == "function_call_output":
        return [Part(OUTPUT, _text(item.get("output")), _ident(item.get("call_id")))]
    if kind == "function_call":
        arguments = item.get("arguments")
        ident, name = _ident(item.get("call_id")), _ident(item.get("name"))
        return [Part(ACTION, _arguments_text(arguments), ident, name, arguments)]
    if type(kind) is str and kind in OUTPUT_KINDS:  # a screenshot holds no fact
        shown = None if kind == COMPUTER_OUTPUT else output_text(item)
        return [Part(OUTPUT, shown or "", _ident(output_id(item)))]
    if type(kind) is str and kind in CALL_KINDS:
        arguments = call_arguments(item)
        text = "\n".join(strings(arguments))
        ident, name = _ident(item.get("call_id")), _ident(call_name(item))
        return [Part(ACTION, text, ident, name, arguments)]
    if kind == "reasoning":
        return [Part(ACTION, "\n".join(strings(item.get("summary"))))]
    mine = item.get("role") == "assistant"
    return [Part(ACTION if mine else SOURCE, _text(item.get("content")))]


def _scout(message: Mapping[str, Any]) -> list[Part]:
    role, content = message.get("role"), message.get("content")
    if role not in ("function_call", "function_call_output"):
        return [Part(ACTION if role == "assistant" else SOURCE, _text(content))]
    data: Any = None
    if type(content) is str:
        try:
            data = _decode(content)
        except (msgspec.DecodeError, UnicodeError, RecursionError):
            data = None
    data = data if isinstance(data, dict) else {}
    ident = data.get("id")
    ident = str(ident) if isinstance(ident, (str, int)) else None
    if role == "function_call_output":
        return [Part(OUTPUT, _text(data.get("content", content)), ident)]
    arguments = {k: v for k, v in data.items() if k not in ("id", "name")}
    text = "\n".join(strings(arguments)) if data else _text(content)
    return [Part(ACTION, text, ident, _ident(data.get("name")))]


_READERS = {
    OPENAI_CHAT: _openai_chat,
    ANTHROPIC: _anthropic,
    OPENAI_RESPONSES: _openai_responses,
    SCOUT: _scout,
}


def message_parts(message: Any, format_name: str) -> list[Part]:
    """The texts of ``message`` (in ``format_name``), each with its kind.

    A message that is not a mapping yields its strings as operator text (it is
    nobody's tool traffic); empty texts are left out, except tool outputs
    (an empty output is still one output of the run) and tool calls (a call
    without arguments is still the agent's answer, in every format).
    """
    if not isinstance(message, Mapping):
        return [Part(SOURCE, text) for text in strings(message) if text]
    reader = _READERS.get(format_name, _scout)
    return [
        part
        for part in reader(message)
        if part.text or part.kind == OUTPUT or part.call_id is not None
    ]


def encode(message: Any) -> str:
    """A stable text of a message, to recognise an unchanged copy of it."""
    try:
        return _encode(message).decode("utf-8", "replace")
    except (TypeError, msgspec.EncodeError):
        return repr(message)
