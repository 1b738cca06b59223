"""The simulator's plot: prompt tokens per round and cumulative cost, for a reader.

What a reader needs from it, and what each choice is for:

* the title says what was replayed and under which prices and cache model
  (the second line of the table's header), so a plot out of its context is
  not misread;
* scoutd's default strategy is the thick black line, drawn on top; the other
  scoutd strategies are solid, the peers' emulations dashed, ``none`` grey;
* strategies whose curves are the same (a short chat that nothing compacts)
  are drawn once, labelled with every name;
* one legend, below the panels, so that it never covers a curve;
* the prompt axis ends above the highest curve: the context window is drawn
  only when it is in range, else the panel's title gives it; a run far above
  the window cuts the axis (and the title says where);
* cumulative cost on a log axis, so that strategies an order of magnitude
  apart (the cheapest ones near zero on a linear axis) stay apart.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from .replay import StrategyResult
from .runners import PEERS

__all__ = ["PLOT_CEILING", "PlotUnavailable", "figure", "plot", "require_matplotlib"]

# The prompt panel is cut at this multiple of the context window, so that a
# run without compaction (millions of tokens) does not flatten every other line.
PLOT_CEILING = 1.6
# Distinct hues for the strategies other than the default and none (tab10, less
# its grey and the black of the default), in order of appearance.
_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def require_matplotlib() -> None:
    """Fail early, before a long replay, when ``--plot`` cannot be honoured.

    Raises:
        PlotUnavailable: matplotlib is missing (the ``scoutd[plot]`` extra).
    """
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError as exc:
        raise PlotUnavailable(
            "--plot needs matplotlib: install the plot extra, pip install 'scoutd[plot]'"
        ) from exc


def _groups(
    rows: Sequence[tuple[str, StrategyResult]],
) -> list[tuple[list[str], StrategyResult]]:
    """Rows whose per-round series are equal, merged: ``(labels, the result drawn)``.

    The result drawn is the default strategy's when it is in the group, and its
    label comes first, so that the default is never hidden under another line.
    """
    groups: list[tuple[list[str], StrategyResult]] = []
    for label, result in rows:
        series = result.series
        if series is None:
            raise ValueError(f"no per-round series for {label}")
        for index, (labels, first) in enumerate(groups):
            other = first.series
            if (
                other is not None
                and other.prompt_tokens == series.prompt_tokens
                and other.cost == series.cost
                and first.failed == result.failed
            ):
                if result.default and not first.default:
                    groups[index] = ([label, *labels], result)
                else:
                    labels.append(label)
                break
        else:
            groups.append(([label], result))
    return groups


def _style(result: StrategyResult, colours: list[str], highlight: bool) -> dict[str, Any]:
    """The line of one strategy: the default stands out, peers are dashed, none is grey."""
    if result.default and highlight:
        return {"color": "black", "linewidth": 2.6, "zorder": 5}
    if result.strategy == "none":
        return {"color": "#7f7f7f", "linewidth": 1.3, "zorder": 2}
    colour = colours.pop(0) if colours else "#17becf"
    dashed = result.strategy in PEERS
    return {"color": colour, "linewidth": 1.3, "linestyle": "--" if dashed else "-", "zorder": 3}


def _label(labels: list[str], result: StrategyResult, highlight: bool) -> str:
    first = f"{labels[0]} (default)" if result.default and highlight else labels[0]
    names = " = ".join([first, *labels[1:]])
    if len(labels) > 1:
        names += " (identical)"
    if result.failed:
        names += " (FAILED: over the window)"
    return names


def plot(
    rows: Sequence[tuple[str, StrategyResult]],
    path: str,
    *,
    context_window: int,
    title: str = "",
    highlight_default: bool = True,
) -> None:
    """Write the :func:`figure` of ``rows`` to ``path`` as a PNG.

    Raises:
        PlotUnavailable: matplotlib is missing (the ``scoutd[plot]`` extra).
        ValueError: a result has no per-round series.
    """
    drawn = figure(
        rows, context_window=context_window, title=title, highlight_default=highlight_default
    )
    drawn.savefig(path, format="png", dpi=100)


def figure(
    rows: Sequence[tuple[str, StrategyResult]],
    *,
    context_window: int,
    title: str = "",
    highlight_default: bool = True,
) -> Any:
    """A matplotlib Figure: prompt tokens per round (top) and cumulative cost (bottom).

    ``title`` is the table's header: its first line (the workload) and second
    (prices and cache model) head the figure. ``highlight_default`` draws
    scoutd's default strategy apart (off for a sweep, where every line may be it).

    Raises:
        PlotUnavailable: matplotlib is missing (the ``scoutd[plot]`` extra).
        ValueError: a result has no per-round series.
    """
    require_matplotlib()
    from matplotlib.figure import Figure  # type: ignore[import-not-found,unused-ignore]
    from matplotlib.ticker import FuncFormatter  # type: ignore[import-not-found,unused-ignore]

    drawn = Figure(figsize=(12, 9.5), layout="constrained")
    top, bottom = drawn.subplots(2, 1, sharex=True)
    groups = _groups(rows)
    # The default last, so that it is drawn over the others and listed first.
    groups.sort(key=lambda group: highlight_default and group[1].default)
    colours = list(_COLOURS)
    total = max((sum(r.series.cost) for _, r in groups if r.series is not None), default=0.0)
    scale, unit = (1e6, "millions") if total >= 1e6 else (1e3, "thousands")
    peak = 0
    handles: list[Any] = []
    for labels, result in groups:
        series = result.series
        assert series is not None  # checked by _groups
        rounds = range(1, len(series.prompt_tokens) + 1)
        style = _style(result, colours, highlight_default)
        label = _label(labels, result, highlight_default)
        (line,) = top.plot(rounds, series.prompt_tokens, label=label, **style)
        cumulative = [max(c, 1e-9) / scale for c in accumulate(series.cost)]
        bottom.plot(rounds, cumulative, **style)
        # The default heads the legend; the others keep the order asked for.
        if result.default and highlight_default:
            handles.insert(0, line)
        else:
            handles.append(line)
        peak = max(peak, max(series.prompt_tokens, default=0))
    ceiling = PLOT_CEILING * context_window
    if peak > ceiling:
        top.set_ylim(0, ceiling)
        heading = f"Prompt tokens per round (axis cut at {ceiling:,.0f})"
    elif peak >= 0.5 * context_window:
        top.set_ylim(0, max(peak, context_window) * 1.05)
        heading = "Prompt tokens per round"
    else:
        top.set_ylim(0, max(peak, 1) * 1.1)
        heading = (
            f"Prompt tokens per round (the context window, {context_window:,} tokens, is far above)"
        )
    if peak >= 0.5 * context_window:
        (window,) = top.plot(
            [], [], color="black", linestyle=":", linewidth=1, label="context window"
        )
        top.axhline(context_window, color="black", linestyle=":", linewidth=1)
        handles.append(window)
    top.set_title(heading, fontsize=10)
    top.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    top.set_ylabel("prompt tokens")
    top.grid(alpha=0.3)
    bottom.set_title("Cumulative billed input, log scale (uncached-token units)", fontsize=10)
    bottom.set_yscale("log")
    bottom.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    bottom.set_ylabel(f"{unit} of units")
    bottom.set_xlabel("round (one per tool output)")
    bottom.grid(alpha=0.3, which="both")
    longest = max((len(handle.get_label()) for handle in handles), default=0)
    drawn.legend(
        handles=handles,
        loc="outside lower center",
        ncols=1 if longest > 70 else min(3, len(handles)),
        fontsize=9,
    )
    if title:
        lines = [textwrap.fill(line, 160) for line in title.splitlines()[:2]]
        drawn.suptitle("\n".join(lines), fontsize=10)
    return drawn
