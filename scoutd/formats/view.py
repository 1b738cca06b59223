"""The scout view of a provider conversation, and the way back.

An adapter turns provider messages into the tool-message view the strategies
work on (docs/STRATEGIES.md): one ``function_call`` message per call and one
``function_call_output`` message per output, whose content is a JSON object
text, plus the provider's other messages as they are. Every view message that
the adapter made carries :data:`VIEW_KEY` (its own index), which survives a
strategy's rewrite; provider messages placed in the view as they are keep their
identity. :func:`outcome` reads a strategy's result against the view: which
view messages were kept, rewritten or dropped, and which new messages (the
compaction notice, inbox notices) were put before which provider message.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import eq
from typing import Any

import msgspec

from ..strategies.text import json_text

__all__ = [
    "ORIGIN_KEY",
    "DECODE_ERRORS",
    "ENCODE_ERRORS",
    "KEPT",
    "PASSTHROUGH",
    "Malformed",
    "TEXT_PART",
    "VIEW_KEY",
    "Outcome",
    "Rebuilt",
    "View",
    "blocks_text",
    "call_message",
    "call_text",
    "encode_arguments",
    "outcome",
    "output_message",
    "output_text",
    "rewritten_arguments",
    "rewritten_output",
    "with_body_fields",
]

VIEW_KEY = "scoutd.view"
# The key an integration ties a provider message to its framework's object with
# (LangChain, Pydantic AI): the framework's object is what is sent, never this key.
ORIGIN_KEY = "scoutd_origin"
SCOUT_TOOL_ROLES = ("function_call", "function_call_output")
KEPT: Any = True  # fate of a view message the strategies kept as it was
PASSTHROUGH = -2  # ref of a provider message placed in the view as it is
TEXT_PART = -1  # ref of an assistant message's text, seen apart from its calls

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
# What decoding or encoding a hostile value raises (a lone surrogate, a huge integer, ...).
# RecursionError: a text nested deeper than the decoder goes is not JSON to us, as the
# strategies' index reads it (strategies/tool_messages.py), never a refusal of the call.
DECODE_ERRORS = (msgspec.DecodeError, TypeError, UnicodeError, ValueError, RecursionError)
ENCODE_ERRORS = (msgspec.EncodeError, TypeError, UnicodeError, ValueError, OverflowError)


class Malformed(Exception):
    """A message breaks its format's rules: it is passed through and counted."""


@dataclass(slots=True)
class View:
    """The scout view of ``len(starts) - 1`` provider messages.

    View messages ``starts[p]:starts[p + 1]`` stand for provider message ``p``;
    ``refs`` says what each one is within it (a block or call index, or
    :data:`TEXT_PART` / :data:`PASSTHROUGH`). ``malformed`` counts provider
    messages passed through untouched because they break their format's rules.
    """

    messages: list[Any] = field(default_factory=list)
    refs: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=lambda: [0])
    malformed: int = 0
    mark: bool = True
    # (text, body) by id(text): what the strategies parsed in the previous prepare, handed
    # over so that a text the adapter reused is not decoded again; ``parsed`` (None: not
    # wanted) receives what they parse now (docs/PERFORMANCE.md)
    bodies: dict[int, tuple[str, Any]] = field(default_factory=dict)
    parsed: dict[int, tuple[str, Any]] | None = None

    def owner(self, view_index: int) -> int:
        """The provider message that view message ``view_index`` stands for."""
        return bisect.bisect_right(self.starts, view_index) - 1

    def add(self, message: Any, ref: int) -> None:
        """Append a view message for the current provider message."""
        if self.mark and ref != PASSTHROUGH:
            message[VIEW_KEY] = len(self.messages)
        self.messages.append(message)
        self.refs.append(ref)

    def close(self) -> None:
        """End the current provider message."""
        self.starts.append(len(self.messages))

    def rollback(self, messages: int, starts: int) -> None:
        """Forget what was added after the view had ``messages`` messages and ``starts`` starts."""
        del self.messages[messages:], self.refs[messages:], self.starts[starts:]

    def passthrough(self, message: Any, calls: bool = False) -> None:
        """Put a provider message in the view as it is.

        A message carrying a scout tool role (foreign traffic in a provider
        format) is shown to the strategies as a neutral stand-in, so that they
        never take it for one of their tool messages; it comes back as it was.
        Its other fields are the stand-in's content, which the estimate counts
        (without them, a 100 KB message of that role counted for nothing).
        So is, with ``calls``, a message holding tool calls the adapter passes
        through (custom or legacy calls, a malformed group): as an assistant
        message the strategies would drop it as a remark and keep the messages
        answering it. Its stand-in keeps its content, which the strategies count.
        """
        if isinstance(message, Mapping):
            if message.get("role") in SCOUT_TOOL_ROLES:
                fields = {key: value for key, value in message.items() if key != "role"}
                message = {"role": "passthrough", "content": [fields]}
            elif calls:
                message = {"role": "passthrough", "content": message.get("content")}
        self.messages.append(message)
        self.refs.append(PASSTHROUGH)
        self.starts.append(len(self.messages))


