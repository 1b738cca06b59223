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
import gzip
import statistics
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from ..formats import SCOUT, detect_format, scout_view
from ..pricing import AUTO, preset_for_format
from .cache import PRESETS
from .peers import output_data
from .provider import replay_in_format
from .replay import DEFAULT_STRATEGY, Settings, check_strategies, provider_config, run_strategy
from .workload import ChatError, Workload

__all__ = ["BUCKETS", "RunRow", "bucket_of", "format_runs", "read_runs", "replay_runs"]

# Run lengths in tool outputs: the aggregate has one row per bucket and strategy.
BUCKETS = ((1, 25), (26, 50), (51, 75), (76, 100), (101, 150), (151, None))


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


def read_runs(path: str) -> Iterator[tuple[int, list[Any]]]:
    """``(line number, messages)`` of every run of a JSONL file (``.gz``: gzip).

    Raises:
        ChatError: the file cannot be read, or a line is not a run.
    """
    try:
        handle = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")  # noqa: SIM115
        with handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    data = msgspec.json.decode(line)
                except msgspec.DecodeError as exc:
                    raise ChatError(f"{path}:{number}: not JSON: {exc}") from exc
                messages = data.get("messages") if isinstance(data, dict) else None
                if not isinstance(messages, list):
                    raise ChatError(f"{path}:{number}: no 'messages' list")
                yield number, messages
    except (OSError, EOFError) as exc:
        raise ChatError(f"cannot read runs {path}: {exc}") from exc


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
) -> list[RunRow]:
    """Replay every run of ``path`` under ``strategies`` (and ``none``, the baseline)."""
    check_strategies(strategies, settings.config)
    rows = []
    for count, (number, raw) in enumerate(read_runs(path), start=1):
        try:
            format_name = detect_format(raw)
        except ValueError as exc:
            raise ChatError(f"{path}:{number}: {exc}") from exc
        run_settings = _run_settings(settings, pricing, format_name)
        figures: dict[str, dict[str, Any]] = {}
        if format_name == SCOUT:
            workload = Workload(raw, f"run {number}", {"run": number})
            base = run_strategy(workload, "none", run_settings, keep_series=False)
            outputs = base.retention.outputs
            for name in strategies:
                result = (
                    base
                    if name == "none"
                    else run_strategy(workload, name, run_settings, keep_series=False)
                )
                figures[name] = _figures(name, result.billed, base.billed, result.failed)
                figures[name]["verbatim"] = result.retention.verbatim
        else:  # priced in the provider's own messages
            outputs = count_outputs(scout_view(raw, format_name))
            provider_base = replay_in_format(raw, format_name, "none", run_settings)
            for name in strategies:
                found = (
                    provider_base
                    if name == "none"
                    else replay_in_format(raw, format_name, name, run_settings)
                )
                figures[name] = _figures(name, found.billed, provider_base.billed, found.failed)
        rows.append(RunRow(run=number, format=format_name, outputs=outputs, strategies=figures))
        if tick is not None:
            tick(count)
    return rows


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


def aggregate(rows: Sequence[RunRow], strategies: Sequence[str]) -> list[dict[str, Any]]:
    """Per bucket and strategy: runs, mean and worst ratio, failures; then all runs."""
    groups: dict[str, list[RunRow]] = {}
    for row in rows:
        groups.setdefault(bucket_of(row.outputs), []).append(row)
    order = [bucket_of(low) for low, _ in BUCKETS if bucket_of(low) in groups]
    out = []
    for label, members in [*((b, groups[b]) for b in order), ("all", list(rows))]:
        for name in strategies:
            ratios = [r.strategies[name]["ratio"] for r in members if r.strategies[name]["ratio"]]
            out.append(
                {
                    "bucket": label,
                    "strategy": name,
                    "runs": len(members),
                    "mean_ratio": statistics.mean(ratios) if ratios else None,
                    "worst_ratio": max(ratios) if ratios else None,
                    "failed": sum(1 for r in members if r.strategies[name]["failed"]),
                    "default": name == DEFAULT_STRATEGY,
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
                    ("FAILED " if figures[n]["failed"] else "") + f"{figures[n]['ratio']:.3f}"
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
        ]
        for s in summary
    ]
    lines.append("")
    lines.append(
        _columns(["outputs", "strategy", "runs", "mean vs none", "worst", "failed"], table)
    )
    return "\n".join(lines)


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
