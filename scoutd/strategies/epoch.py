"""The cache-friendly epoch strategies (docs/STRATEGIES.md).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import PromptConfig
from .base import Builtin, PrepareContext, Rounds
from .columns import Columns
from .reasons import (
    RowReason,
    RowWhy,
    band_reasons,
    epoch_reason,
    uncompacted_reasons,
)
from .report import Changes, StrategyReport, apply_changes
from .rewrites import RewriteCache, recall_notice, shortened
from .tool_messages import (
    Handed,
    ToolIndex,
    index_tools,
    repeated_pairs,
)

__all__ = [
    "EPOCH",
    "EPOCH_INCREMENT",
    "EpochStrategy",
    "Window",
    "compact",
    "epoch_changes",
    "fixed_window",
    "increment_window",
    "repeat_numbers",
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


def repeat_numbers(repeated: dict[bytes, list[int]]) -> list[int]:
    """Sorted output numbers of every repeat: each occurrence of a key after its first."""
    return sorted(n for numbers in repeated.values() for n in numbers[1:])


def _protected_positions(index: ToolIndex, repeated: dict[bytes, list[int]]) -> set[int]:
    """Positions of the latest pair of every call key that occurs more than once."""
    return {index.outputs - max(numbers) + 1 for numbers in repeated.values()}


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


def compact(
    name: str,
    messages: Sequence[Any],
    index: ToolIndex,
    window: Window | None,
    protected: set[int],
    config: PromptConfig,
    detail: bool = False,
    columns: Columns | None = None,
    rewrites: RewriteCache | None = None,
) -> tuple[list[Any], StrategyReport]:
    """Walk the tool messages against ``window``; ``protected`` are positions kept whole."""
    changes = epoch_changes(messages, index, window, protected, rewrites, config.recall)
    notice = epoch_notice(config, index, changes)
    return apply_changes(
        name,
        messages,
        index,
        changes,
        notice=notice,
        detail=detail,
        columns=columns,
        reason=epoch_reason(config) if window is None else None,
        why=epoch_reasons(index, window, config) if detail else None,
    )


def epoch_notice(config: PromptConfig, index: ToolIndex, changes: Changes) -> str:
    """The notice template for ``changes``: with recall on, naming the removed outputs."""
    if config.recall:
        return recall_notice(config.compaction_notice, index, changes.dropped)
    return config.compaction_notice


def epoch_reasons(index: ToolIndex, window: Window | None, config: PromptConfig) -> RowWhy:
    """Why each tool message has its fate under ``window`` (None: nothing compacted)."""
    if window is None:
        return uncompacted_reasons(index)
    full = config.epoch_full_tool_calls
    return band_reasons(index, window.keep_full, window.truncate_to, RowReason.EPOCH, full)


def epoch_changes(
    messages: Sequence[Any],
    index: ToolIndex,
    window: Window | None,
    protected: set[int],
    rewrites: RewriteCache | None = None,
    recall: bool = False,
) -> Changes:
    """What :func:`compact` changes: by newest-first position, whole within
    ``keep_full``, truncated up to ``truncate_to``, dropped beyond, and the
    ``protected`` positions past ``keep_full`` kept whole (``recall``: the
    shortened outputs carry their handles)."""
    changes = Changes()
    if window is not None:
        keep_full, truncate_to = window.keep_full, window.truncate_to
        positions = index.positions
        changes.dropped = [s for s, position in enumerate(positions) if position > truncate_to]
        if protected:
            changes.protected = [s for s in changes.dropped if positions[s] in protected]
            changes.dropped = [s for s in changes.dropped if positions[s] not in protected]
        for slot, position in enumerate(positions):
            if position <= keep_full or position > truncate_to:
                continue
            if position in protected:
                changes.protected.append(slot)
                continue
            new = shortened(index, messages, slot, rewrites, recall)
            if new is not None:
                changes.rewrites[slot] = new
    return changes


def shorten_tools_epoch(
    messages: Sequence[Any],
    config: PromptConfig,
    *,
    detail: bool = False,
    columns: Columns | None = None,
    given: Handed | None = None,
    rewrites: RewriteCache | None = None,
) -> tuple[list[Any], StrategyReport]:
    """Apply ``shorten_tools_epoch`` (fixed epochs) to ``messages``."""
    index = index_tools(messages, columns, given)
    window = fixed_window(index.outputs, config)
    protected = set() if window is None else _protected_positions(index, repeated_pairs(index))
    name = "shorten_tools_epoch"
    return compact(name, messages, index, window, protected, config, detail, columns, rewrites)


def shorten_tools_epoch_increment(
    messages: Sequence[Any],
    config: PromptConfig,
    *,
    detail: bool = False,
    columns: Columns | None = None,
    given: Handed | None = None,
    rewrites: RewriteCache | None = None,
) -> tuple[list[Any], StrategyReport]:
    """Apply ``shorten_tools_epoch_increment`` (growing epochs) to ``messages``."""
    index = index_tools(messages, columns, given)
    repeated = repeated_pairs(index)
    window = increment_window(index.outputs, repeat_numbers(repeated), config)
    protected = set() if window is None else _protected_positions(index, repeated)
    name = "shorten_tools_epoch_increment"
    return compact(name, messages, index, window, protected, config, detail, columns, rewrites)


class EpochStrategy(Builtin):
    """An epoch strategy: its prompts keep their prefix within an epoch, and a
    session extends the last round's prompt while the bands stand
    (:mod:`scoutd.strategies.epoch_rounds`). ``growing``: the epochs grow with
    the repeats (``shorten_tools_epoch_increment``) instead of being fixed."""

    __slots__ = ("growing",)

    def __init__(self, name: str, run: Callable[..., Any], growing: bool) -> None:
        super().__init__(name, run, keeps_prefix=True, rounds=Rounds.EPOCH)
        self.growing = growing

    def window(
        self, outputs: int, repeats: Callable[[], list[int]], config: PromptConfig
    ) -> Window | None:
        """The window of ``outputs`` tool outputs; ``repeats`` gives the repeat numbers."""
        if self.growing:
            return increment_window(outputs, repeats(), config)
        return fixed_window(outputs, config)


def _runner(
    shorten: Callable[..., tuple[list[Any], StrategyReport]],
) -> Callable[[Sequence[Any], PrepareContext], tuple[list[Any], StrategyReport]]:
    """``shorten`` (one of the two epoch functions) as a strategy's run over its context."""

    def run(messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
        return shorten(
            messages,
            ctx.config,
            detail=ctx.detail,
            columns=ctx.columns,
            given=ctx.given,
            rewrites=ctx.rewrites,
        )

    return run


EPOCH = EpochStrategy("shorten_tools_epoch", _runner(shorten_tools_epoch), growing=False)
EPOCH_INCREMENT = EpochStrategy(
    "shorten_tools_epoch_increment", _runner(shorten_tools_epoch_increment), growing=True
)
