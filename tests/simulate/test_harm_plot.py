"""The cost/harm plot of ``scoutd simulate --runs FILE --plot`` (scoutd/simulate/harm_plot.py).

What is checked is the data drawn: one point per strategy in each group (all
runs, runs of 100+ outputs), at the group's mean bill and hidden-fact rate as
the replay's aggregate gives them, each labelled; and that the file written is
a small PNG.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoutd.simulate import synthetic_run
from scoutd.simulate.cli import main
from scoutd.simulate.harm_plot import GROUPS, HarmPoint, harm_figure, harm_points

ROOT = Path(__file__).resolve().parent.parent.parent
STRATEGIES = ["none", "shorten_tools_cost_aware", "mask_last_n", "clear_tool_uses"]
PNG = b"\x89PNG\r\n\x1a\n"


def test_the_plot_has_one_point_per_strategy_and_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    with path.open("w") as handle:
        for seed, calls in ((1, 40), (2, 110)):
            messages = synthetic_run(calls, seed=seed).messages
            handle.write(json.dumps({"messages": messages}) + "\n")
    out = tmp_path / "harm.png"
    arguments = ["--runs", str(path), "--strategies", ",".join(STRATEGIES)]
    assert main([*arguments, "--plot", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)

    written = out.read_bytes()
    assert written.startswith(PNG) and len(written) < 150_000

    points = harm_points(data["aggregate"])
    assert sorted((p.group, p.strategy) for p in points) == sorted(
        (group, name) for group in GROUPS for name in STRATEGIES
    )
    rows = {(a["bucket"], a["strategy"]): a for a in data["aggregate"]}
    for point in points:
        row = rows[(point.group, point.strategy)]
        assert (point.bill, point.hidden, point.runs) == (
            row["mean_ratio"],
            row["hidden_rate"],
            row["runs"],
        )
    assert {p.runs for p in points if p.group == "100+"} == {1}
    none = [p for p in points if p.strategy == "none"]
    assert all((p.bill, p.hidden) == (1.0, 0.0) for p in none)
    masked = next(p for p in points if p.strategy == "mask_last_n" and p.group == "all")
    assert masked.hidden > 0.5  # a peer that blanks old outputs hides most of what is needed

    drawn = harm_figure(points)
    assert [axes.get_title() for axes in drawn.axes] == [
        "all runs (2 runs)",
        "runs of 100+ outputs (1 run)",
    ]
    for axes, group in zip(drawn.axes, GROUPS, strict=True):
        placed = {
            (round(float(x), 6), round(float(y), 6))
            for collection in axes.collections
            for x, y in collection.get_offsets()
        }
        members = [p for p in points if p.group == group]
        assert placed == {(round(p.bill, 6), round(p.hidden, 6)) for p in members}
        labels = " = ".join(text.get_text() for text in axes.texts)
        assert all(p.strategy in labels for p in members)
        assert "shorten_tools_cost_aware (default)" in labels


def test_points_at_the_same_place_share_one_label() -> None:
    points = [
        HarmPoint("all", "none", 3, 1.0, 0.0, False),
        HarmPoint("all", "clear_tool_uses", 3, 1.0, 0.0, False),
        HarmPoint("all", "shorten_tools_cost_aware", 3, 0.9, 0.02, True),
    ]
    drawn = harm_figure(points)
    (axes,) = drawn.axes
    assert sorted(text.get_text() for text in axes.texts) == [
        "none = clear_tool_uses",
        "shorten_tools_cost_aware (default)",
    ]
    assert len(axes.collections) == 2


@pytest.mark.parametrize("name", ["harm-openai.png", "harm-anthropic.png"])
def test_the_docs_show_the_plots_and_how_to_make_them(name: str) -> None:
    """Tracked, small, shown in docs/ECONOMY.md with the command that writes them to out/."""
    written = (ROOT / "docs" / name).read_bytes()
    assert written.startswith(PNG) and len(written) < 150_000
    economy = (ROOT / "docs" / "ECONOMY.md").read_text(encoding="utf-8")
    assert f"]({name})" in economy
    assert f"--plot out/{name}" in economy
