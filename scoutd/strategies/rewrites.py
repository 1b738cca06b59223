"""Shortened tool messages: the rewrites of docs/STRATEGIES.md, remembered per session.

A call keeps its arguments with every long top-level string shortened; an
output keeps its ``content`` shortened, and with ``[prompt] recall`` on its
marker carries the output's handle, its oldest-first number (``Truncated
(1234, recall #37): ...``), which the compaction notice completes with the
numbers of the removed outputs (:func:`recall_notice`). Within a session each content is
shortened once, not once per round: the engine passes its
:class:`RewriteCache` to the strategies (``PrepareContext.rewrites``), which
pass it here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .text import shorten_string, truncate_string
from .tool_messages import (
    ARGUMENT_SIZE,
    OUTPUT_SIZE,
    ToolBody,
    ToolIndex,
    decode_body,
    encode_json,
)

__all__ = [
    "RewriteCache",
    "handles_text",
    "recall_notice",
    "shortened",
    "shortened_call",
    "shortened_output",
    "sized_call",
]


def _full_body(content: str) -> dict[str, Any]:
    body: dict[str, Any] = decode_body(content)
    return body


class RewriteCache:
    """Shortened contents remembered by their original content, for one session.

    A rewrite depends on the message's content alone, and an agent sends the
    same content strings every round, so within a session each tool message
    is shortened once, not once per round. Bounded: past ``limit`` entries of
    one kind the cache starts afresh (the next rounds recompute what they need).
    """

    def __init__(self, limit: int = 8192) -> None:
        self.limit = limit
        self.calls: dict[str, str | None] = {}
        self.outputs: dict[str, str | None] = {}
        # with recall on: by (content, handle), as two outputs alike carry two handles
        self.handled: dict[tuple[str, int], str | None] = {}
        self.hits = 0
        self.misses = 0

    def forget(self) -> None:
        """Drop every remembered rewrite (the conversation was replaced)."""
        self.calls.clear()
        self.outputs.clear()
        self.handled.clear()

    def remember(self, table: dict[Any, str | None], content: Any, new: str | None) -> None:
        """Store ``new`` as the rewrite of ``content`` in ``table`` (calls, outputs, handled)."""
        self.misses += 1
        if len(table) >= self.limit:
            table.clear()
        table[content] = new


_MISSING = object()


def _remembered(
    cache: RewriteCache | None, table_of: str, content: Any, compute: Callable[[], str | None]
) -> str | None:
    """``compute()``, or what it gave before for ``content`` in ``cache`` (a session's)."""
    if cache is None:
        result: str | None = compute()
        return result
    table: dict[Any, str | None] = getattr(cache, table_of)
    found = table.get(content, _MISSING)
    if found is not _MISSING:
        cache.hits += 1
        return found  # type: ignore[return-value]
    result = compute()
    cache.remember(table, content, result)
    return result


def shortened_call(body: ToolBody, content: str, cache: RewriteCache | None = None) -> str | None:
    """New content for a call with its long top-level string arguments shortened.

    None when nothing changes (arguments missing, not an object, or short).
    ``cache``: a session's rewrites, read and filled (None: computed).
    """
    if not _shortens(body.arguments):
        return None
    return _remembered(cache, "calls", content, lambda: _shortened_call(content))


def _shortens(arguments: Any) -> bool:
    """Whether a call's arguments are an object with a long top-level string."""
    if type(arguments) is not dict:
        return False
    return any(type(v) is str and len(v) > ARGUMENT_SIZE for v in arguments.values())


def sized_call(body: ToolBody, content: str) -> str | None:
    """A text as long as :func:`shortened_call`'s (its markers' digests written as
    zeros), cheaper to make: for counting the rewrite's characters. None alike."""
    return _shortened_call(content, hashed=False) if _shortens(body.arguments) else None


def _shortened_call(content: str, hashed: bool = True) -> str:
    data = _full_body(content)
    # a string no longer than the size is left as it is: not looked at (not mutated:
    # shorten_string returns such a string unchanged, so either side gives the same)
    data["arguments"] = {
        name: shorten_string(value, ARGUMENT_SIZE, hashed=hashed)
        if type(value) is str and len(value) > ARGUMENT_SIZE  # pragma: no mutate
        else value
        for name, value in data["arguments"].items()
    }
    return encode_json(data)


def shortened_output(
    body: ToolBody, content: str, cache: RewriteCache | None = None, handle: int | None = None
) -> str | None:
    """New content for an output with its ``content`` shortened.

    A non-string content is shortened as its compact JSON text. None when
    nothing changes (content missing, null, or short). ``cache``: as for
    :func:`shortened_call`. ``handle``: the output's number, written in the
    marker (recall on).
    """
    raw = body.content
    if isinstance(raw, msgspec.UnsetType) or len(raw) <= OUTPUT_SIZE:  # JSON is never shorter
        return None
    if handle is None:
        return _remembered(cache, "outputs", content, lambda: _shortened_output(content))
    key = (content, handle)
    return _remembered(cache, "handled", key, lambda: _shortened_output(content, handle))


def _marked(text: str, handle: int) -> str:
    """``text`` shortened with the recall handle in its marker (``text`` is long)."""
    return f"Truncated ({len(text)}, recall #{handle}): {truncate_string(text, OUTPUT_SIZE)}"


def _shortened_output(content: str, handle: int | None = None) -> str | None:
    data = _full_body(content)
    value = data["content"]
    if value is None:
        return None
    text = value if type(value) is str else encode_json(value)
    if len(text) <= OUTPUT_SIZE:
        return None
    if handle is None:
        data["content"] = shorten_string(text, OUTPUT_SIZE)
    else:
        data["content"] = _marked(text, handle)
    return encode_json(data)


def shortened(
    index: ToolIndex,
    messages: Sequence[Any],
    slot: int,
    cache: RewriteCache | None = None,
    recall: bool = False,
) -> str | None:
    """The truncated content of tool ``slot``, None when there is nothing to shorten.

    ``recall``: an output's marker carries its handle, its oldest-first number.
    """
    body, content = index.bodies[slot], index.content(messages, slot)
    if index.is_call[slot]:
        return shortened_call(body, content, cache)
    return shortened_output(body, content, cache, index.numbers[slot] if recall else None)


def handles_text(numbers: Sequence[int]) -> str:
    """Sorted handles written compactly: runs as ranges, ``#1-#40, #43, #45-#46``."""
    parts: list[str] = []
    start = previous = -2
    for number in [*numbers, -2]:  # the sentinel closes the last run
        if number == previous + 1:
            previous = number
            continue
        if start >= 0:
            parts.append(f"#{start}" if start == previous else f"#{start}-#{previous}")
        start = previous = number
    return ", ".join(parts)


def recall_notice(template: str, index: ToolIndex, dropped: Sequence[int]) -> str:
    """The notice ``template`` with the recall sentence (``[prompt] recall`` on).

    ``dropped``: the dropped tool slots; the sentence names their outputs' handles.
    """
    numbers = sorted({index.numbers[slot] for slot in dropped if not index.is_call[slot]})
    removed = f"; removed here: {handles_text(numbers)}" if numbers else ""
    return (
        f"{template}\nTool outputs are numbered #1, #2, ... from the oldest{removed}; a"
        ' shortened one shows its number ("recall #N"): call the recall tool with a number,'
        " or with a text the output or its call contained, to read that output whole again."
    )