@dataclass(slots=True)
class Outcome:
    """A strategy result read against a view.

    ``fates[v]`` is :data:`KEPT`, None (dropped) or the rewritten view message;
    ``before[p]`` lists new messages to put before provider message ``p``,
    ``after`` those after the last one.
    """

    fates: list[Any]
    before: dict[int, list[Any]]
    after: list[Any]

    @property
    def unchanged(self) -> bool:
        """Whether the result is the view itself, message for message."""
        return not self.before and not self.after and all(f is KEPT for f in self.fates)


@dataclass(slots=True)
class Rebuilt:
    """Provider messages rebuilt from an outcome, with what the adapter did."""

    messages: list[Any]
    narration_dropped: int = 0


def outcome(view: View, result: Sequence[Any]) -> Outcome:
    """Match the strategies' ``result`` with ``view``, message by message.

    A view message the adapter made is found by its mark (the view holds it
    once, and ``prepare`` always marks); the provider's own messages, placed in
    the view as they are, by identity. A marked message that is not the view
    message its mark names is a rewrite of it; anything else is new.
    """
    view_messages = view.messages
    size = len(view_messages)
    # The first index of each provider message wins: filled from the end, in C.
    own = list(compress(range(size), map(eq, view.refs, repeat(PASSTHROUGH))))
    own.reverse()
    by_identity = dict(zip(map(id, map(view_messages.__getitem__, own)), own, strict=True))
    fates: list[Any] = [None] * size
    before: dict[int, list[Any]] = {}
    pending: list[Any] = []
    repeats: dict[int, list[int]] | None = None  # made when an object comes back twice
    cursor = 0
    for message in result:
        i = by_identity.get(id(message), -1)
        if i >= 0 and i < cursor:
            if repeats is None:
                repeats = _positions(view_messages, own)
            i = _identity_from(repeats[id(message)], cursor)
        if i < 0 and type(message) is dict:
            marked = message.get(VIEW_KEY)
            if type(marked) is int and cursor <= marked < size:
                i = marked
        if i < 0:
            pending.append(message)
            continue
        fates[i] = KEPT if message is view_messages[i] else message
        if pending:
            before.setdefault(view.owner(i), []).extend(pending)
            pending = []
        cursor = i + 1
    return Outcome(fates, before, pending)


def _positions(view_messages: list[Any], own: list[int]) -> dict[int, list[int]]:
    """The view positions of each provider message placed as it is, by identity, in order."""
    found: dict[int, list[int]] = {}
    for i in reversed(own):  # ``own`` runs from the end
        found.setdefault(id(view_messages[i]), []).append(i)
    return found


def _identity_from(positions: list[int], start: int) -> int:
    """The first of ``positions`` at or after ``start``, or -1: a binary search, so that a
    result holding one object more often than the view costs no scan of the view."""
    at = bisect.bisect_left(positions, start)
    return positions[at] if at < len(positions) else -1


def blocks_text(content: Any, image: str = "[image]") -> str | None:
    """The text of a tool output: a string as it is, text blocks joined (a search
    result's too), images, files and documents as a short placeholder; None when
    ``content`` is neither a string nor a list of such blocks.
    """
    if type(content) is str:
        return content
    if type(content) is not list:
        return None
    parts = []
    for block in content:
        if not isinstance(block, Mapping):
            return None
        kind = block.get("type")
        text = block.get("text")
        if type(text) is str:
            parts.append(text)
        elif type(kind) is str and "image" in kind:
            parts.append(image)
        elif type(kind) is str and kind.endswith("file"):
            parts.append("[file]")
        elif kind == "document":  # a PDF or text document: its data is never shown
            parts.append("[document]")
        elif kind == "search_result":  # its own text blocks (not read further: no recursion)
            found = _texts(block.get("content"))
            if found is None:
                return None
            parts.append(found)
        else:
            return None
    return "\n".join(parts)


