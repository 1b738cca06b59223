"""The cost/harm plot of ``scoutd simulate --runs FILE --plot``: bill against what is hidden.

Each strategy replayed is one point per group of runs: its mean bill against
``none`` across, its hidden-fact rate up (docs/ECONOMY.md, "What the prompts
hide"). Two panels, all runs and the runs of 100+ outputs, share their axes so
that a point moving between them is read at a glance. The best place is the
bottom left; ``none`` sits at (1, 0) by construction.

:func:`harm_points` picks the points from the replay's aggregate (pure, and
what the tests check); :func:`harm_figure` draws them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .plotting import require_matplotlib
from .runners import PEERS
from .runs import LONG_RUN

__all__ = ["GROUPS", "HarmPoint", "harm_figure", "harm_points", "plot_harm"]

# The aggregate's groups drawn, each in its panel: every run, then the long ones.
GROUPS = ("all", f"{LONG_RUN}+")
_TITLES = {"all": "all runs", f"{LONG_RUN}+": f"runs of {LONG_RUN}+ outputs"}


@dataclass(frozen=True, slots=True)
class HarmPoint:
    """One strategy in one group: its mean bill against ``none`` and its hidden-fact rate."""

    group: str
    strategy: str
    runs: int
    bill: float
    hidden: float  # hidden needed facts over needed facts, 0 to 1
    default: bool


def harm_points(aggregate: Sequence[Mapping[str, Any]]) -> list[HarmPoint]:
    """The points of :data:`GROUPS`, in the aggregate's order (a strategy without a
    mean bill, which no run of the group priced, has no point)."""
    return [
        HarmPoint(
            group=row["bucket"],
            strategy=row["strategy"],
            runs=row["runs"],
            bill=row["mean_ratio"],
            hidden=row["hidden_rate"],
            default=bool(row["default"]),
        )
        for row in aggregate
        if row["bucket"] in GROUPS and row["mean_ratio"] is not None
    ]


def _style(point: HarmPoint) -> dict[str, Any]:
    """The default a large black star; peers squares; scoutd's others circles; none grey."""
    if point.default:
        return {"marker": "*", "s": 260, "color": "black", "zorder": 5}
    if point.strategy == "none":
        return {"marker": "o", "s": 70, "color": "#7f7f7f", "zorder": 3}
    peer = point.strategy.split()[0] in PEERS
    return {"marker": "s" if peer else "o", "s": 70, "color": "#1f77b4" if peer else "#2ca02c"}


def _labels(points: Sequence[HarmPoint]) -> list[tuple[HarmPoint, str]]:
    """Points at the same place drawn once, labelled with every name (none and a peer
    that never fires, say)."""
    placed: dict[tuple[float, float], list[HarmPoint]] = {}
    for point in points:
        placed.setdefault((round(point.bill, 3), round(point.hidden, 4)), []).append(point)
    drawn = []
    for same in placed.values():
        same.sort(key=lambda p: not p.default)
        names = [p.strategy + (" (default)" if p.default else "") for p in same]
        drawn.append((same[0], " = ".join(names)))
    return drawn


# Labels closer than this (in axes fractions) to one already placed move up a step.
_LABEL_STEP = 0.05
_LABEL_WIDTH = 0.32


def _placed(
    labelled: list[tuple[HarmPoint, str]], xs: tuple[float, float], ys: tuple[float, float]
) -> list[tuple[HarmPoint, str, tuple[float, float]]]:
    """Each label's place (axes fractions) just right of its point, moved up past the
    labels already placed that it would overlap (points close together, say none and a
    peer that never fires)."""
    placed: list[tuple[float, float]] = []
    out = []
    for point, label in sorted(labelled, key=lambda item: (item[0].hidden, item[0].bill)):
        x = (point.bill - xs[0]) / (xs[1] - xs[0]) + 0.02
        y = (point.hidden - ys[0]) / (ys[1] - ys[0]) + 0.02
        while any(abs(y - b) < _LABEL_STEP and abs(x - a) < _LABEL_WIDTH for a, b in placed):
            y += _LABEL_STEP
        placed.append((x, y))
        out.append((point, label, (x, y)))
    return out


def harm_figure(points: Sequence[HarmPoint], title: str = "") -> Any:
    """A matplotlib Figure: one panel per group, a labelled point per strategy.

    Raises:
        PlotUnavailable: matplotlib is missing (the ``scoutd[plot]`` extra).
    """
    require_matplotlib()
    from matplotlib.figure import Figure  # type: ignore[import-not-found,unused-ignore]
    from matplotlib.ticker import PercentFormatter  # type: ignore[import-not-found,unused-ignore]

    groups = [group for group in GROUPS if any(p.group == group for p in points)]
    drawn = Figure(figsize=(12, 5.2), layout="constrained")
    panels = drawn.subplots(1, max(len(groups), 1), sharex=True, sharey=True, squeeze=False)[0]
    bills = [p.bill for p in points] or [1.0]
    hidden = [p.hidden for p in points] or [0.0]
    low, high = min(min(bills) - 0.05, 0.9), max(bills) * 1.18 + 0.05
    top = max(hidden) * 1.1 + 0.01
    for axes, group in zip(panels, groups, strict=False):
        members = [p for p in points if p.group == group]
        runs = members[0].runs if members else 0
        counted = f"{runs} run" if runs == 1 else f"{runs} runs"
        axes.set_title(f"{_TITLES.get(group, group)} ({counted})", fontsize=10)
        axes.axvline(1.0, color="#7f7f7f", linestyle=":", linewidth=1)
        for point, label, at in _placed(_labels(members), (low, high), (-0.01, top)):
            axes.scatter([point.bill], [point.hidden], **_style(point))
            axes.annotate(
                label,
                (point.bill, point.hidden),
                xytext=at,
                textcoords="axes fraction",
                fontsize=8,
                fontweight="bold" if point.default else "normal",
                va="center",
                arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.6},
            )
        axes.set_xlabel("mean bill against none (lower is cheaper)")
        axes.grid(alpha=0.3)
    panels[0].set_ylabel("needed facts hidden (lower hides less)")
    panels[0].yaxis.set_major_formatter(PercentFormatter(1.0))
    panels[0].set_xlim(low, high)  # room on the right for the labels of the rightmost points
    panels[0].set_ylim(-0.01, top)
    key = "star: scoutd's default; circles: scoutd's other strategies; squares: peers' emulations"
    heading = [textwrap.fill(line, 160) for line in title.splitlines()[:2]] if title else []
    drawn.suptitle("\n".join([*heading, key]), fontsize=10)
    return drawn


def plot_harm(points: Sequence[HarmPoint], path: str, title: str = "") -> None:
    """Write :func:`harm_figure` of ``points`` to ``path`` as a PNG.

    Raises:
        PlotUnavailable: matplotlib is missing (the ``scoutd[plot]`` extra).
    """
    harm_figure(points, title).savefig(path, format="png", dpi=90)
