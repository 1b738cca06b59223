"""A plain reference of the tool-shortening strategies, written from docs/STRATEGIES.md.

Slow and obvious on purpose: quadratic walks, no indexes, no bisection, the
standard ``json`` module instead of msgspec. The property tests check the
engine against it on generated conversations, so that a bug in the engine's
clever code cannot hide behind the same bug in the test.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from scoutd.config import PromptConfig

CALL, OUTPUT = "function_call", "function_call_output"
ARGUMENT_LIMIT, OUTPUT_LIMIT = 200, 400


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def tool_body(message: Any) -> dict[str, Any] | None:
    """The decoded body of a usable tool message, else None (docs: *unusable*)."""
    if not isinstance(message, dict) or message.get("role") not in (CALL, OUTPUT):
        return None
    content = message.get("content")
    if not isinstance(content, str):
        return None
    try:
        content.encode("utf-8")
        body = json.loads(content, parse_constant=_no_constants)
        # a lone surrogate escape is not valid JSON text for a strict parser
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def _id_key(ident: Any) -> Any:
    """Ids pair when equal and of the same JSON type; null, arrays and objects never pair."""
    if ident is None or isinstance(ident, (list, dict)):
        return None
    return (type(ident).__name__, repr(ident))


@dataclass
class Tool:
    """One usable tool message."""

    at: int  # index in the conversation
    is_call: bool
    body: dict[str, Any]
    partner: int | None = None  # index (into the tool list) of the other half of its pair
    number: int = 0  # oldest-first output number giving it its place


@dataclass
class Pairing:
    tools: list[Tool] = field(default_factory=list)
    outputs: int = 0

    def position(self, tool: Tool) -> int:
        """Newest-first position: 1 for the newest output, 0 for a call after it."""
        return self.outputs + 1 - tool.number


def pair(messages: list[Any]) -> Pairing:
    """Forward pairing: an output takes the latest waiting call with its id."""
    result = Pairing()
    for at, message in enumerate(messages):
        body = tool_body(message)
        if body is not None:
            result.tools.append(Tool(at=at, is_call=message["role"] == CALL, body=body))
    for t, tool in enumerate(result.tools):
        if tool.is_call:
            continue
        result.outputs += 1
        tool.number = result.outputs
        key = _id_key(tool.body.get("id"))
        if key is None:
            continue
        # the newest earlier call with this id that no output has taken yet,
        # unless a newer call with the same id replaced it
        for c in range(t - 1, -1, -1):
            other = result.tools[c]
            if other.is_call and _id_key(other.body.get("id")) == key:
                if other.partner is None:
                    other.partner, tool.partner = t, c
                break
    for tool in result.tools:
        if tool.is_call:
            if tool.partner is not None:
                tool.number = result.tools[tool.partner].number
            else:
                earlier = [o for o in result.tools if not o.is_call and o.at < tool.at]
                tool.number = len(earlier) + 1
    return result


def call_key(body: dict[str, Any]) -> str:
    arguments = body.get("arguments")
    return json.dumps([body.get("name"), {} if arguments is None else arguments], sort_keys=True)


def repeats(pairing: Pairing) -> dict[str, list[int]]:
    """Output numbers of the pairs of every repeated call key, in call order."""
    by_key: dict[str, list[int]] = {}
    for tool in pairing.tools:
        if tool.is_call and tool.partner is not None:
            by_key.setdefault(call_key(tool.body), []).append(tool.number)
    return {key: numbers for key, numbers in by_key.items() if len(numbers) > 1}


@dataclass
class Bands:
    """Oldest-first output numbers: above ``full_from`` whole, above ``truncate_from`` cut.

    ``size`` is the length (in outputs) of the epoch that holds the newest output.
    """

    pinned: int
    full_from: int
    truncate_from: int
    size: int


def fixed_bands(outputs: int, config: PromptConfig) -> Bands | None:
    threshold, size = config.epoch_tool_call_threshold, config.epoch_size
    full, compacted = config.epoch_full_tool_calls, config.epoch_compacted_tool_calls
    if outputs <= threshold or size <= 0 or full + compacted == 0:
        return None
    pinned = threshold
    while pinned + size < outputs:  # the epoch holding the newest output
        pinned += size
    return Bands(pinned, pinned - full, pinned - full - compacted, size)


def increment_bands(outputs: int, repeat_at: list[int], config: PromptConfig) -> Bands | None:
    """Section-6 epochs, one after the other, as the docs tell them."""
    threshold, base = config.epoch_tool_call_threshold, config.epoch_size
    full, compacted = config.epoch_full_tool_calls, config.epoch_compacted_tool_calls
    if outputs <= threshold or base <= 0 or full + compacted == 0:
        return None
    every = config.epoch_increment_epochs_per_increase
    biggest = max(config.epoch_increment_max_size, base)
    step = config.epoch_increment_repeat_increase
    start, done, extended = threshold, 0, 0
    while True:
        grown = base + (done // every) * config.epoch_increment_size_increase if every else base
        nominal = min(grown + extended * step, biggest)
        seen = min(start + nominal, outputs)
        repeated = any(start < number <= seen for number in repeat_at)
        size = min(nominal + step, biggest) if repeated else nominal
        if start + size >= outputs:
            break
        start += size
        done += 1
        extended += repeated
    growth = max(size - base, 0) * config.epoch_increment_compacted_growth_ratio
    window = min(
        max(config.epoch_increment_max_compacted_tool_calls, compacted),
        compacted + math.floor(growth + 0.5),
    )
    return Bands(start, start - full, start - full - window, size)


def _long_arguments(body: dict[str, Any]) -> bool:
    arguments = body.get("arguments")
    return isinstance(arguments, dict) and any(
        isinstance(v, str) and len(v) > ARGUMENT_LIMIT for v in arguments.values()
    )


def output_text(body: dict[str, Any]) -> str | None:
    value = body.get("content")
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def shortens(tool: Tool) -> bool:
    """Whether truncating the tool changes it."""
    if tool.is_call:
        return _long_arguments(tool.body)
    text = output_text(tool.body)
    return text is not None and len(text) > OUTPUT_LIMIT


def epoch_fates(
    messages: list[Any], config: PromptConfig, increment: bool
) -> tuple[Pairing, list[str]]:
    """The fate of every usable tool message: kept, protected, truncated or dropped."""
    pairing = pair(messages)
    repeated = repeats(pairing)
    if increment:
        repeat_at = [n for numbers in repeated.values() for n in numbers[1:]]
        bands = increment_bands(pairing.outputs, repeat_at, config)
    else:
        bands = fixed_bands(pairing.outputs, config)
    if bands is None:
        return pairing, ["kept"] * len(pairing.tools)
    latest = {max(numbers) for numbers in repeated.values()}
    fates = []
    for tool in pairing.tools:
        if tool.number > bands.full_from:
            fates.append("kept")
        elif tool.number in latest:
            fates.append("protected")
        elif tool.number <= bands.truncate_from:
            fates.append("dropped")
        else:
            fates.append("truncated" if shortens(tool) else "kept")
    return pairing, fates


def report_counts(pairing: Pairing, fates: list[str]) -> dict[str, int]:
    """The report's counts, one fate at a time."""
    counts = {f"{side}_{fate}": 0 for side in ("calls", "outputs") for fate in _FATES}
    for tool, fate in zip(pairing.tools, fates, strict=True):
        counts[f"{'calls' if tool.is_call else 'outputs'}_{fate}"] += 1
    return counts