def _texts(content: Any) -> str | None:
    """The text blocks of ``content`` joined; None unless it is a list of text blocks."""
    if type(content) is not list:
        return None
    parts = []
    for block in content:
        text = block.get("text") if isinstance(block, Mapping) else None
        if type(text) is not str:
            return None
        parts.append(text)
    return "\n".join(parts)


def encode_arguments(arguments: Any) -> str:
    """Compact JSON text of a call's arguments object (or of an output's content).

    Raises:
        Malformed: a value JSON cannot hold (a lone surrogate, a key that is not a
            string, another object): the message passes through, as malformed.
    """
    try:
        return _encode(arguments).decode("utf-8")
    except ENCODE_ERRORS as exc:
        raise Malformed(str(exc)) from None


def with_body_fields(text: str, fields: Mapping[Any, Any]) -> str:
    """A view call's body ``text`` with ``fields`` (what its call or answer sends beside
    what the body shows: a tool message's ``name``, a ``tool_use``'s ``caller``) as one
    more key, ``fields``, so that the estimate counts them while the pair is sent.

    Only counted, never sent: a value JSON cannot hold (a key that is not a text, a
    lone surrogate) is measured as JSON writes it, as the daemon would get it, so that
    the pair is read alike in process and through the daemon (never malformed here).
    """
    try:
        encoded = encode_arguments(fields)
    except Malformed:
        encoded = json_text(fields)
    return f'{text[:-1]},"fields":{encoded}}}'


def call_message(name: Any, ident: Any, arguments: Any) -> dict[str, Any]:
    """A scout ``function_call`` view message."""
    return {"role": "function_call", "content": call_text(name, ident, arguments)}


def call_text(name: Any, ident: Any, arguments: Any) -> str:
    """The content of a ``function_call`` view message.

    ``arguments`` is an object, or a provider's arguments text: used as it is
    when it is a JSON object text (not decoded and encoded again), else kept as
    a string (never truncated).

    Raises:
        Malformed: a value JSON cannot hold (a lone surrogate, ...).
    """
    try:
        if type(arguments) is str:
            try:
                valid = type(_decode(arguments)) is dict
            except DECODE_ERRORS:
                valid = False
            if valid:  # the arguments text goes in as it is
                name_text = _encode(name).decode("utf-8")
                ident_text = _encode(ident).decode("utf-8")
                return f'{{"name":{name_text},"id":{ident_text},"arguments":{arguments}}}'
        return _encode({"name": name, "id": ident, "arguments": arguments}).decode("utf-8")
    except ENCODE_ERRORS as exc:  # lone surrogates, values JSON cannot hold
        raise Malformed(str(exc)) from None


def output_message(ident: Any, text: str) -> dict[str, Any]:
    """A scout ``function_call_output`` view message."""
    return {"role": "function_call_output", "content": output_text(ident, text)}


def output_text(ident: Any, text: str) -> str:
    """The content of a ``function_call_output`` view message.

    Raises:
        Malformed: a value JSON cannot hold (a lone surrogate, ...).
    """
    try:
        return _encode({"id": ident, "content": text}).decode("utf-8")
    except ENCODE_ERRORS as exc:
        raise Malformed(str(exc)) from None


def _body(rewritten: Any) -> Mapping[str, Any] | None:
    content = rewritten.get("content") if isinstance(rewritten, Mapping) else None
    if type(content) is not str:
        return None
    try:
        body = _decode(content)
    except DECODE_ERRORS:
        return None
    return body if isinstance(body, Mapping) else None


def rewritten_arguments(rewritten: Any) -> Any:
    """The arguments object of a rewritten call view message (None if unreadable)."""
    body = _body(rewritten)
    return None if body is None else body.get("arguments")


def rewritten_output(rewritten: Any) -> str | None:
    """The output text of a rewritten output view message (None if unreadable)."""
    body = _body(rewritten)
    if body is None:
        return None
    text = body.get("content")
    if text is None or type(text) is str:
        return text
    return _encode(text).decode("utf-8")
