"""Emulations of the context strategies peers use, as pure functions over messages.

``mask_last_n`` is the observation masking of SWE-agent studied in "The
Complexity Trap" (Lindenbauer et al., 2025): the last ``n`` tool outputs stay
verbatim, every older output's content is replaced by a short placeholder;
calls are never touched.

``clear_tool_uses`` follows Anthropic's context editing (``clear_tool_uses``):
when the prompt exceeds ``trigger`` tokens, the oldest tool results are
replaced by a placeholder, the last ``keep`` tool uses stay intact, and with
``clear_at_least`` an activation clears at least that many tokens (oldest
first, stopping once it has) or, if it cannot, does not happen. A cleared
result stays cleared in every later round: the function takes the set of
cleared positions and returns the new one, so a replay threads it through.

Both keep every message's extra keys and the call/output pairs (an output is
rewritten, never removed), and pass malformed tool messages through.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec

from .cache import Estimator, segment_text

__all__ = [
    "CLEARED_PLACEHOLDER",
    "MASK_PLACEHOLDER",
    "Cleared",
    "PeerMemo",
    "clear_tool_uses",
    "SummaryState",
    "mask_last_n",
    "masked_text",
    "summarize",
    "output_data",
]

OUTPUT = "function_call_output"

# SWE-agent's placeholder (LastNObservations); the line count is the only variable part.
MASK_PLACEHOLDER = "Old environment output: ({lines} lines omitted)"
# Anthropic's placeholder text is not published; a fixed, short marker.
CLEARED_PLACEHOLDER = "[Tool result cleared to save context]"

_decode = msgspec.json.Decoder().decode
# Compact JSON in the dict's key order, raw UTF-8: how scoutd rewrites tool JSON.
_encode = msgspec.json.Encoder().encode


def role_of(message: Any) -> Any:
    """The ``role`` of a message, or None when the message is not a mapping."""
    if type(message) is dict:  # the common case, without the slow abstract check
        return message.get("role")
    return message.get("role") if isinstance(message, Mapping) else None


def encode_json(value: Any) -> str:
    """Compact JSON text of ``value``."""
    return _encode(value).decode("utf-8")


def with_content(message: Mapping[str, Any], content: str) -> dict[str, Any]:
    """A new message with the same keys as ``message`` and a new ``content``."""
    changed = dict(message)
    changed["content"] = content
    return changed


class PeerMemo:
    """Decoded outputs and rewritten messages, computed once per message object.

    A replay calls the emulations on ever longer prefixes of one conversation;
    the memo keeps each message's decoding and rewrites so that a round costs a
    walk over the list, not a JSON decode of every tool output. Entries hold a
    reference to their message, so an ``id`` is never reused while remembered.
    """

    def __init__(self) -> None:
        self._decoded: dict[int, tuple[Any, dict[str, Any] | None]] = {}
        self._rewrites: dict[tuple[int, str], tuple[Any, dict[str, Any]]] = {}

    def output(self, message: Any) -> dict[str, Any] | None:
        """The decoded object of a usable tool output, else None."""
        entry = self._decoded.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1]
        data = output_data(message)
        self._decoded[id(message)] = (message, data)
        return data

    def rewrite(
        self, message: Any, kind: str, make: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """``make()``, remembered per message and kind of rewrite."""
        key = (id(message), kind)
        entry = self._rewrites.get(key)
        if entry is not None and entry[0] is message:
            return entry[1]
        made = make()
        self._rewrites[key] = (message, made)
        return made


def output_data(message: Any) -> dict[str, Any] | None:
    """The decoded JSON object of a usable tool output (docs/STRATEGIES.md), else None."""
    if role_of(message) != OUTPUT:
        return None
    content = message.get("content")
    if type(content) is not str:
        return None
    try:
        data = _decode(content)
    except (msgspec.DecodeError, UnicodeError):
        return None
    return data if type(data) is dict else None


def _content_text(data: dict[str, Any]) -> str:
    content = data.get("content")
    if content is None:
        return ""
    return content if type(content) is str else encode_json(content)


def masked_text(data: dict[str, Any]) -> str:
    """The placeholder that replaces an output's content under ``mask_last_n``."""
    text = _content_text(data)
    lines = text.count("\n") + 1 if text else 0
    return MASK_PLACEHOLDER.format(lines=lines)


