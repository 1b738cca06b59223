"""The text table of ``scoutd explain``: one row per tool message, then the counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..paths import printable
from .common import encode

if TYPE_CHECKING:
    from ..protocol.report import StrategyReport

__all__ = ["explain_lines"]


def _counts(report: StrategyReport) -> str:
    def side(prefix: str) -> str:
        values = [
            (label, getattr(report, f"{prefix}_{label}"))
            for label in ("kept", "protected", "truncated", "dropped")
        ]
        return ", ".join(f"{value} {label}" for label, value in values)

    parts = [
        f"calls: {side('calls')}",
        f"outputs: {side('outputs')}",
        f"chars: {report.chars_before} -> {report.chars_after}",
        f"notice: {'inserted' if report.notice else 'no'}",
        f"inbox delivered: {report.inbox_delivered}",
    ]
    return "; ".join(parts)


def _cell(value: Any, width: int = 40) -> str:
    """A tool id or name from the chat (the agent chose it): one safe line, cut to ``width``."""
    text = "-" if value is None else value if isinstance(value, str) else encode(value).decode()
    text = printable(text.replace("\n", " "))
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def explain_lines(report: StrategyReport) -> list[str]:
    """The lines that explain one strategy's report."""
    lines = [f"strategy {report.strategy}"]
    actions = report.actions
    if actions is None:
        lines.append("  (no per-message detail from this strategy)")
    elif not actions:
        lines.append("  (no tool messages)")
    else:
        header = ("#", "role", "id", "name", "pos", "action", "chars", "why")
        rows = [
            (
                str(action.index),
                action.role,
                _cell(action.id),
                _cell(action.name),
                str(action.position),
                action.action,
                f"{action.chars_before} -> {action.chars_after}",
                action.why or "-",
            )
            for action in actions
        ]
        lines.extend(_table(header, rows, numeric={0, 4}))
    lines.append("  " + _counts(report))
    if report.reason is not None:
        lines.append(f"  why: {report.reason.text}")
    return lines
