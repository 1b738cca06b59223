"""What a strategy did: per-strategy counts, and the shared output builder.

A compacting strategy lists the usable tool messages it changes (every other
one is kept) in :class:`Changes`; :func:`apply_changes` turns them into the new
message list, in which kept messages are the input objects themselves, and
into the :class:`StrategyReport`.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import and_, itemgetter
from typing import Any

from ..protocol.report import Reason, StrategyReport, ToolAction
from .columns import Columns, known_columns
from .tool_messages import TOOL_ROLES, ToolIndex, with_content

__all__ = [
    "Changes",
    "Explain",
    "Fate",
    "StrategyReport",
    "ToolAction",
    "apply_changes",
    "content_chars",
    "count_changes",
    "notice_text",
    "plain_report",
]


class Fate(enum.IntEnum):
    """What happens to one usable tool message."""

    KEPT = 0
    PROTECTED = 1  # kept verbatim only because it is the latest of a repeated call
    TRUNCATED = 2
    DROPPED = 3


_get_content = itemgetter("content")


def content_chars(messages: Sequence[Any]) -> int:
    """Characters of all string contents of a message list."""
    try:
        # not mutated: a fast path; whatever its mutants raise, the loop below counts the same
        contents = list(map(_get_content, messages))  # pragma: no mutate
    except (KeyError, TypeError, IndexError):
        contents = None  # a message without a content: count the string ones one by one
    if contents is not None and set(map(type, contents)) <= {str}:  # len(list) is no char count
        return sum(map(len, contents))
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


# Why one tool message has its fate: ``(slot, fate)`` to a code and a sentence
# (scoutd.strategies.reasons).
Explain = Callable[[int, "Fate"], tuple[str, str]]


def _actions(
    messages: Sequence[Any], index: ToolIndex, changes: Changes, why: Explain | None
) -> list[ToolAction]:
    fates = dict.fromkeys(changes.protected, Fate.PROTECTED)
    fates.update(dict.fromkeys(changes.rewrites, Fate.TRUNCATED))
    fates.update(dict.fromkeys(changes.dropped, Fate.DROPPED))
    actions = []
    for slot, position in enumerate(index.indices):
        fate = fates.get(slot, Fate.KEPT)
        before = messages[position]["content"]
        after = "" if fate is Fate.DROPPED else changes.rewrites.get(slot, before)
        body = index.bodies[slot]
        reason, sentence = (None, None) if why is None else why(slot, fate)
        actions.append(
            ToolAction(
                index=position,
                role=index.roles[position],
                id=body.id,
                name=body.name,
                position=index.positions[slot],
                action=fate.name.lower(),
                chars_before=len(before),
                chars_after=len(after),
                reason=reason,
                why=sentence,
            )
        )
    return actions


@dataclass(slots=True)
class Changes:
    """What a compacting strategy changes, by tool slot; every other tool is kept.

    ``rewrites`` maps truncated slots to their new content; ``protected`` lists
    slots kept whole only because they are the newest of a repeated call.
    ``narration`` lists the message indexes of assistant remarks dropped with
    the tool traffic around them (only ``shorten_tools_cost_aware`` does).
    """

    dropped: list[int] = field(default_factory=list)
    rewrites: dict[int, str] = field(default_factory=dict)
    protected: list[int] = field(default_factory=list)
    narration: list[int] = field(default_factory=list)


def count_changes(report: StrategyReport, index: ToolIndex, changes: Changes, prefix: bool) -> None:
    """Set the report's kept, truncated, dropped and protected counts from ``changes``.

    ``prefix``: the dropped slots are the oldest ones, ``range(len(dropped))``
    (what the default strategy drops), counted by a slice.
    """
    is_call = index.is_call.__getitem__
    calls = sum(index.is_call)
    outputs = len(index.indices) - calls
    if prefix:
        report.calls_dropped = sum(index.is_call[: len(changes.dropped)])
    else:
        report.calls_dropped = sum(map(is_call, changes.dropped))
    report.outputs_dropped = len(changes.dropped) - report.calls_dropped
    report.calls_truncated = sum(map(is_call, changes.rewrites))
    report.outputs_truncated = len(changes.rewrites) - report.calls_truncated
    report.calls_protected = sum(map(is_call, changes.protected))
    report.outputs_protected = len(changes.protected) - report.calls_protected
    report.calls_kept = (
        calls - report.calls_dropped - report.calls_truncated - report.calls_protected
    )
    report.outputs_kept = (
        outputs - report.outputs_dropped - report.outputs_truncated - report.outputs_protected
    )


def notice_text(template: str, compacted: int, removed: int) -> str:
    """The compaction notice: ``template`` with ``{compacted}`` and ``{removed}`` filled in."""
    return template.replace("{compacted}", str(compacted)).replace("{removed}", str(removed))


def apply_changes(
    name: str,
    messages: Sequence[Any],
    index: ToolIndex,
    changes: Changes,
    *,
    notice: str | None = None,
    detail: bool,
    columns: Columns | None = None,
    reason: Reason | None = None,
    why: Explain | None = None,
) -> tuple[list[Any], StrategyReport]:
    """Build the new message list and the report from a strategy's changes.

    ``notice``, a template with ``{compacted}`` and ``{removed}``, is inserted
    before the first remaining tool-role message when anything was truncated or
    dropped (appended when no tool message remains). ``reason`` goes into the
    report; ``why`` gives each tool message's reason, read only with ``detail``.
    """
    columns = known_columns(messages, columns)
    if columns is not None and columns.lengths is not None:
        before = sum(columns.lengths)  # what content_chars counts, from the lengths read once
    else:
        before = content_chars(messages)
    report = StrategyReport(strategy=name, chars_before=before, reason=reason)
    count = len(changes.dropped)
    prefix = changes.dropped == list(range(count))
    count_changes(report, index, changes, prefix)  # pragma: no mutate (a shortcut: same counts)

    out = list(messages)
    for slot, content in changes.rewrites.items():
        position = index.indices[slot]
        out[position] = with_content(messages[position], content)
    keep = [True] * len(out)
    # keep[position] = False for every dropped tool and remark, without a Python loop
    if prefix:
        dropped: Iterable[int] = index.indices[:count]
    else:
        dropped = map(index.indices.__getitem__, changes.dropped)
    deque(map(keep.__setitem__, chain(dropped, changes.narration), repeat(False)), maxlen=0)
    report.narration_dropped = len(changes.narration)
    compacted = len(changes.rewrites)
    removed = len(changes.dropped)
    if notice is not None and (compacted or removed):
        # the first tool-role message kept, found by map rather than message by message
        remaining = map(and_, map(TOOL_ROLES.__contains__, index.roles), keep)
        first = next(compress(range(len(keep)), remaining), len(out))
        out.insert(first, {"role": "user", "content": notice_text(notice, compacted, removed)})
        keep.insert(first, True)
        report.notice = True
    if removed or changes.narration:
        out = list(compress(out, keep))
    if detail:
        report.actions = _actions(messages, index, changes, why)
    report.chars_after = content_chars(out)
    return out, report
