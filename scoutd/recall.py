"""Recall: a tool output that a prompt shortened or removed, read back whole.

Pure code (docs/STRATEGIES.md, "Recall"). A tool output's *handle* is its
oldest-first number among the conversation's usable tool outputs, ``#N``: the
number the strategies' tool index gives it (:mod:`scoutd.strategies.tool_messages`),
written in the placeholder of a shortened output when ``[prompt] recall`` is
on. The stored conversation only grows, so a handle names the same output in
every later round, in any process that holds the same conversation.

:func:`recall_tool` gives the tool's definition in each provider format;
:func:`find_output` answers a call of it from a conversation in any format,
and never raises for what a model may send: an unknown or malformed handle, or
a search that matches nothing, gets a tool-error text. A conversation is one
session's own: nothing here can reach another's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .formats import ANTHROPIC, AUTO, OPENAI_CHAT, OPENAI_RESPONSES, scout_view
from .paths import safe_text
from .protocol.recall_args import (
    MAX_HANDLE_DIGITS,
    MIN_SEARCH,
    NO_CONVERSATION,
    arguments_problem,
    parse_handle,
    recall_question,
)
from .strategies.tool_messages import (
    ToolBody,
    ToolIndex,
    decode_body,
    encode_json,
    index_tools,
)

__all__ = [
    "MAX_HANDLE_DIGITS",
    "MIN_SEARCH",
    "NO_CONVERSATION",
    "RECALL_DESCRIPTION",
    "RECALL_PARAMETERS",
    "RECALL_TOOL_NAME",
    "Recalled",
    "arguments_of",
    "arguments_problem",
    "find_output",
    "parse_handle",
    "recall_output",
    "recall_parameters",
    "recall_tool",
]

RECALL_TOOL_NAME = "recall"
RECALL_DESCRIPTION = (
    "Read again, whole and exactly, a tool output that this conversation now shows"
    " shortened or no longer shows. Tool outputs are numbered #1, #2, ... from the oldest; a"
    ' shortened one says "recall #N" and the compaction notice lists the removed ones.'
    ' Give handle (e.g. "#37") or search (a text that the output, or the arguments of its'
    " call, contained: the newest such output that is not shown whole is returned)."
)
RECALL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "handle": {
            "type": "string",
            "description": 'The output\'s number, as "#37" or "37".',
        },
        "search": {
            "type": "string",
            "description": "A text the output or its call's arguments contained.",
        },
    },
    "additionalProperties": False,
}
# The recall tool's parameters: any other key a model sends is refused by name.
PARAMETER_NAMES = ("handle", "search")
NOT_AN_OBJECT = 'the recall arguments must be a JSON object: {"handle": "#37"}'
# The most unknown keys a refusal names, and the characters of each it quotes.
MAX_NAMED_KEYS, MAX_KEY_CHARS = 8, 40


def recall_parameters() -> dict[str, Any]:
    """The tool's parameters' JSON schema, a new copy (a framework may change its own)."""
    copied: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(RECALL_PARAMETERS))
    return copied


def recall_tool(format: str = OPENAI_CHAT) -> dict[str, Any]:
    """The recall tool's definition for ``format``'s requests (a new dict each call).

    ``openai-chat``: a Chat Completions function tool (``{"type": "function",
    "function": {...}}``); ``openai-responses``: a Responses function tool
    (``{"type": "function", "name": ..., "strict": false, ...}``); ``anthropic``:
    a Messages tool (``{"name": ..., "input_schema": ...}``).

    Raises:
        ValueError: another format name.
    """
    parameters = recall_parameters()
    if format == OPENAI_CHAT:
        return {
            "type": "function",
            "function": {
                "name": RECALL_TOOL_NAME,
                "description": RECALL_DESCRIPTION,
                "parameters": parameters,
            },
        }
    if format == OPENAI_RESPONSES:
        return {
            "type": "function",
            "name": RECALL_TOOL_NAME,
            "description": RECALL_DESCRIPTION,
            "parameters": parameters,
            "strict": False,  # both parameters are optional, which strict mode forbids
        }
    if format == ANTHROPIC:
        return {
            "name": RECALL_TOOL_NAME,
            "description": RECALL_DESCRIPTION,
            "input_schema": parameters,
        }
    raise ValueError(
        f"no recall tool definition for format {format!r}:"
        f" {OPENAI_CHAT}, {OPENAI_RESPONSES} or {ANTHROPIC}"
    )


@dataclass(frozen=True, slots=True)
class Recalled:
    """A recall's answer: the tool's ``text``, and the ``handle`` of the output it
    returns (None, with ``found`` False, when the text says why there is none)."""

    text: str
    handle: int | None = None
    found: bool = False


def recall_output(
    messages: Sequence[Any],
    handle: str | int | None = None,
    search: str | None = None,
    *,
    format: str = AUTO,
    visible: Sequence[Any] | None = None,
) -> str:
    """The recall tool's answer over ``messages``: :func:`find_output`'s text."""
    return find_output(messages, handle, search, format=format, visible=visible).text


def arguments_of(given: Any) -> tuple[Any, Any] | str:
    """``(handle, search)`` from a recall call's arguments as a framework decoded them,
    or the tool-error text for arguments that are not an object of those two keys.

    One rule for every integration, so a model gets the same text from each:
    arguments that are not an object, or an object with another key (the schema
    allows none), are refused rather than half read. The types of the two values
    are :func:`arguments_problem`'s to check.
    """
    if not isinstance(given, Mapping):
        return NOT_AN_OBJECT
    unknown = [key for key in given if key not in PARAMETER_NAMES]
    if unknown:
        names = sorted(safe_text(str(key)[:MAX_KEY_CHARS]) for key in unknown)  # stays UTF-8
        more = len(names) - MAX_NAMED_KEYS
        listed = ", ".join(names[:MAX_NAMED_KEYS]) + (f" and {more} more" if more > 0 else "")
        return f"unknown recall arguments: {listed} (handle, search)"
    return given.get("handle"), given.get("search")


def find_output(
    messages: Sequence[Any],
    handle: str | int | None = None,
    search: str | None = None,
    *,
    format: str = AUTO,
    visible: Sequence[Any] | None = None,
) -> Recalled:
    """Answer a recall call over the whole conversation ``messages`` (any format).

    ``handle`` (``"#37"``, ``"37"`` or 37) gives output #37's exact text: a
    string content as it is, a block list as its text blocks joined (images
    as ``[image]``), any other JSON value as compact JSON. Else ``search``
    gives the newest output whose text, or whose call's arguments, contain it,
    the answer starting with its handle on a line of its own; an output shown
    whole in ``visible`` (the last prompt prepared from ``messages``) and the
    answers of earlier recall calls are passed over. ``messages`` is only read.
    """
    question = recall_question(handle, search)
    if isinstance(question, str):  # answered without the conversation
        return Recalled(question)
    number, search = question
    try:
        view = scout_view(messages, format)
    except ValueError as exc:  # messages that mix formats: nothing to number
        return Recalled(f"the conversation cannot be read: {exc}")
    index = index_tools(view)
    outputs = [slot for slot, is_call in enumerate(index.is_call) if not is_call]
    if number is not None:
        if number > len(outputs):
            return Recalled(f"no output #{number}: {_holds(len(outputs))}")
        return Recalled(_output_text(index, view, outputs[number - 1]), number, True)
    assert search is not None
    shown = _shown_whole(visible, format)
    for slot in reversed(outputs):
        partner = index.partners[slot]
        if partner >= 0 and index.bodies[partner].name == RECALL_TOOL_NAME:
            continue  # an earlier recall's answer holds what it found, not an output of its own
        text = _output_text(index, view, slot)
        if text in shown:
            continue
        if search in text or (partner >= 0 and _in_arguments(search, index, partner)):
            found = index.numbers[slot]
            return Recalled(f"#{found}\n{text}", found, True)
    return Recalled(
        f"no tool output shortened or removed from the prompt contains {search[:80]!r}"
        f" ({_holds(len(outputs))})"
    )


def _holds(count: int) -> str:
    """How many outputs the conversation holds, and their handles."""
    if count == 0:
        return "this conversation has no tool outputs"
    if count == 1:
        return "this conversation has 1 tool output, #1"
    return f"this conversation has {count} tool outputs, #1-#{count}"


def _output_text(index: ToolIndex, view: Sequence[Any], slot: int) -> str:
    """The original text of output ``slot``: its string content, else compact JSON."""
    value = decode_body(index.content(view, slot)).get("content")
    if type(value) is str:
        return value
    return "" if value is None else encode_json(value)


def _in_arguments(search: str, index: ToolIndex, call: int) -> bool:
    """Whether ``search`` is in the call's arguments: a string leaf (the arguments
    themselves when they are no JSON), or their JSON text (a number, a key)."""
    arguments = index.bodies[call].arguments
    stack = [arguments]
    while stack:
        value = stack.pop()
        if type(value) is str:
            if search in value:
                return True
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return search in encode_json(arguments)


def _shown_whole(visible: Sequence[Any] | None, format: str) -> frozenset[str]:
    """The texts of the outputs ``visible`` (a prepared prompt) shows whole: a recall
    answer found by search shows its output whole after the ``#N`` line, so that
    output is shown whole too (a search again finds the next one, not it again)."""
    if not visible:
        return frozenset()
    try:
        # not mutated: a prompt is in its conversation's format, which detection finds too
        view = scout_view(visible, format)  # pragma: no mutate
    except ValueError:
        return frozenset()
    index = index_tools(view)
    shown = set()
    for slot, is_call in enumerate(index.is_call):
        if is_call:
            continue
        text = _output_text(index, view, slot)
        shown.add(text)
        partner = index.partners[slot]
        if partner >= 0 and _searched(index.bodies[partner]):
            first, newline, rest = text.partition("\n")
            if newline and first.startswith("#") and parse_handle(first) is not None:
                shown.add(rest)
    return frozenset(shown)


def _searched(call: ToolBody) -> bool:
    """Whether ``call`` is a recall call by search (its answer starts with ``#N``)."""
    arguments = call.arguments
    if call.name != RECALL_TOOL_NAME or not isinstance(arguments, Mapping):
        return False
    return arguments.get("handle") in (None, "") and type(arguments.get("search")) is str
