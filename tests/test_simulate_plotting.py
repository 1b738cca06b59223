"""The simulator's plot, as a reader sees it (scoutd/simulate/plotting.py).

The figure is inspected as matplotlib built it: its title names the prices and
the cache model, one legend sits outside the panels, scoutd's default is the
line that stands out, strategies that coincide are drawn once, and a short
chat is not flattened under an axis scaled to the context window.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from scoutd.simulate import simulate, synthetic_run
from scoutd.simulate.cli import _settings
from scoutd.simulate.options import build_parser
from scoutd.simulate.plotting import figure
from scoutd.simulate.replay import DEFAULT_STRATEGIES, DEFAULT_STRATEGY
from scoutd.simulate.report import format_header
from scoutd.simulate.workload import Workload, load_chat

ROOT = Path(__file__).resolve().parent.parent
ECONOMY = (ROOT / "docs" / "ECONOMY.md").read_text(encoding="utf-8")


def drawn(workload: Workload, names: list[str] | None = None) -> tuple[Any, list[str]]:
    args = build_parser().parse_args([])
    settings = _settings(args, {}, workload.parameters.get("format"))
    result = simulate(workload, names or list(DEFAULT_STRATEGIES), settings)
    rows = [(r.strategy, r) for r in result.strategies]
    made = figure(rows, context_window=settings.context_window, title=format_header(result))
    return made, [r.strategy for r in result.strategies]


def lines_of(made: Any) -> list[Any]:
    top = made.axes[0]
    return [line for line in top.get_lines() if not line.get_label().startswith("_")]


def test_the_title_names_the_workload_the_prices_and_the_cache_model() -> None:
    made, _ = drawn(synthetic_run(60))
    title = made.get_suptitle()
    assert "synthetic run: 60 calls" in title
    assert re.search(r"pricing \w+ \(input [\d.]+, write [\d.]+, read [\d.]+", title)
    assert "cache " in title and "context window" in title


def test_one_legend_outside_the_panels_and_the_default_stands_out() -> None:
    made, names = drawn(synthetic_run(120))
    assert len(made.legends) == 1
    assert all(axes.get_legend() is None for axes in made.axes)
    legend = made.legends[0]
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels[0].startswith(f"{DEFAULT_STRATEGY} (default)")
    lines = lines_of(made)
    default = next(line for line in lines if "(default)" in line.get_label())
    others = [line for line in lines if line is not default]
    assert all(default.get_linewidth() > line.get_linewidth() for line in others)
    assert all(default.get_zorder() > line.get_zorder() for line in others)
    # No two strategies share a look: colour and dash tell every line apart.
    looks = [(line.get_color(), line.get_linestyle()) for line in lines]
    assert len(set(looks)) == len(looks)
    assert len(lines) <= len(names)


def test_a_short_chat_is_drawn_to_its_own_scale_with_identical_lines_merged() -> None:
    made, names = drawn(load_chat(str(ROOT / "examples" / "recorded_run.json")))
    top = made.axes[0]
    lines = lines_of(made)
    peak = max(max(line.get_ydata()) for line in lines)
    assert top.get_ylim()[1] < 2 * peak  # not an axis to 200,000 with the curves near zero
    assert "context window, 200,000 tokens, is far above" in top.get_title()
    assert len(lines) < len(names)  # those that coincide are drawn once
    merged = [line.get_label() for line in lines if " = " in line.get_label()]
    assert merged and all(label.count(" = ") >= 1 for label in merged)
    drawn_names = {name for line in lines for name in re.split(r" = | \(", line.get_label())}
    assert set(names) <= drawn_names  # every strategy is still named


def test_the_cost_panel_keeps_cheap_strategies_apart() -> None:
    made, _ = drawn(synthetic_run(60))
    assert made.axes[1].get_yscale() == "log"
    assert "log scale" in made.axes[1].get_title()


def test_the_default_comparison_is_the_one_the_docs_tabulate() -> None:
    """shorten_tools overflows long runs: the default list and the docs' tables leave it out."""
    assert "shorten_tools" not in DEFAULT_STRATEGIES
    documented = re.search(r"^S=([\w,]+)$", ECONOMY, re.M)
    assert documented is not None
    assert tuple(documented.group(1).split(",")) == DEFAULT_STRATEGIES


@pytest.mark.parametrize("name", ["economy-400.png", "economy-2000.png"])
def test_the_docs_plots_exist(name: str) -> None:
    assert (ROOT / "docs" / name).stat().st_size > 10_000
