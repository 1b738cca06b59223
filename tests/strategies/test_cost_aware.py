"""shorten_tools_cost_aware: compaction only when it pays (docs/ECONOMY.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.config import PromptConfig, load_config, resolve_config
from scoutd.errors import ConfigError
from scoutd.pricing import PRICE_PRESETS, prices_for_format
from scoutd.strategies.cost_aware import effective_prices, shorten_tools_cost_aware

NAME = "shorten_tools_cost_aware"


def run(calls: int, size: int = 1500, *, remark_every: int = 0) -> list[dict[str, Any]]:
    """A conversation of ``calls`` tool pairs whose outputs hold ``size`` characters each."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the build."},
    ]
    for number in range(calls):
        if remark_every and number % remark_every == 0:
            messages.append({"role": "assistant", "content": f"Looking at step {number}."})
        ident = f"c{number}"
        call = {"name": "read", "arguments": {"path": f"f{number}.py"}, "id": ident}
        body = f"{number}:" + "x" * size
        output = {"name": "read", "content": body, "id": ident}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(output)})
    return messages


def rounds(messages: list[dict[str, Any]]) -> list[int]:
    return [i + 1 for i, m in enumerate(messages) if m["role"] == "function_call_output"]


def verbatim_outputs(original: list[Any], prepared: list[Any]) -> int:
    kept = {m["content"] for m in prepared if m.get("role") == "function_call_output"}
    return sum(1 for m in original if m["role"] == "function_call_output" and m["content"] in kept)


def test_a_small_prompt_is_never_compacted() -> None:
    messages = run(60, size=200)  # about 6,000 tokens: under 5% of 200,000
    prepared = scoutd.prepare(messages, [NAME])
    assert prepared.messages == messages
    assert not prepared.report[0].notice


def test_a_prompt_above_the_limit_is_always_brought_inside_it() -> None:
    config = {"context_window": 20_000, "compaction_limit_share": 0.75}
    messages = run(200, size=2000)  # about 100,000 tokens without compaction
    prepared = scoutd.prepare(messages, [NAME], config=config)
    chars = sum(len(m["content"]) for m in prepared.messages)
    assert chars / 4 <= 0.75 * 20_000
    assert prepared.report[0].outputs_dropped > 0 and prepared.report[0].notice


def test_the_newest_outputs_stay_verbatim_in_every_round() -> None:
    messages = run(300, size=3000, remark_every=7)
    config = load_config(None, overrides={"context_window": 100_000})
    for end in rounds(messages)[::7]:
        prefix = messages[:end]
        prepared = scoutd.prepare_prompt(prefix, NAME, config=config)
        recent = [m for m in prefix if m["role"] == "function_call_output"][-20:]
        assert all(m in prepared for m in recent)


def test_between_two_decisions_the_prompt_only_grows_at_its_end() -> None:
    """Every round's prompt is the previous one plus what is new, except at a decision."""
    messages = run(400, size=2500, remark_every=5)
    config = load_config(None, overrides={"context_window": 100_000})
    previous: list[Any] = []
    decisions = 0
    for end in rounds(messages):
        prepared = scoutd.prepare_prompt(messages[:end], NAME, config=config)
        if prepared[: len(previous)] != previous:
            decisions += 1
        previous = prepared
    # A few decisions over 400 rounds, each removing a large part at once.
    assert 2 <= decisions <= 25


def test_pairs_share_one_fate_and_the_notice_promises_nothing_about_repeats() -> None:
    messages = run(250, size=3000)
    prepared = scoutd.prepare_prompt(messages, NAME, config={"context_window": 50_000})
    ids = [json.loads(m["content"])["id"] for m in prepared if m["role"].startswith("function")]
    assert all(ids.count(i) == 2 for i in set(ids))  # every call with its output
    notices = [m["content"] for m in prepared if m["content"].startswith("[Context compaction]")]
    assert len(notices) == 1
    assert "repeated" not in notices[0]  # old repeated calls are dropped like any other
    custom = scoutd.prepare_prompt(
        messages, NAME, config={"context_window": 50_000, "compaction_notice": "cut {removed}"}
    )
    assert any(m["content"].startswith("cut ") for m in custom)  # a configured notice is used


def test_remarks_among_dropped_pairs_go_with_them_and_user_turns_stay() -> None:
    messages = run(250, size=3000, remark_every=3)
    messages.insert(200, {"role": "user", "content": "Also check the docs."})
    messages.insert(201, {"role": "assistant", "content": "Noted."})
    prepared, report = shorten_tools_cost_aware(
        messages, load_config(None, overrides={"context_window": 50_000}).prompt
    )
    kept_ids = {
        json.loads(m["content"])["id"] for m in prepared if m["role"] == "function_call_output"
    }
    oldest_kept = min(int(i[1:]) for i in kept_ids)
    remarks = [m["content"] for m in prepared if m["role"] == "assistant"]
    steps = [int(text.split()[-1].rstrip(".")) for text in remarks if text.startswith("Looking")]
    assert report.outputs_dropped > 0 and oldest_kept > 100
    # The remark before the first call is part of the head; every other one
    # about a dropped pair is gone, every one about a kept pair stays.
    assert steps == [0, *(n for n in range(oldest_kept, 250) if n % 3 == 0)]
    assert report.narration_dropped == 84 - len(steps) + ("Noted." not in remarks)
    assert {"role": "user", "content": "Also check the docs."} in prepared  # users stay
    assert prepared[:2] == messages[:2]  # the head is never touched


