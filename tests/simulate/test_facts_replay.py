"""The hidden-fact measure in the replay of real runs: API, command line, origins."""

from __future__ import annotations

import gzip
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from scoutd.simulate import PeerSettings, Settings, main, simulate, synthetic_run
from scoutd.simulate.facts import FactTally
from scoutd.simulate.origins import Origins, format_origins
from scoutd.simulate.provider import provider_facts, replay_in_format
from scoutd.simulate.runs import aggregate, read_runs, replay_runs
from scoutd.simulate.texts import OUTPUT, message_parts

REAL = Path(__file__).parent.parent / "data" / "real"
FILES = {"openai-chat": REAL / "runs.jsonl.gz", "anthropic": REAL / "anthropic.jsonl.gz"}
DEFAULT = "shorten_tools_cost_aware"


def blanked(message: Any, format_name: str) -> Any:
    """``message`` with every tool output's text emptied."""
    if format_name == "openai-chat":
        return {**message, "content": ""} if message.get("role") == "tool" else message
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {
        **message,
        "content": [{**b, "content": ""} if b.get("type") == "tool_result" else b for b in content],
    }


def prefix(messages: list[Any], end: int) -> list[Any]:
    return messages[:end]


@pytest.mark.parametrize("format_name", sorted(FILES))
def test_none_hides_nothing_and_blanking_hides_everything(format_name: str) -> None:
    needed = 0
    for _, messages in read_runs(str(FILES[format_name])):
        facts = provider_facts(messages, format_name)
        whole = replay_in_format(messages, format_name, "none", Settings(), facts=facts)
        assert whole.facts is not None and whole.facts.hidden == 0
        empty = [blanked(m, format_name) for m in messages]
        tally = facts.measure(partial(prefix, empty))
        assert tally.hidden == tally.needed == whole.facts.needed
        assert not any(
            p.text for m in empty for p in message_parts(m, format_name) if p.kind == OUTPUT
        )
        needed += tally.needed
    assert needed >= 10  # the runs do need facts from tool outputs


@pytest.mark.parametrize("format_name", sorted(FILES))
def test_masking_every_output_hides_almost_all(format_name: str) -> None:
    settings = Settings(peers=PeerSettings(mask_n=0))
    rows = replay_runs(str(FILES[format_name]), ["none", "mask_last_n", DEFAULT], settings, "auto")
    summary = {s["strategy"]: s for s in aggregate(rows, ["none", "mask_last_n", DEFAULT])}
    masked = FactTally()
    for row in rows:
        masked.add(row.strategies["mask_last_n"]["facts"])
    assert masked.needed > 0 and masked.hidden >= 0.95 * masked.needed
    # the aggregate's last rows are all runs: pooled over them
    everything = next(s for s in aggregate(rows, ["mask_last_n"]) if s["bucket"] == "all")
    assert everything["hidden_facts"] == masked.hidden
    assert everything["hidden_rate"] == masked.hidden / masked.needed
    assert summary["none"]["hidden_facts"] == 0
    assert summary[DEFAULT]["hidden_facts"] <= summary[DEFAULT]["needed_facts"]


def test_the_scout_replay_counts_facts() -> None:
    result = simulate(synthetic_run(60, seed=3), ["none", "mask_last_n"])
    by_name = {r.strategy: r for r in result.strategies}
    assert by_name["none"].facts is not None and by_name["none"].facts.hidden == 0
    assert by_name["mask_last_n"].facts is not None
    assert by_name["mask_last_n"].facts.needed == by_name["none"].facts.needed


def test_origins_count_every_hidden_fact() -> None:
    path = str(FILES["openai-chat"])
    origins = Origins("mask_last_n")
    rows = replay_runs(path, ["none", "mask_last_n"], Settings(), "auto", origins=origins)
    hidden = sum(row.strategies["mask_last_n"]["facts"].hidden for row in rows)
    needed = sum(row.strategies["mask_last_n"]["facts"].needed for row in rows)
    assert hidden > 0
    for axis in ("tool", "age", "read", "fact"):
        assert sum(origins.hidden[axis].values()) == hidden
        assert sum(origins.needed[axis].values()) == needed
    # masking the last 10 keeps the 10 newest outputs whole: nothing hidden comes from them
    assert origins.hidden["age"]["1-10"] == 0 and origins.needed["age"]["1-10"] > 0
    assert "file read" in format_origins(origins)


def test_command_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(FILES["anthropic"])
    code = main(["--runs", path, "--strategies", "none,mask_last_n", "--origins", "mask_last_n"])
    out = capsys.readouterr().out
    assert code == 0
    assert "hidden facts" in out and "calls hiding" in out
    assert "hidden facts of mask_last_n, by origin" in out
    assert main(["--runs", path, "--strategies", "none,mask_last_n", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {(s["bucket"], s["strategy"]): s for s in data["aggregate"]}
    assert rows[("all", "none")]["hidden_rate"] == 0.0
    assert rows[("all", "mask_last_n")]["hidden_rate"] > 0.0
    assert main(["--calls", "10", "--origins"]) == 2
    assert main(["--runs", path, "--strategies", "none", "--origins", "mask_last_n"]) == 2
    capsys.readouterr()
    one = tmp_path / "run.json"
    with gzip.open(path, "rt") as handle:
        one.write_text(json.dumps(json.loads(handle.readline())["messages"]))
    assert main(["--chat", str(one), "--strategies", "none,mask_last_n"]) == 0
    assert "hidden facts" in capsys.readouterr().out


def test_runs_in_scoutd_roles_are_measured_too(tmp_path: Path) -> None:
    path = tmp_path / "scout.jsonl"
    with path.open("w") as handle:
        for seed in (1, 2):
            handle.write(json.dumps({"messages": synthetic_run(80, seed=seed).messages}) + "\n")
    settings = Settings(peers=PeerSettings(mask_n=0))
    rows = replay_runs(str(path), ["none", "mask_last_n"], settings, "auto")
    assert {row.format for row in rows} == {"scout"}
    base, masked = FactTally(), FactTally()
    for row in rows:
        base.add(row.strategies["none"]["facts"])
        masked.add(row.strategies["mask_last_n"]["facts"])
    assert base.hidden == 0 and base.needed == masked.needed > 0
    assert masked.hidden >= 0.95 * masked.needed
