"""The results of a prepare as both ends see them: :class:`Prepared`, its reports.

What :func:`scoutd.prepare` returns in-process is what the daemon sends and the
clients decode (docs/STRATEGIES.md, the report; docs/PROTOCOL.md), so these
Structs live with the wire types: the protocol and the clients use them
without loading the strategies that fill them in.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Prepared", "Reason", "StrategyReport", "ToolAction"]


class ToolAction(msgspec.Struct, kw_only=True):
    """One tool message's fate, for ``scoutd explain``."""

    index: int
    role: str
    id: Any
    name: Any
    position: int
    action: str
    chars_before: int
    chars_after: int
    # Why this message has its fate: a short code (``newest``, ``band``, ``older``,
    # ...; docs/STRATEGIES.md, the report) and the sentence for an operator. None
    # from a strategy that does not say (a plugin) or from an older daemon.
    reason: str | None = None
    why: str | None = None


class Reason(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Why a strategy compacted as it did at the last round (docs/STRATEGIES.md, the report).

    ``code`` is stable, for programs (``below_trigger``, ``not_paying``, ...);
    ``text`` is the sentence for an operator. The figures are those the
    decision read, when it read them: tokens, and costs in uncached input
    tokens (docs/ECONOMY.md, the model); each is None when it does not apply.
    """

    code: str
    text: str
    prompt_tokens: int | None = None  # the prompt, with the bands of the last compaction
    trigger_tokens: int | None = None  # no compaction below this many
    limit_tokens: int | None = None  # always compacted above this many
    removed_tokens: int | None = None  # what a compaction now would remove
    rewrite_cost: float | None = None  # that compaction's extra cost, once
    paid_cost: float | None = None  # read cost paid since the last decision for what it removes
    needed_cost: float | None = None  # what the rent-or-buy rule waits for that to reach
    more_tokens: int | None = None  # growth until it compacts (pays, or forced by the limit)
    decided_at: int | None = None  # the output at which the bands in force were decided


class StrategyReport(msgspec.Struct, kw_only=True):
    """Counts of one strategy run (docs/STRATEGIES.md, the report).

    ``chars_before``/``chars_after`` count the characters of every string
    ``content`` of the message list before and after the strategy.
    """

    strategy: str
    calls_kept: int = 0
    calls_truncated: int = 0
    calls_dropped: int = 0
    calls_protected: int = 0
    outputs_kept: int = 0
    outputs_truncated: int = 0
    outputs_dropped: int = 0
    outputs_protected: int = 0
    chars_before: int = 0
    chars_after: int = 0
    inbox_delivered: int = 0
    notice: bool = False
    actions: list[ToolAction] | None = None
    # The message format of the call (docs/FORMATS.md); the figures below are the
    # whole call's and appear on its last report entry only.
    format: str = "scout"
    malformed: int = 0
    narration_dropped: int = 0
    stable_prefix: int | None = None
    warnings: list[str] | None = None
    reason: Reason | None = None


class Prepared(msgspec.Struct, kw_only=True):
    """The prepared prompt and what each strategy did to get there."""

    messages: list[Any]
    report: list[StrategyReport]

    @property
    def format(self) -> str:
        """The message format used (docs/FORMATS.md)."""
        return self.report[-1].format if self.report else "scout"

    @property
    def stable_prefix(self) -> int:
        """Leading messages that stay byte-identical until the next epoch boundary."""
        value = self.report[-1].stable_prefix if self.report else None
        return 0 if value is None else value

    @property
    def warnings(self) -> list[str]:
        """Warnings about the input (foreign tool traffic), also logged."""
        return [w for r in self.report for w in (r.warnings or ())]
