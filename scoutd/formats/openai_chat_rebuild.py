"""OpenAI Chat messages from what the strategies made of the scout view (docs/FORMATS.md).

Split from :mod:`scoutd.formats.openai_chat`, which makes the view. A message
the strategies kept comes back as the very same object; only the messages
that own a kept or rewritten view message, or that new messages go before,
are visited (a compacted long run drops most of them; docs/PERFORMANCE.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import eq, is_not
from typing import Any

from .view import (
    KEPT,
    PASSTHROUGH,
    TEXT_PART,
    VIEW_KEY,
    Outcome,
    Rebuilt,
    View,
    encode_arguments,
    rewritten_arguments,
    rewritten_output,
)

__all__ = ["is_tool", "new_message", "rebuild"]


def is_tool(message: Any) -> bool:
    """Whether ``message`` is a ``tool`` message (a mapping with that role)."""
    if type(message) is dict:
        return message.get("role") == "tool"
    return isinstance(message, Mapping) and message.get("role") == "tool"


def _touched(count: int, shape: View, result: Outcome) -> Iterable[int]:
    """The positions, in order, of the ``count`` provider messages that can give anything back.

    Those owning a view message that was kept or rewritten (new messages only
    go before such a message), or an assistant's text (whose loss is counted);
    every other message was dropped whole.
    """
    fates = result.fates
    size = len(fates)
    kept = compress(range(size), map(is_not, fates, repeat(None)))
    if size == count:  # one view message each: view message v stands for message v
        return kept
    texts = compress(range(size), map(eq, shape.refs, repeat(TEXT_PART)))
    return sorted(set(map(shape.owner, chain(kept, texts))))


def new_message(message: Any) -> Any:
    """A message a strategy added (a notice), as an OpenAI Chat message."""
    if type(message) is dict and VIEW_KEY in message:
        message = {k: v for k, v in message.items() if k != VIEW_KEY}
    return message


def _rewritten_call(entry: Mapping[str, Any], fate: Any) -> Any:
    arguments = rewritten_arguments(fate)
    if type(arguments) is not dict:
        return entry
    if entry.get("type") == "custom":  # its input stays a text
        text = arguments.get("input")
        if type(text) is not str:
            return entry
        custom = dict(entry["custom"])
        custom["input"] = text
        changed_custom = dict(entry)
        changed_custom["custom"] = custom
        return changed_custom
    function = dict(entry["function"])
    function["arguments"] = encode_arguments(arguments)
    changed = dict(entry)
    changed["function"] = function
    return changed


def _rewritten_tool(message: Mapping[str, Any], fate: Any) -> Any:
    text = rewritten_output(fate)
    if text is None:
        return message
    changed = dict(message)
    changed["content"] = (
        text if type(message["content"]) is str else [{"type": "text", "text": text}]
    )
    return changed


def _rewritten(message: Any, ref: int, fate: Any) -> Any:
    """A message whose only view message the strategies rewrote."""
    if ref == PASSTHROUGH:
        return fate  # a plugin replaced a message it was given as it is
    if is_tool(message):
        return _rewritten_tool(message, fate)
    changed = dict(message)
    changed["tool_calls"] = [_rewritten_call(message["tool_calls"][ref], fate)]
    return changed


def rebuild(messages: Sequence[Any], shape: View, result: Outcome) -> Rebuilt:
    """OpenAI Chat messages from the strategies' result over ``shape``."""
    out: list[Any] = []
    narration = 0
    fates, refs, starts, before = result.fates, shape.refs, shape.starts, result.before
    for position in _touched(len(messages), shape, result):
        message = messages[position]
        if before and position in before:
            out.extend(map(new_message, before[position]))
        start, end = starts[position], starts[position + 1]
        if end - start == 1:  # the common case: one view message, no text beside it
            fate = fates[start]
            if fate is KEPT:
                out.append(message)
            elif fate is not None:
                out.append(_rewritten(message, refs[start], fate))
            continue
        # several view messages: an assistant message and its calls (a message passed
        # through, and a tool message, always make exactly one)
        slots = [v for v in range(start, end) if refs[v] >= 0]
        if all(fates[v] is KEPT for v in slots):
            out.append(message)
            continue
        entries = message["tool_calls"]
        kept = [
            entries[refs[v]] if fates[v] is KEPT else _rewritten_call(entries[refs[v]], fates[v])
            for v in slots
            if fates[v] is not None
        ]
        if not kept:
            narration += TEXT_PART in refs[start:end]
            continue
        changed = dict(message)
        changed["tool_calls"] = kept
        out.append(changed)
    after = result.after
    if after:
        # a notice put after every message goes before an assistant message whose
        # calls still wait for their answers at the end: the answers follow it
        end = _open_end(out)
        out[end:end] = map(new_message, after)
    return Rebuilt(out, narration)


def _open_end(out: list[Any]) -> int:
    """Where a message put after every other one goes: before a last assistant
    message whose calls are not all answered yet (and its answers so far)."""
    end = start = len(out)
    while start and is_tool(out[start - 1]):
        start -= 1
    if not start:
        return end
    message = out[start - 1]
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return end
    calls = message.get("tool_calls")
    if calls is None or calls == []:
        waiting = message.get("function_call") is not None and start == end
    else:
        answered = [answer.get("tool_call_id") for answer in out[start:end]]
        entries = calls if type(calls) is list else [calls]
        waiting = any(
            not isinstance(entry, Mapping) or entry.get("id") not in answered for entry in entries
        )
    return start - 1 if waiting else end