def test_a_long_run_keeps_a_share_of_its_outputs_verbatim() -> None:
    messages = run(300, size=1500)
    outputs = [m for m in messages if m["role"] == "function_call_output"]
    found = {}
    for share in (0.0, 0.2):
        overrides = {
            "context_window": 100_000,
            "cost_full_share": share,
            "cost_full_share_cap": 100,
            "cost_keep_share": 0.0,  # the bands alone: every output here is a whole read
        }
        prepared, report = shorten_tools_cost_aware(
            messages, load_config(None, overrides=overrides).prompt
        )
        assert report.outputs_dropped > 0
        found[share] = verbatim_outputs(messages, prepared)
        if share:
            assert all(m in prepared for m in outputs[-60:])  # 20% of 300
    assert found[0.0] < 60 <= found[0.2]


def test_the_share_kept_verbatim_stops_at_its_cap() -> None:
    """20% of 300 outputs would be 60: the cap of 30 bounds it, the floor of 20 does not."""
    messages = run(300, size=1500)
    outputs = [m for m in messages if m["role"] == "function_call_output"]
    found = {}
    for cap in (0, 30):
        overrides = {
            "context_window": 100_000,
            "cost_full_share": 0.2,
            "cost_full_share_cap": cap,
            "cost_compacted_tool_calls": 10,
            "cost_keep_share": 0.0,  # the bands alone: every output here is a whole read
        }
        prepared, _ = shorten_tools_cost_aware(
            messages, load_config(None, overrides=overrides).prompt
        )
        found[cap] = verbatim_outputs(messages, prepared)
        assert all(m in prepared for m in outputs[-max(cap, 20) :])
    assert 20 <= found[0] < found[30] < 60


COUNTED: list[str] = []


def count_words(text: str) -> int:
    """A tokenizer for the test: one token per word, remembering what it counted."""
    COUNTED.append(text)
    return len(text.split())


def test_a_tokenizer_counts_tokens() -> None:
    """A tokenizer is the operator's (a file or the environment), or code's own config."""
    COUNTED.clear()
    config = PromptConfig(tokenizer=f"{__name__}:count_words")
    messages = run(30)
    shorten_tools_cost_aware(messages, config)
    assert messages[-1]["content"] in COUNTED  # the configured callable did the counting


def test_an_unloadable_tokenizer_is_a_config_error() -> None:
    config = resolve_config(environ={"TOKENIZER": "no_such_module_here:count"})
    with pytest.raises(ConfigError, match="tokenizer"):
        shorten_tools_cost_aware(run(5), config.prompt)


def test_pricing_follows_the_format_and_the_config() -> None:
    assert prices_for_format("anthropic") == PRICE_PRESETS["anthropic"]
    assert prices_for_format("openai-chat") == PRICE_PRESETS["openai"]
    assert prices_for_format("openai-responses") == PRICE_PRESETS["openai"]
    assert prices_for_format(None) == PRICE_PRESETS["anthropic"]  # unknown: the dearer rewrite
    auto = PromptConfig()
    assert effective_prices(auto, "openai").write == 1.0
    assert effective_prices(auto, "anthropic").write == 1.25
    fixed = PromptConfig(cache_pricing="openai-4o", cache_read_price=0.25)
    assert effective_prices(fixed, "anthropic").read == 0.25
    assert effective_prices(fixed, "anthropic").write == 1.0


@pytest.mark.parametrize(
    "key, value",
    [
        ("compaction_trigger_share", 1.5),
        ("compaction_limit_share", -0.1),
        ("cache_pricing", "cheap"),
        ("cost_full_share", 1.5),
        ("cost_full_share_cap", -1),
        ("chars_per_token", 0),
        ("context_window", 0),
    ],
)
def test_invalid_keys_are_rejected(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key):
        load_config(None, overrides={key: value})


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=30_000), min_size=1, max_size=120),
    window=st.integers(min_value=5_000, max_value=60_000),
)
def test_any_run_stays_inside_the_limit_when_tool_traffic_allows(
    sizes: list[int], window: int
) -> None:
    """Whatever the output sizes, the prompt fits once tool traffic is compacted enough."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for number, size in enumerate(sizes):
        call = {"name": "t", "arguments": {}, "id": f"c{number}"}
        output = {"name": "t", "content": "y" * size, "id": f"c{number}"}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(output)})
    config = {"context_window": window}
    prepared = scoutd.prepare_prompt(messages, NAME, config=config)
    tokens = sum(len(m["content"]) / 4 + 4 for m in prepared)
    # The estimate leaves out only the compaction notice (a few hundred characters).
    assert tokens <= 0.75 * window + 150