_FATES = ("kept", "protected", "truncated", "dropped")


def chars(messages: list[Any]) -> int:
    """Characters of every string ``content``."""
    total = 0
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            total += len(message["content"])
    return total


def shortened_text(text: str, limit: int) -> str:
    """``Truncated (LEN): head<...LEN - md5[:5]...>tail`` (docs: *Truncation*)."""
    if len(text) <= limit:
        return text
    digest = hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    middle = f"<...{len(text)} - {digest[:5]}...>"
    keep = (limit - len(middle)) // 2
    return f"Truncated ({len(text)}): " + text[: keep - 1] + middle + text[len(text) - keep :]


def rewritten(tool: Tool) -> str | None:
    """The new content of a truncated tool message; None when truncating changes nothing."""
    if not shortens(tool):
        return None
    body = dict(tool.body)
    if tool.is_call:
        body["arguments"] = {
            name: shortened_text(value, ARGUMENT_LIMIT) if isinstance(value, str) else value
            for name, value in body["arguments"].items()
        }
    else:
        body["content"] = shortened_text(output_text(body) or "", OUTPUT_LIMIT)
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def shorten_tools_fates(messages: list[Any], config: PromptConfig) -> tuple[Pairing, list[str]]:
    """The fate of every usable tool message under ``shorten_tools``, newest first."""
    pairing = pair(messages)
    fates = ["kept"] * len(pairing.tools)
    tool_at = {tool.at: t for t, tool in enumerate(pairing.tools)}
    users_seen = 0  # user messages newer than the message at hand
    kept_chars = 0  # characters of the tool content kept whole so far (once the budget
    # is spent, nothing older is kept for it, so what is truncated need not count)
    for at in range(len(messages) - 1, -1, -1):
        if at not in tool_at:
            message = messages[at]
            if isinstance(message, dict) and message.get("role") == "user":
                users_seen += 1
            continue
        t = tool_at[at]
        tool = pairing.tools[t]
        if tool.is_call:
            full, most = config.full_tool_calls, config.max_tool_calls
        else:
            full, most = config.full_tool_outputs, config.effective_max_tool_outputs
        position = pairing.position(tool)
        if position < full or users_seen == 0 or kept_chars < config.max_tool_chars:
            kept_chars += len(messages[at]["content"])
        elif position > most:
            fates[t] = "dropped"
        else:
            fates[t] = "truncated" if shortens(tool) else "kept"
    for t, tool in enumerate(pairing.tools):  # a pair shares one fate for dropping
        if tool.partner is not None and fates[tool.partner] == "dropped":
            fates[t] = "dropped"
    return pairing, fates
