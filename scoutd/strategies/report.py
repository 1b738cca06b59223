"""What a strategy did: per-strategy counts, and the shared output builder.

A compacting strategy decides, per usable tool message, one :class:`Fate`;
:func:`apply_fates` turns those decisions into the new message list (kept
messages are the input objects themselves) and the :class:`StrategyReport`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .tool_messages import TOOL_ROLES, ToolIndex, role_of, with_content

__all__ = ["Fate", "StrategyReport", "ToolAction", "apply_fates", "content_chars", "plain_report"]


class Fate(enum.IntEnum):
    """What happens to one usable tool message."""

    KEPT = 0
    PROTECTED = 1  # kept verbatim only because it is the latest of a repeated call
    TRUNCATED = 2
    DROPPED = 3


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


class StrategyReport(msgspec.Struct, kw_only=True):
    """Counts of one strategy run (SPEC section 3).

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


def content_chars(messages: Sequence[Any]) -> int:
    """Characters of all string contents of a message list."""
    total = 0
    for message in messages:
        if type(message) is dict or isinstance(message, Mapping):
            content = message.get("content")
            if type(content) is str:
                total += len(content)
    return total


def plain_report(name: str, before: Sequence[Any], after: Sequence[Any]) -> StrategyReport:
    """A report with character counts only (for strategies that say nothing more)."""
    return StrategyReport(
        strategy=name, chars_before=content_chars(before), chars_after=content_chars(after)
    )


_COUNTERS = {
    (True, Fate.KEPT): "calls_kept",
    (True, Fate.PROTECTED): "calls_protected",
    (True, Fate.TRUNCATED): "calls_truncated",
    (True, Fate.DROPPED): "calls_dropped",
    (False, Fate.KEPT): "outputs_kept",
    (False, Fate.PROTECTED): "outputs_protected",
    (False, Fate.TRUNCATED): "outputs_truncated",
    (False, Fate.DROPPED): "outputs_dropped",
}


def apply_fates(
    name: str,
    messages: Sequence[Any],
    index: ToolIndex,
    fates: Sequence[Fate],
    rewrites: Sequence[str | None],
    *,
    notice: str | None = None,
    detail: bool = False,
) -> tuple[list[Any], StrategyReport]:
    """Build the new message list from per-tool fates.

    ``rewrites[i]`` is the new content of ``index.tools[i]`` when its fate is
    ``TRUNCATED``. ``notice``, a template with ``{compacted}`` and ``{removed}``,
    is inserted before the first remaining tool-role message when anything was
    truncated or dropped (appended when no tool message remains).
    """
    report = StrategyReport(strategy=name)
    counts = dict.fromkeys(_COUNTERS.values(), 0)
    actions: list[ToolAction] | None = [] if detail else None
    fate_at: dict[int, int] = {tool.index: i for i, tool in enumerate(index.tools)}
    out: list[Any] = []
    first_tool_slot = -1
    for position, message in enumerate(messages):
        slot = fate_at.get(position)
        if slot is None:
            if first_tool_slot < 0 and role_of(message) in TOOL_ROLES:
                first_tool_slot = len(out)
            out.append(message)
            continue
        tool = index.tools[slot]
        fate = fates[slot]
        counts[_COUNTERS[tool.is_call, fate]] += 1
        if fate is Fate.DROPPED:
            kept = None
        elif fate is Fate.TRUNCATED:
            rewritten = rewrites[slot]
            assert rewritten is not None
            kept = with_content(message, rewritten)
        else:
            kept = message
        if kept is not None:
            if first_tool_slot < 0:
                first_tool_slot = len(out)
            out.append(kept)
        if actions is not None:
            actions.append(
                ToolAction(
                    index=position,
                    role=message["role"],
                    id=tool.data.get("id"),
                    name=tool.data.get("name"),
                    position=tool.position,
                    action=fate.name.lower(),
                    chars_before=len(message["content"]),
                    chars_after=0 if kept is None else len(kept["content"]),
                )
            )
    for key, value in counts.items():
        setattr(report, key, value)
    compacted = report.calls_truncated + report.outputs_truncated
    removed = report.calls_dropped + report.outputs_dropped
    if notice is not None and (compacted or removed):
        text = notice.replace("{compacted}", str(compacted)).replace("{removed}", str(removed))
        note = {"role": "user", "content": text}
        out.insert(first_tool_slot if first_tool_slot >= 0 else len(out), note)
        report.notice = True
    report.actions = actions
    report.chars_before = content_chars(messages)
    report.chars_after = content_chars(out)
    return out, report
