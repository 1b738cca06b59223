"""Replay a file of recorded runs and aggregate the figures by run length.

A runs file holds one JSON object a line with a ``messages`` list (gzip when
its name ends in ``.gz``), in any format of docs/FORMATS.md. Each run is
replayed on its own under every strategy, priced at its provider's prices when
the pricing is ``auto`` (the preset of the run's format), and compared with
``none`` on the same run. A provider-format run is replayed in its own messages
(:mod:`.provider`); a run in scoutd's roles by the scout-view replay, which
also counts the outputs kept verbatim.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import msgspec

from ..errors import FormatError, InvalidMessages
from ..formats import SCOUT, detect_format, scout_view
from ..pricing import AUTO, preset_for_format
from .cache import PRESETS
from .facts import FactTally, Hidden, RunFacts
from .files import ChatError, is_regular, read_lines
from .origins import Origins
from .peers import output_data
from .provider import provider_facts, replay_in_format
from .replay import (
    DEFAULT_STRATEGY,
    Settings,
    check_strategies,
    provider_config,
    run_facts,
    run_strategy,
)
from .workload import Workload

__all__ = [
    "BUCKETS",
    "RunRow",
    "bucket_of",
    "count_runs",
    "format_runs",
    "read_runs",
    "replay_runs",
]

# Run lengths in tool outputs: the aggregate has one row per bucket and strategy.
BUCKETS = ((1, 25), (26, 50), (51, 75), (76, 100), (101, 150), (151, None))
# The long runs, also aggregated together: runs of at least this many outputs.
LONG_RUN = 100


class RunRow(msgspec.Struct, kw_only=True):
    """One run: its size and, per strategy, the figures against ``none``."""

    run: int
    format: str
    outputs: int
    strategies: dict[str, dict[str, Any]]


def bucket_of(outputs: int) -> str:
    """The label of the length bucket of a run with ``outputs`` tool outputs."""
    for low, high in BUCKETS:
        if high is None or outputs <= high:
            return f"{low}+" if high is None else f"{low}-{high}"
    return "0"


def read_runs(path: str, limit: int | None = None) -> Iterator[tuple[int, list[Any]]]:
    """``(line number, messages)`` of every run of a JSONL file (``.gz``: gzip).

    One line is held at a time, at most ``limit`` bytes (:func:`.files.read_lines`;
    default: :data:`.files.MAX_INPUT_BYTES`).

    Raises:
        ChatError: the file cannot be read, or a line is not a run.
    """
    for number, line in read_lines(path, limit):
        if not line.strip():
            continue
        try:
            data = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise ChatError(f"{path}:{number}: not JSON: {exc}") from exc
        except RecursionError:
            raise ChatError(f"{path}:{number}: JSON nested too deeply") from None
        messages = data.get("messages") if isinstance(data, dict) else None
        if not isinstance(messages, list):
            raise ChatError(f"{path}:{number}: no 'messages' list")
        yield number, messages


def count_runs(path: str) -> int | None:
    """How many runs ``path`` holds, every line checked; None when it cannot be read
    twice (a pipe: ``--runs <(zcat runs.jsonl.gz)``), whose runs are read once only."""
    return sum(1 for _ in read_runs(path)) if is_regular(path) else None


def _run_settings(settings: Settings, pricing: str, format_name: str) -> Settings:
    if pricing != AUTO:
        return settings
    preset = preset_for_format(format_name)
    prices, cache = PRESETS[preset]
    cache = dataclasses.replace(
        settings.cache,
        granularity=cache.granularity,
        min_tokens=cache.min_tokens,
        ttl=cache.ttl if settings.cache.ttl is not None else None,
    )
    return dataclasses.replace(
        settings,
        prices=prices,
        cache=cache,
        pricing=preset,
        config=provider_config(settings.config, preset),
    )


def replay_runs(
    path: str,
    strategies: Sequence[str],
    settings: Settings,
    pricing: str,
    *,
    tick: Callable[[int], None] | None = None,
    origins: Origins | None = None,
) -> list[RunRow]:
    """Replay every run of ``path`` under ``strategies`` (and ``none``, the baseline).

    Each run is indexed once for the hidden-fact measure; ``origins`` counts
    where the needed and hidden facts of its strategy come from.
    """
    check_strategies(strategies, settings.config)
    rows = []
    for count, (number, raw) in enumerate(read_runs(path), start=1):
        try:
            format_name = detect_format(raw)
        except ValueError as exc:
            raise ChatError(f"{path}:{number}: {exc}") from exc
        run_settings = _run_settings(settings, pricing, format_name)
        figures: dict[str, dict[str, Any]] = {}
        workload = Workload(raw, f"run {number}", {"run": number})
        facts = run_facts(workload) if format_name == SCOUT else provider_facts(raw, format_name)
        if origins is not None:
            origins.run(facts)
        results: dict[str, Any] = {}
        for name in ["none", *(n for n in strategies if n != "none")]:
            hook = _recorder(origins, name, facts)
            try:
                if format_name == SCOUT:
                    results[name] = run_strategy(
                        workload, name, run_settings, keep_series=False, facts=facts, record=hook
                    )
                else:  # priced in the provider's own messages
                    results[name] = replay_in_format(
                        raw, format_name, name, run_settings, facts=facts, record=hook
                    )
            except (InvalidMessages, FormatError) as exc:  # the run's, not the replay's
                raise ChatError(f"{path}:{number}: {exc}") from exc
        base = results["none"]
        for name in strategies:
            found = results[name]
            figures[name] = _figures(name, found.billed, base.billed, found.failed)
            figures[name]["facts"] = found.facts
            if format_name == SCOUT:
                figures[name]["verbatim"] = found.retention.verbatim
        outputs = (
            base.retention.outputs
            if format_name == SCOUT
            else count_outputs(scout_view(raw, format_name))
        )
        rows.append(RunRow(run=number, format=format_name, outputs=outputs, strategies=figures))
        if tick is not None:
            tick(count)
    return rows


def _recorder(
    origins: Origins | None, name: str, facts: RunFacts
) -> Callable[[Hidden], None] | None:
    """What passes the hidden facts of strategy ``name`` to ``origins``."""
    if origins is None or name != origins.strategy:
        return None
    return partial(origins.record, facts)


def _figures(name: str, billed: float, baseline: float, failed: bool) -> dict[str, Any]:
    return {
        "billed": billed,
        "ratio": billed / baseline if baseline else None,
        "failed": failed,
        "default": name == DEFAULT_STRATEGY,
    }


def count_outputs(messages: Sequence[Any]) -> int:
    """Tool outputs of a scout-format conversation."""
    return sum(1 for m in messages if output_data(m) is not None)


def pooled_facts(rows: Sequence[RunRow], name: str) -> FactTally:
    """The hidden-fact counts of strategy ``name`` summed over ``rows``."""
    total = FactTally()
    for row in rows:
        tally = row.strategies[name].get("facts")
        if tally is not None:
            total.add(tally)
    return total


def aggregate(rows: Sequence[RunRow], strategies: Sequence[str]) -> list[dict[str, Any]]:
    """Per bucket and strategy: runs, mean and worst ratio, failures, hidden facts.

    Then the runs of ``LONG_RUN`` outputs or more (``100+``), then all runs. The
    hidden-fact rate and the share of calls hiding one are pooled over the
    group's calls (hidden over needed facts of all its runs).
    """
    groups: dict[str, list[RunRow]] = {}
    for row in rows:
        groups.setdefault(bucket_of(row.outputs), []).append(row)
    order = [bucket_of(low) for low, _ in BUCKETS if bucket_of(low) in groups]
    long_runs = [row for row in rows if row.outputs >= LONG_RUN]
    extra = [(f"{LONG_RUN}+", long_runs)] if long_runs else []
    out = []
    for label, members in [*((b, groups[b]) for b in order), *extra, ("all", list(rows))]:
        for name in strategies:
            ratios = [r.strategies[name]["ratio"] for r in members if r.strategies[name]["ratio"]]
            tally = pooled_facts(members, name)
            out.append(
                {
                    "bucket": label,
                    "strategy": name,
                    "runs": len(members),
                    "mean_ratio": statistics.mean(ratios) if ratios else None,
                    "worst_ratio": max(ratios) if ratios else None,
                    "failed": sum(1 for r in members if r.strategies[name]["failed"]),
                    "default": name == DEFAULT_STRATEGY,
                    "needed_facts": tally.needed,
                    "hidden_facts": tally.hidden,
                    "hidden_rate": tally.rate,
                    "calls": tally.calls,
                    "calls_hiding_share": tally.call_share,
                }
            )
    return out


def format_runs(rows: Sequence[RunRow], strategies: Sequence[str]) -> str:
    """Per-run rows (billed vs ``none`` per strategy), then the aggregate by length."""
    names = list(strategies)
    header = ["run", "format", "outputs", *names]
    cells = []
    for row in rows:
        figures = row.strategies
        cells.append(
            [
                str(row.run),
                row.format,
                str(row.outputs),
                *(
                    ("FAILED " if figures[n]["failed"] else "") + _ratio(figures[n]["ratio"])
                    for n in names
                ),
            ]
        )
    lines = [_columns(header, cells)]
    summary = aggregate(rows, names)
    table = [
        [
            s["bucket"],
            s["strategy"] + (" (default)" if s["default"] else ""),
            str(s["runs"]),
            "-" if s["mean_ratio"] is None else f"{s['mean_ratio']:.3f}",
            "-" if s["worst_ratio"] is None else f"{s['worst_ratio']:.3f}",
            str(s["failed"]),
            f"{s['hidden_rate']:.1%}",
            f"{s['calls_hiding_share']:.1%}",
        ]
        for s in summary
    ]
    lines.append("")
    header = ["outputs", "strategy", "runs", "mean vs none", "worst", "failed"]
    lines.append(_columns([*header, "hidden facts", "calls hiding"], table))
    return "\n".join(lines)


def _ratio(ratio: float | None) -> str:
    """A run's ratio to ``none``; ``-`` when ``none`` billed nothing (a run without rounds)."""
    return "-" if ratio is None else f"{ratio:.3f}"


def _columns(header: list[str], cells: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    out = []
    for line in [header, *cells]:
        parts = [
            text.ljust(width) if i < 2 else text.rjust(width)
            for i, (text, width) in enumerate(zip(line, widths, strict=True))
        ]
        out.append("  ".join(parts).rstrip())
    return "\n".join(out)
