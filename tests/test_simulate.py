"""The simulator: cache model and costs, peer emulations, replay, workloads, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import msgspec
import pytest

import scoutd
from scoutd.config import load_config
from scoutd.simulate import (
    CLEARED_PLACEHOLDER,
    CacheModel,
    CacheSettings,
    Estimator,
    Prices,
    Settings,
    clear_tool_uses,
    main,
    mask_last_n,
    prepared_rounds,
    round_ends,
    run_strategy,
    segment_text,
    simulate,
    synthetic_run,
)
from scoutd.simulate.cache import common_chars, common_segments
from scoutd.simulate.workload import Workload

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCOUTD_STRATEGIES = (
    "none",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools_cost_aware",
)
# Small epochs and cost-aware bands, so that a 40-call run crosses several epoch
# boundaries and the cost-aware default compacts too.
SMALL_BANDS = {
    "epoch_tool_call_threshold": 8,
    "epoch_full_tool_calls": 3,
    "epoch_compacted_tool_calls": 6,
    "epoch_size": 4,
    "full_tool_outputs": 3,
    "max_tool_calls": 8,
    "max_tool_chars": 2000,
    "cost_full_tool_outputs": 3,
    "cost_compacted_tool_calls": 6,
    "cost_keep_lookback": 6,
    # compactions that pay early, so that a short run keeps outputs whole besides the bands
    "compaction_risk_share": 1.0,
    "cost_verbatim_value": 0.0,
}


def call(ident: str, name: str = "read_file", **arguments: Any) -> dict[str, Any]:
    body = {"name": name, "arguments": arguments, "id": ident}
    return {"role": "function_call", "content": json.dumps(body, separators=(",", ":"))}


def output(ident: str, content: str, name: str = "read_file") -> dict[str, Any]:
    body = {"name": name, "content": content, "id": ident}
    return {
        "role": "function_call_output",
        "content": json.dumps(body, separators=(",", ":"), ensure_ascii=False),
    }


# --- the cache model and the cost -------------------------------------------------


def test_a_prompt_that_only_grows_is_cached_but_for_the_new_part() -> None:
    """8,000 then 12,000 characters: round 2 reads 2,000 tokens, writes 1,000."""
    model = CacheModel(Prices(1.0, 1.25, 0.1), CacheSettings(1, 1024))
    first = model.step(["a" * 8000])
    assert (first.prompt_tokens, first.cached_tokens, first.written_tokens) == (2000, 0, 2000)
    assert first.input_tokens == 0
    assert first.cost == pytest.approx(2000 * 1.25)
    second = model.step(["a" * 8000 + "b" * 4000])
    assert (second.prompt_tokens, second.cached_tokens, second.written_tokens) == (3000, 2000, 1000)
    assert second.cost == pytest.approx(2000 * 0.1 + 1000 * 1.25)
    assert not second.cache_break and second.invalidated_tokens == 0


def test_growth_across_messages_is_cached_too() -> None:
    model = CacheModel()
    model.step(["a" * 4000, "b" * 4000])
    grown = model.step(["a" * 4000, "b" * 4000, "c" * 400])
    assert (grown.prompt_tokens, grown.cached_tokens, grown.written_tokens) == (2100, 2000, 100)


def test_a_change_at_the_start_rewrites_everything() -> None:
    model = CacheModel()
    model.step(["a" * 8000, "b" * 4000])
    changed = model.step(["x" + "a" * 7999, "b" * 4000])
    assert changed.cached_tokens == 0
    assert changed.written_tokens == 3000
    assert changed.cost == pytest.approx(3000 * 1.25)
    assert changed.cache_break and changed.invalidated_tokens == 3000


def test_a_change_in_the_middle_keeps_the_prefix_before_it() -> None:
    """The common prefix ends inside the changed message, at the first differing character."""
    model = CacheModel()
    model.step(["s" * 6000, "a" * 8000])
    changed = model.step(["s" * 6000, "a" * 2000 + "z" * 6000])
    assert changed.cached_tokens == 2000  # (6000 + 2000) / 4
    assert changed.written_tokens == 1500
    assert changed.cache_break and changed.invalidated_tokens == 1500


def test_nothing_is_cached_below_the_minimum_size() -> None:
    model = CacheModel(settings=CacheSettings(1, 1024))
    small = model.step(["a" * 4000])  # 1,000 tokens: too small to be cached
    assert (small.cached_tokens, small.written_tokens, small.input_tokens) == (0, 0, 1000)
    assert small.cost == pytest.approx(1000.0)
    grown = model.step(["a" * 8000])  # the previous prompt never reached the cache
    assert (grown.cached_tokens, grown.written_tokens) == (0, 2000)
    short_common = CacheModel()
    short_common.step(["a" * 4000 + "x" * 8000])
    other = short_common.step(["a" * 4000 + "y" * 8000])  # 1,000 common tokens < 1,024
    assert other.cached_tokens == 0 and other.written_tokens == 3000


def test_the_cached_prefix_is_rounded_down_to_the_granularity() -> None:
    """OpenAI-like: steps of 128 tokens, no write premium, reads at half price."""
    model = CacheModel(Prices(1.0, 1.0, 0.5), CacheSettings(128, 1024))
    model.step(["a" * 8000])
    second = model.step(["a" * 8000 + "b" * 4000])
    assert second.cached_tokens == 1920  # 15 * 128 <= 2000
    assert second.written_tokens == 1080
    assert second.cost == pytest.approx(1920 * 0.5 + 1080 * 1.0)
    assert second.invalidated_tokens == 0  # all the previous prompt could hold was reused


def test_a_tokenizer_replaces_the_character_estimate() -> None:
    words = Estimator(lambda text: len(text.split()))
    model = CacheModel(settings=CacheSettings(1, 2), estimator=words)
    first = model.step(["one two three\n", "four five\n"])
    assert first.prompt_tokens == 5 and first.written_tokens == 5
    second = model.step(["one two three\n", "four six seven\n"])
    # whole first segment (3) + the common part of the second, "four " (1)
    assert second.prompt_tokens == 6 and second.cached_tokens == 4


def test_common_prefix_helpers() -> None:
    assert common_chars("abcdef", "abcxyz") == 3
    assert common_chars("abc", "abc") == 3
    assert common_chars("", "abc") == 0
    assert common_chars("abc", "abcd") == 3
    a = [str(i) for i in range(100)]
    b = [*a[:63], "changed", *a[64:]]
    assert common_segments(a, b) == 63
    assert common_segments(a, a[:10]) == 10
    assert common_segments([], a) == 0


def test_segment_text_is_role_and_content() -> None:
    assert segment_text({"role": "user", "content": "hi"}) == "user\nhi\n"
    assert segment_text({"role": "assistant", "content": None}) == "assistant\n\n"


# --- the peer emulations ----------------------------------------------------------


def tiny_conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        call("c1", path="a.py"),
        output("c1", "line 1\nline 2\nline 3"),
        call("c2", path="b.py"),
        {**output("c2", "x" * 50), "extra": "kept"},
        {"role": "function_call_output", "content": "not json"},
        call("c3", path="c.py"),
        output("c3", "last"),
    ]


def test_mask_last_n_masks_every_output_but_the_last_n() -> None:
    messages = tiny_conversation()
    frozen = json.dumps(messages)
    masked = mask_last_n(messages, 1)
    assert json.dumps(messages) == frozen  # the input is never modified
    assert masked[3] == {
        "role": "function_call_output",
        "content": '{"name":"read_file","content":"Old environment output: (3 lines omitted)",'
        '"id":"c1"}',
    }
    assert masked[5] == {
        "role": "function_call_output",
        "content": '{"name":"read_file","content":"Old environment output: (1 lines omitted)",'
        '"id":"c2"}',
        "extra": "kept",
    }
    # calls, other messages, the malformed output and the last output are the same objects
    for i in (0, 1, 2, 4, 6, 7, 8):
        assert masked[i] is messages[i]
    assert mask_last_n(messages, 2)[3]["content"].count("omitted") == 1
    assert all(m is o for m, o in zip(mask_last_n(messages, 3), messages, strict=True))


def test_mask_last_n_with_zero_masks_every_output() -> None:
    masked = mask_last_n(tiny_conversation(), 0)
    assert sum("omitted" in m["content"] for m in masked) == 3


def test_clear_tool_uses_waits_for_the_trigger() -> None:
    messages = tiny_conversation()
    result = clear_tool_uses(messages, trigger=10_000, keep=1)
    assert result.cleared == frozenset()
    assert all(m is o for m, o in zip(result.messages, messages, strict=True))


def test_clear_tool_uses_clears_all_but_the_last_kept_uses() -> None:
    messages = tiny_conversation()
    result = clear_tool_uses(messages, trigger=10, keep=1)
    assert result.cleared == frozenset({3, 5})
    assert result.messages[3] == output("c1", CLEARED_PLACEHOLDER)
    assert result.messages[5] == {**output("c2", CLEARED_PLACEHOLDER), "extra": "kept"}
    assert result.messages[8] is messages[8]
    assert result.messages[6] is messages[6]  # malformed: passed through


def test_cleared_results_stay_cleared_below_the_trigger() -> None:
    messages = tiny_conversation()
    first = clear_tool_uses(messages[:6], trigger=10, keep=0)
    assert first.cleared == frozenset({3, 5})
    later = clear_tool_uses(messages, trigger=10_000, keep=0, cleared=first.cleared)
    assert later.cleared == first.cleared
    assert CLEARED_PLACEHOLDER in later.messages[3]["content"]
    assert CLEARED_PLACEHOLDER in later.messages[5]["content"]
    assert later.messages[8] is messages[8]


def test_clear_at_least_clears_the_oldest_until_enough_is_freed() -> None:
    messages = [{"role": "user", "content": "go"}]
    for i in range(4):
        messages += [call(f"c{i}"), output(f"c{i}", "y" * 800)]  # about 200 tokens each
    result = clear_tool_uses(messages, trigger=100, keep=1, clear_at_least=300)
    assert result.cleared == frozenset({2, 4})  # two outputs free >= 300 tokens
    assert result.messages[6] is messages[6]
    impossible = clear_tool_uses(messages, trigger=100, keep=1, clear_at_least=10_000)
    assert impossible.cleared == frozenset()  # cannot free that much: not applied
    assert all(m is o for m, o in zip(impossible.messages, messages, strict=True))


def test_the_clear_tool_uses_replay_clears_progressively() -> None:
    """Once the trigger is passed, cleared results never come back in later rounds."""
    workload = synthetic_run(40, seed=3)
    settings = Settings(peers=scoutd.simulate.PeerSettings(clear_trigger=8000, clear_keep=2))
    cleared_before: set[int] = set()
    activations = 0
    for end, prepared in prepared_rounds(workload.messages, "clear_tool_uses", settings):
        cleared = {
            i for i, m in enumerate(prepared) if CLEARED_PLACEHOLDER in str(m.get("content"))
        }
        assert cleared_before <= cleared
        activations += cleared != cleared_before
        cleared_before = cleared
        assert len(prepared) == end
    assert activations >= 2


# --- the replay --------------------------------------------------------------------


@pytest.mark.parametrize("name", SCOUTD_STRATEGIES)
def test_the_replay_equals_prepare_prompt_on_each_prefix(name: str) -> None:
    """The replay keeps one session per strategy (docs/ECONOMY.md): each round's
    prompt is still the one a prepare from scratch of that prefix gives."""
    workload = synthetic_run(40, seed=7, repeat_rate=0.2)
    config = load_config(overrides=SMALL_BANDS)
    settings = Settings(config=config)
    replayed = list(prepared_rounds(workload.messages, name, settings))
    ends = round_ends(workload.messages)
    assert [end for end, _ in replayed] == ends
    direct = [scoutd.prepare_prompt(workload.messages[:end], name, config=config) for end in ends]
    assert [prepared for _, prepared in replayed] == direct
    # and the measured figures are those of the cache model over exactly those prompts
    model = CacheModel()
    steps = [model.step([segment_text(m) for m in prompt]) for prompt in direct]
    result = run_strategy(workload, name, settings)
    assert result.series is not None
    expected = [step.prompt_tokens for step in steps]
    assert result.series.prompt_tokens == expected
    assert result.series.cached_tokens == [step.cached_tokens for step in steps]
    assert result.cache_breaks == sum(step.cache_break for step in steps)
    if name != "none":
        assert expected[-1] < model.estimator.prompt([segment_text(m) for m in workload.messages])


def test_a_registered_strategy_is_compared_like_a_builtin() -> None:
    def keep_last_ten(messages: list[Any]) -> list[Any]:
        return messages[:2] + messages[2:][-10:]

    scoutd.register_strategy("keep_last_ten", keep_last_ten)
    try:
        result = simulate(synthetic_run(25, seed=1), ["keep_last_ten"], keep_series=False)
    finally:
        scoutd.unregister_strategy("keep_last_ten")
    (row,) = result.strategies
    assert row.strategy == "keep_last_ten"
    # Shorter prompts, yet the window slides once ten messages follow the task: the
    # cache breaks in every later round, and that costs more than keeping everything.
    assert row.cache_breaks >= 25 - 10
    assert row.ratio is not None and row.ratio > 1


def test_totals_and_retention_are_consistent() -> None:
    workload = synthetic_run(30, seed=2)
    result = simulate(workload, ["none", "mask_last_n"], Settings())
    none, masked = result.strategies
    assert none.ratio == 1.0 and result.baseline_billed == none.billed
    assert none.retention.verbatim == 30 and none.retention.recent_verbatim == 1.0
    assert (masked.retention.verbatim, masked.retention.truncated) == (10, 20)
    assert masked.retention.dropped == 0
    assert masked.retention.recent_verbatim < 1.0
    for row in result.strategies:
        assert row.rounds == 30
        assert row.prompt_tokens == row.cached_tokens + row.written_tokens + row.input_tokens
        assert row.cache_read_share == pytest.approx(row.cached_tokens / row.prompt_tokens)
        assert row.series is not None
        assert row.billed == pytest.approx(sum(row.series.cost))
        assert row.peak_prompt_tokens == max(row.series.prompt_tokens)
    assert none.cache_breaks == 0  # an append-only prompt never breaks the cache
    assert masked.cache_breaks == 20  # the masking boundary moves every round after the 10th


def test_overflowing_rounds_fail_the_strategy() -> None:
    workload = synthetic_run(30, seed=2)
    result = simulate(workload, ["none"], Settings(context_window=5000))
    (none,) = result.strategies
    assert none.failed and none.overflow_rounds > 0
    assert none.series is not None
    assert none.first_overflow_round == next(
        i for i, tokens in enumerate(none.series.prompt_tokens, 1) if tokens > 5000
    )


# --- workloads ---------------------------------------------------------------------


def test_the_synthetic_run_follows_the_message_format() -> None:
    workload = synthetic_run(60, seed=5, user_turns=3)
    messages = workload.messages
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    assert sum(m["role"] == "user" for m in messages) == 4  # the task and three turns
    calls = [m for m in messages if m["role"] == "function_call"]
    outputs = [m for m in messages if m["role"] == "function_call_output"]
    assert len(calls) == len(outputs) == 60
    for i, message in enumerate(messages):
        if message["role"] == "function_call":
            body = json.loads(message["content"])
            answer = json.loads(messages[i + 1]["content"])
            assert list(body) == ["name", "arguments", "id"]
            assert list(answer) == ["name", "content", "id"]
            assert (answer["name"], answer["id"]) == (body["name"], body["id"])
            assert isinstance(body["arguments"], dict) and isinstance(answer["content"], str)
    assert len(round_ends(messages)) == 60


def test_the_repeat_rate_controls_repeated_calls() -> None:
    def repeats(workload: Workload) -> int:
        seen: set[str] = set()
        count = 0
        for message in workload.messages:
            if message["role"] == "function_call":
                body = json.loads(message["content"])
                key = json.dumps([body["name"], body["arguments"]], sort_keys=True)
                count += key in seen
                seen.add(key)
        return count

    assert repeats(synthetic_run(300, seed=1, repeat_rate=0.0)) == 0
    assert repeats(synthetic_run(50, seed=1, repeat_rate=1.0)) == 49
    assert 5 <= repeats(synthetic_run(300, seed=1, repeat_rate=0.05)) <= 30


def test_the_synthetic_run_is_deterministic_and_heavy_tailed() -> None:
    one, two = synthetic_run(300, seed=11), synthetic_run(300, seed=11)
    assert one.messages == two.messages
    assert synthetic_run(300, seed=12).messages != one.messages
    sizes = sorted(
        len(json.loads(m["content"])["content"])
        for m in one.messages
        if m["role"] == "function_call_output"
    )
    median = sizes[len(sizes) // 2]
    assert 500 <= median <= 3000
    assert sizes[-1] >= 15_000  # the tail


# --- the command line --------------------------------------------------------------


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_output_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "--calls", "30", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"workload", "model", "baseline_billed", "strategies"}
    assert [s["strategy"] for s in data["strategies"]] == [
        "none",
        "shorten_tools_epoch",
        "shorten_tools_epoch_increment",
        "shorten_tools_cost_aware",
        "mask_last_n",
        "clear_tool_uses",
        "summarize",
    ]
    defaults = [s["strategy"] for s in data["strategies"] if s["default"]]
    assert defaults == ["shorten_tools_cost_aware"]
    row = data["strategies"][0]
    assert {
        "strategy",
        "billed",
        "ratio",
        "cache_read_share",
        "cache_breaks",
        "peak_prompt_tokens",
        "overflow_rounds",
        "failed",
        "retention",
    } <= set(row)
    assert "series" not in row
    assert set(row["retention"]) == {
        "recent_verbatim",
        "outputs",
        "verbatim",
        "truncated",
        "dropped",
        "mean_verbatim",
    }
    assert data["model"]["prices"] == {"input": 1.0, "write": 1.25, "read": 0.1, "output": 5.0}


def test_same_seed_same_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--calls", "25", "--seed", "4", "--json", "--per-round")
    first = run_main(capsys, *args)
    second = run_main(capsys, *args)
    assert first == second and first[0] == 0
    other = run_main(capsys, "--calls", "25", "--seed", "5", "--json", "--per-round")
    assert other[1] != first[1]
    assert "series" in json.loads(first[1])["strategies"][0]


def test_the_table_and_the_strict_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "--calls", "20", "--context-window", "4000")
    assert code == 0
    assert "none" in out and "FAILED" in out and "cache read" in out
    code, _, err = run_main(capsys, "--calls", "20", "--context-window", "4000", "--strict")
    assert code == 1 and "--strict" in err
    code, out, _ = run_main(
        capsys, "--calls", "20", "--context-window", "4000", "--json", "--strategies", "none"
    )
    assert json.loads(out)["strategies"][0]["failed"] is True


def test_pricing_preset_and_price_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(
        capsys, "--calls", "5", "--json", "--pricing", "openai", "--price-read", "0.1",
        "--price-output", "8",
    )  # fmt: skip
    assert code == 0
    model = json.loads(out)["model"]
    assert model["prices"] == {"input": 1.0, "write": 1.0, "read": 0.1, "output": 8.0}
    assert model["cache_granularity"] == 128 and model["cache_min_tokens"] == 1024


def test_sweep_runs_once_per_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(
        capsys, "--calls", "60", "--sweep", "epoch_size=5,20", "--json", "--strategies",
        "shorten_tools_epoch",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert data["sweep"] == {"key": "epoch_size", "values": [5, 20]}
    billed = [run["simulation"]["strategies"][0]["billed"] for run in data["runs"]]
    assert billed[0] != billed[1]
    assert [run["simulation"]["model"]["config_overrides"] for run in data["runs"]] == [
        {"epoch_size": 5},
        {"epoch_size": 20},
    ]
    code, out, _ = run_main(
        capsys, "--calls", "30", "--sweep", "mask_n=2,5", "--strategies", "mask_last_n"
    )
    assert code == 0 and "mask_n=2" in out and "mask_n=5" in out


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "--calls", "5", "--strategies", "nope")
    assert code == 2 and "nope" in err and "mask_last_n" in err
    code, _, err = run_main(capsys, "--calls", "5", "--strategies", "inbox")
    assert code == 2 and "not part of the comparison" in err
    code, _, err = run_main(capsys, "--calls", "5", "--set", "epoch_size=-1")
    assert code == 2 and "epoch_size" in err
    code, _, err = run_main(capsys, "--calls", "5", "--sweep", "no_such_key=1,2")
    assert code == 2 and "no_such_key" in err
    code, _, _ = run_main(capsys, "--calls", "-3")
    assert code == 2


def test_a_recorded_chat_replays_like_the_same_messages(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = synthetic_run(20, seed=9)
    path = tmp_path / "agent.chat.json"
    path.write_bytes(msgspec.json.encode(workload.messages))
    code, out, _ = run_main(capsys, "--chat", str(path), "--json")
    assert code == 0
    from_file = json.loads(out)
    code, out, _ = run_main(capsys, "--calls", "20", "--seed", "9", "--json")
    synthetic = json.loads(out)
    assert from_file["strategies"] == synthetic["strategies"]
    assert from_file["workload"]["source"] == "agent.chat.json"
    missing = run_main(capsys, "--chat", str(tmp_path / "missing.json"))
    assert missing[0] == 1 and "cannot read chat" in missing[2]


def test_the_plot_is_a_png(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """matplotlib comes with the test extra: a missing one fails here, never skips."""
    path = tmp_path / "economy.png"
    code, _, _ = run_main(capsys, "--calls", "30", "--plot", str(path))
    assert code == 0
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000


def python_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SCOUTD_CONFIG", None)
    for key in list(env):
        if key.upper() in {k.upper() for k in scoutd.PromptConfig.__struct_fields__}:
            del env[key]
    env.pop("PROMPT_STRATEGY", None)
    return env


def test_the_plot_without_matplotlib_names_the_extra(tmp_path: Any) -> None:
    script = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from scoutd.simulate import main\n"
        f"sys.exit(main(['--calls', '5', '--plot', {str(tmp_path / 'x.png')!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=python_env()
    )
    assert done.returncode == 1
    assert "scoutd[plot]" in done.stderr
    assert not (tmp_path / "x.png").exists()


def test_python_dash_m_runs_the_simulator() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scoutd.simulate", "--calls", "30", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=python_env(),
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["strategies"]) == 7  # the docs' tables: no shorten_tools


def test_a_tokenizer_callable_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``builtins:len`` counts one token per character: the last prompt is the whole chat."""
    code, out, _ = run_main(
        capsys, "--calls", "12", "--json", "--tokenizer", "builtins:len", "--strategies", "none"
    )
    assert code == 0
    data = json.loads(out)
    assert data["model"]["tokens"] == "len"
    assert data["strategies"][0]["peak_prompt_tokens"] == data["workload"]["chars"]
    code, _, err = run_main(capsys, "--calls", "5", "--tokenizer", "no_such_module:count")
    assert code == 2 and "no_such_module" in err


def test_degenerate_workloads_do_not_crash(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    code, out, _ = run_main(capsys, "--chat", str(empty), "--json")
    assert code == 0 and json.loads(out)["strategies"][0]["rounds"] == 0
    code, out, _ = run_main(capsys, "--calls", "0", "--json")
    assert code == 0 and json.loads(out)["strategies"][0]["rounds"] == 1  # system + task
    bad = tmp_path / "bad.json"
    bad.write_text('{"role": "user"}')
    code, _, err = run_main(capsys, "--chat", str(bad))
    assert code == 1 and "list of message objects" in err
