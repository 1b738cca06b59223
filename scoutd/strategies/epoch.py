"""The cache-friendly epoch strategies (SPEC sections 5 and 6).

The compaction boundary is pinned to an epoch: inside one epoch every tool
message keeps its band, so the prepared prompt only grows at its end and the
provider's prompt cache keeps hitting. ``shorten_tools_epoch`` uses epochs of a
fixed size; ``shorten_tools_epoch_increment`` (the default) lets the epoch and
the compacted window grow over the conversation, and grow faster when the
agent repeats calls.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import PromptConfig
from .report import Fate, StrategyReport, apply_fates
from .tool_messages import ToolIndex, call_key, index_tools, shortened_call, shortened_output

__all__ = [
    "Window",
    "increment_window",
    "repeats",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
]


@dataclass(frozen=True, slots=True)
class Window:
    """Where the bands lie for a conversation with ``outputs`` tool outputs.

    Newest-first positions ``<= keep_full`` stay whole, ``<= truncate_to`` are
    truncated, the rest are dropped. ``pinned`` is the epoch's start and
    ``size`` its length (in tool outputs).
    """

    pinned: int
    size: int
    keep_full: int
    truncate_to: int


def repeats(index: ToolIndex) -> tuple[dict[tuple[str, str], list[int]], list[int]]:
    """Pairs grouped by call key, and the sorted output numbers of repeats.

    Returns ``(numbers_by_key, repeat_numbers)``: for each key the oldest-first
    output numbers of its pairs, and every number but the first of each key.
    """
    by_key: dict[tuple[str, str], list[int]] = {}
    for tool in index.tools:
        if tool.is_call and tool.partner >= 0:
            number = index.tools[tool.partner].number
            by_key.setdefault(call_key(tool.data), []).append(number)
    repeated = sorted(n for numbers in by_key.values() for n in numbers[1:])
    return by_key, repeated


def _protected_positions(index: ToolIndex, by_key: dict[tuple[str, str], list[int]]) -> set[int]:
    """Positions of the latest pair of every call key that occurs more than once."""
    return {index.outputs - max(numbers) + 1 for numbers in by_key.values() if len(numbers) > 1}


def fixed_window(outputs: int, config: PromptConfig) -> Window | None:
    """The section-5 window, or None when the conversation stays unchanged."""
    threshold, full = config.epoch_tool_call_threshold, config.epoch_full_tool_calls
    compacted, size = config.epoch_compacted_tool_calls, config.epoch_size
    if outputs <= threshold or (full == 0 and compacted == 0) or size <= 0:
        return None
    pinned = threshold + ((outputs - threshold - 1) // size) * size
    keep_full = outputs - pinned + full
    return Window(pinned, size, keep_full, keep_full + compacted)


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def increment_window(
    outputs: int, repeat_numbers: Sequence[int], config: PromptConfig
) -> Window | None:
    """The section-6 window, or None when the conversation stays unchanged.

    ``repeat_numbers`` are the sorted oldest-first output numbers of repeats.
    """
    threshold, full = config.epoch_tool_call_threshold, config.epoch_full_tool_calls
    base_compacted, base_size = config.epoch_compacted_tool_calls, config.epoch_size
    if outputs <= threshold or (full == 0 and base_compacted == 0) or base_size <= 0:
        return None
    per_increase = config.epoch_increment_epochs_per_increase
    growth, repeat_growth = (
        config.epoch_increment_size_increase,
        config.epoch_increment_repeat_increase,
    )
    max_size = max(config.epoch_increment_max_size, base_size)
    max_compacted = max(config.epoch_increment_max_compacted_tool_calls, base_compacted)
    pinned, completed, repeat_epochs = threshold, 0, 0
    while True:
        periodic = (completed // per_increase) * growth if per_increase else 0
        nominal = min(base_size + periodic + repeat_epochs * repeat_growth, max_size)
        seen_end = min(pinned + nominal, outputs)
        # any repeat number r with pinned < r <= seen_end
        extended = bisect.bisect_right(repeat_numbers, seen_end) > bisect.bisect_right(
            repeat_numbers, pinned
        )
        size = min(nominal + repeat_growth, max_size) if extended else nominal
        if outputs <= pinned + size:
            break
        pinned += size
        completed += 1
        if extended:
            repeat_epochs += 1
    extra = _round_half_up(max(size - base_size, 0) * config.epoch_increment_compacted_growth_ratio)
    compacted = min(max_compacted, base_compacted + extra)
    keep_full = outputs - pinned + full
    return Window(pinned, size, keep_full, keep_full + compacted)


def _compact(
    name: str,
    messages: Sequence[Any],
    index: ToolIndex,
    window: Window,
    protected: set[int],
    config: PromptConfig,
    detail: bool,
) -> tuple[list[Any], StrategyReport]:
    fates: list[Fate] = []
    rewrites: list[str | None] = []
    for tool in index.tools:
        position = tool.position
        rewrite = None
        if position <= window.keep_full:
            fate = Fate.KEPT
        elif position in protected:
            fate = Fate.PROTECTED
        elif position <= window.truncate_to:
            rewrite = shortened_call(tool.data) if tool.is_call else shortened_output(tool.data)
            fate = Fate.KEPT if rewrite is None else Fate.TRUNCATED
        else:
            fate = Fate.DROPPED
        fates.append(fate)
        rewrites.append(rewrite)
    return apply_fates(
        name, messages, index, fates, rewrites, notice=config.compaction_notice, detail=detail
    )


def shorten_tools_epoch(
    messages: Sequence[Any], config: PromptConfig, *, detail: bool = False
) -> tuple[list[Any], StrategyReport]:
    """Apply ``shorten_tools_epoch`` (fixed epochs) to ``messages``."""
    index = index_tools(messages)
    window = fixed_window(index.outputs, config)
    if window is None:
        return apply_fates(
            "shorten_tools_epoch",
            messages,
            index,
            [Fate.KEPT] * len(index.tools),
            [None] * len(index.tools),
            detail=detail,
        )
    by_key, _ = repeats(index)
    protected = _protected_positions(index, by_key)
    return _compact("shorten_tools_epoch", messages, index, window, protected, config, detail)


def shorten_tools_epoch_increment(
    messages: Sequence[Any], config: PromptConfig, *, detail: bool = False
) -> tuple[list[Any], StrategyReport]:
    """Apply ``shorten_tools_epoch_increment`` (growing epochs) to ``messages``."""
    name = "shorten_tools_epoch_increment"
    index = index_tools(messages)
    by_key, repeat_numbers = repeats(index)
    window = increment_window(index.outputs, repeat_numbers, config)
    if window is None:
        return apply_fates(
            name,
            messages,
            index,
            [Fate.KEPT] * len(index.tools),
            [None] * len(index.tools),
            detail=detail,
        )
    protected = _protected_positions(index, by_key)
    return _compact(name, messages, index, window, protected, config, detail)