def _replaced(message: Any, data: dict[str, Any], text: str) -> dict[str, Any]:
    rewritten = dict(data)
    rewritten["content"] = text
    return with_content(message, encode_json(rewritten))


def _masked(message: Any, data: dict[str, Any]) -> dict[str, Any]:
    return _replaced(message, data, masked_text(data))


def mask_last_n(
    messages: Sequence[Any], n: int = 10, *, polling: int = 1, memo: PeerMemo | None = None
) -> list[Any]:
    """Keep the last ``n`` tool outputs verbatim; mask the content of older ones.

    With ``polling`` (SWE-agent's option) the window moves only every
    ``polling`` outputs: of ``count`` outputs the oldest
    ``(count // polling) * polling - n`` are masked, so between ``n`` and
    ``n + polling - 1`` stay verbatim and the prompt changes less often.
    """
    if n < 0 or polling < 1:
        raise ValueError("n must be >= 0 and polling >= 1")
    memo = memo or PeerMemo()
    out = list(messages)
    outputs = [
        position
        for position, message in enumerate(out)
        if role_of(message) == OUTPUT and memo.output(message) is not None
    ]
    masked = max(0, (len(outputs) // polling) * polling - n)
    for position in outputs[:masked]:
        message = out[position]
        data = memo.output(message)
        assert data is not None
        out[position] = memo.rewrite(message, "mask", partial(_masked, message, data))
    return out


@dataclass(frozen=True, slots=True)
class Cleared:
    """The prompt after ``clear_tool_uses`` and the positions cleared so far."""

    messages: list[Any]
    cleared: frozenset[int]


def _prompt_tokens(messages: Sequence[Any], estimator: Estimator) -> int:
    if estimator.tokenizer is not None:
        return sum(estimator.text(segment_text(m)) for m in messages)
    chars = 0
    for message in messages:
        if type(message) is dict:
            role, content = message.get("role"), message.get("content")
            if type(role) is str and type(content) is str:
                chars += len(role) + len(content) + 2
                continue
        chars += len(segment_text(message))
    return math.ceil(chars / estimator.chars_per_token)


def clear_tool_uses(
    messages: Sequence[Any],
    *,
    trigger: int = 100_000,
    keep: int = 3,
    clear_at_least: int = 0,
    cleared: frozenset[int] = frozenset(),
    estimator: Estimator | None = None,
    memo: PeerMemo | None = None,
) -> Cleared:
    """Clear old tool results once the prompt exceeds ``trigger`` tokens.

    ``cleared`` holds the positions (indexes in ``messages``) cleared by earlier
    rounds of the same conversation, which only grows by appending; they stay
    cleared. When the prompt, with them cleared, is above ``trigger`` tokens,
    the oldest other outputs are cleared except the last ``keep``: all of them,
    or with ``clear_at_least`` only as many as it takes to free that many tokens
    (none if even all of them would free fewer).
    """
    if trigger < 0 or keep < 0 or clear_at_least < 0:
        raise ValueError("trigger, keep and clear_at_least must be >= 0")
    estimator = estimator or Estimator()
    memo = memo or PeerMemo()
    out = list(messages)
    outputs: list[int] = []
    for position, message in enumerate(out):
        if role_of(message) == OUTPUT and memo.output(message) is not None:
            outputs.append(position)

    def clear(position: int) -> None:
        message = out[position]
        data = memo.output(message)
        assert data is not None
        out[position] = memo.rewrite(
            message, "clear", lambda: _replaced(message, data, CLEARED_PLACEHOLDER)
        )

    done = set(cleared)
    for position in outputs:
        if position in done:
            clear(position)
    if _prompt_tokens(out, estimator) > trigger:
        candidates = [p for p in outputs[: max(0, len(outputs) - keep)] if p not in done]
        chosen = candidates
        if clear_at_least:
            chosen, freed = [], 0
            for position in candidates:
                before = estimator.text(segment_text(out[position]))
                clear(position)
                freed += before - estimator.text(segment_text(out[position]))
                out[position] = messages[position]  # restored below if chosen
                chosen.append(position)
                if freed >= clear_at_least:
                    break
            if freed < clear_at_least:
                chosen = []
        for position in chosen:
            clear(position)
        done.update(chosen)
    return Cleared(out, frozenset(done))


# OpenHands' LLM summarising condenser: its summary is an LLM's text; here a
# placeholder of a fixed size, numbered so that every condensation changes it.
SUMMARY_TEXT = "[Summary {number} of the earlier conversation] "
# What the summariser's own call reads beyond the forgotten messages: OpenHands
# sends its summarising instructions (about 2,000 characters) as a system
# message and wraps each forgotten event in an <EVENT> tag pair.
SUMMARISER_PROMPT_CHARS = 2000
SUMMARISER_EVENT_CHARS = len("<EVENT>\n\n</EVENT>\n")


@dataclass(slots=True)
class SummaryState:
    """Where the last condensation cut the conversation (carried between rounds)."""

    start: int = 0  # first message kept after the summary (0: no summary yet)
    number: int = 0  # condensations so far
    # Characters the summariser read (its instructions, the forgotten messages
    # and the previous summary) and wrote (the summary), not yet billed: each
    # condensation is a model call of its own, billed as uncached input and
    # generated output.
    unbilled_chars: int = 0
    unbilled_output_chars: int = 0

    def take_unbilled_chars(self) -> tuple[int, int]:
        """The summariser's input and output characters since the last call, then zero."""
        taken = (self.unbilled_chars, self.unbilled_output_chars)
        self.unbilled_chars = self.unbilled_output_chars = 0
        return taken


def summarize(
    messages: Sequence[Any],
    state: SummaryState,
    *,
    max_size: int = 120,
    keep_first: int = 4,
    summary_chars: int = 2000,
) -> list[Any]:
    """Emulate OpenHands' ``LLMSummarizingCondenser`` on a growing conversation.

    The view is the first ``keep_first`` messages, the summary (once there is
    one) and every message since the last cut. When it holds more than
    ``max_size`` messages, everything between the head and the newest
    ``max_size // 2 - keep_first - 1`` messages (the previous summary included)
    is summarised again: the view rolls over in batches. A cut never separates
    a tool output from the message before it. ``state`` is updated in place.
    """
    if max_size < 1 or keep_first < 0 or summary_chars < 0:
        raise ValueError("max_size must be >= 1, keep_first and summary_chars >= 0")
    total = len(messages)
    start = state.start or keep_first
    view = keep_first + (1 if state.number else 0) + max(0, total - start)
    if view > max_size:
        tail = max(1, max_size // 2 - keep_first - 1)
        cut = max(keep_first, total - tail)
        while cut > keep_first and role_of(messages[cut]) == OUTPUT:
            cut -= 1
        if cut > start or not state.number:
            forgotten = messages[start:cut]
            state.unbilled_chars += SUMMARISER_PROMPT_CHARS
            state.unbilled_chars += sum(
                len(segment_text(m)) + SUMMARISER_EVENT_CHARS for m in forgotten
            )
            state.unbilled_chars += summary_chars + SUMMARISER_EVENT_CHARS if state.number else 0
            state.unbilled_output_chars += summary_chars
            state.start, state.number = cut, state.number + 1
    if not state.number:
        return list(messages)
    head = SUMMARY_TEXT.format(number=state.number)
    summary = {"role": "user", "content": head + "." * max(0, summary_chars - len(head))}
    return [*messages[:keep_first], summary, *messages[state.start :]]
