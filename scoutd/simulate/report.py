"""Output of the simulator: a readable table and JSON (the plot: :mod:`.plotting`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..paths import printable
from .plotting import PlotUnavailable, plot, require_matplotlib
from .replay import Simulation, StrategyResult

__all__ = [
    "PlotUnavailable",
    "encode_json",
    "format_header",
    "format_table",
    "plot",
    "require_matplotlib",
]


def _billed(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.1f}k"


def format_header(simulation: Simulation, *, exclude: str | None = None) -> str:
    """What was replayed, under which cache and price model, with which overrides:
    lines of printable text (:func:`~scoutd.paths.printable`).

    ``exclude`` leaves one override out (the key a sweep varies).
    """
    w, m = simulation.workload, simulation.model
    if w["source"] == "synthetic":
        what = (
            f"synthetic run: {w['calls']} calls (seed {w['seed']}, repeat rate "
            f"{w['repeat_rate']:g}, {w['user_turns']} user turns)"
        )
    else:
        what = f"chat {w['source']}"
    prices = m["prices"]
    granularity = m["cache_granularity"]
    match = "prefix match" if granularity == 1 else f"steps of {granularity} tokens"
    if m.get("whole_messages"):
        match = "prefix match of whole messages"
    if m.get("cache_model") == "breakpoints":
        match = "breakpoints (earlier prompt ends, 20 messages back)"
    if m.get("cache_ttl") is not None:
        match += f", {m['round_seconds']:g} s between rounds, lifetime {m['cache_ttl']:g} s"
    lines = [
        f"{what}: {w['messages']:,} messages, {w['rounds']:,} rounds, {w['chars']:,} characters",
        f"pricing {m['pricing']} (input {prices['input']:g}, write {prices['write']:g}, read "
        f"{prices['read']:g}, output {prices.get('output', 0):g}); cache {match}, min "
        f"{m['cache_min_tokens']:,} tokens; tokens = {m['tokens']}; context window "
        f"{m['context_window']:,} tokens",
    ]
    overrides = {k: v for k, v in m["config_overrides"].items() if k != exclude}
    if overrides:
        listed = ", ".join(f"{k}={v}" for k, v in overrides.items())
        lines.append(f"config overrides: {listed}")
    # A --set value, a chat's file name or a tokenizer's name is the user's text: an
    # escape sequence or a newline in it must not drive the terminal or forge a line.
    return "\n".join(printable(line) for line in lines)


_COLUMNS = (
    ("strategy", "<"),
    ("billed", ">"),
    ("vs none", ">"),
    ("cache read", ">"),
    ("breaks", ">"),
    ("peak prompt", ">"),
    ("overflow", ">"),
    ("last-20 verbatim", ">"),
    ("verbatim", ">"),
    ("truncated", ">"),
    ("dropped", ">"),
    ("hidden facts", ">"),
    ("calls hiding", ">"),
)


def _row(label: str, result: StrategyResult) -> list[str]:
    retention = result.retention
    overflow = f"{result.overflow_rounds} FAILED" if result.failed else "0"
    return [
        printable(label),  # a swept value is the user's text, as in the header
        _billed(result.billed),
        "-" if result.ratio is None else f"{result.ratio:.3f}",
        f"{result.cache_read_share:.1%}",
        str(result.cache_breaks),
        f"{result.peak_prompt_tokens:,}",
        overflow,
        f"{retention.recent_verbatim:.1%}",
        str(retention.verbatim),
        str(retention.truncated),
        str(retention.dropped),
        "-" if result.facts is None else f"{result.facts.rate:.1%}",
        "-" if result.facts is None else f"{result.facts.call_share:.1%}",
    ]


def format_table(rows: Sequence[tuple[str, StrategyResult]], *, markdown: bool = False) -> str:
    """The comparison table: one row per ``(label, result)``."""
    header = [name for name, _ in _COLUMNS]
    cells = [_row(label, result) for label, result in rows]
    if markdown:
        align = ["---" if side == "<" else "---:" for _, side in _COLUMNS]
        lines = [header, align, *cells]
        return "\n".join("| " + " | ".join(line) + " |" for line in lines)
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    out = []
    for line in [header, *cells]:
        parts = [
            f"{text:{side}{width}}"
            for text, (_, side), width in zip(line, _COLUMNS, widths, strict=True)
        ]
        out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def encode_json(value: Any, *, per_round: bool = False) -> str:
    """Indented JSON of a simulation (or a sweep); per-round series only if asked."""
    data = msgspec.to_builtins(value)

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if per_round or k != "series"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    encoded = msgspec.json.encode(strip(data))
    return msgspec.json.format(encoded, indent=2).decode("utf-8")
