"""The core's shared reads and shortcuts against the general paths (docs/PERFORMANCE.md).

``prepare`` reads a plain list's roles and contents once and shares them with
format detection and the first strategy; the token counts sum alternating
pairs pair by pair and estimate power-of-two steps in integers; the report
reads a dropped prefix of tools by slices. Each must give exactly what the
general path gives, which these tests check by turning the shortcut off.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoutd.config import PromptConfig
from scoutd.engine.message_rules import check_plain, message_problem
from scoutd.engine.prepare import prepare
from scoutd.errors import InvalidMessages
from scoutd.simulate.workload import synthetic_run
from scoutd.strategies.columns import columns_of, known_columns
from scoutd.strategies.cost_aware import _remarks, _Tokens
from scoutd.strategies.report import Changes, apply_changes
from scoutd.strategies.tokens import message_tokens, token_counter
from scoutd.strategies.tool_messages import index_tools

from .conversations import agent_conversations, conversations

PREPARE_MODULE = importlib.import_module(
    "scoutd.engine.prepare"
)  # the package exports the function

STRATEGIES = [
    "shorten_tools_cost_aware",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "none",
    "shorten_tools_cost_aware,inbox",
    "inbox,shorten_tools",
]
CONFIGS = [
    PromptConfig(),
    PromptConfig(context_window=3_000, cost_full_tool_outputs=2, cost_compacted_tool_calls=3),
    PromptConfig(context_window=8_000, chars_per_token=3.3, cost_full_share=0.3),
    PromptConfig(
        max_tool_calls=5,
        full_tool_outputs=2,
        max_tool_chars=500,
        epoch_tool_call_threshold=6,
        epoch_size=3,
        epoch_full_tool_calls=2,
        epoch_compacted_tool_calls=4,
    ),
]


def _prepared(messages: list[Any], strategy: str, config: PromptConfig, fmt: str) -> Any:
    try:
        result = prepare(messages, strategy, config=config, detail=True, format=fmt)
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return result.messages, result.report  # lone surrogates: compared as objects, not JSON


def _same_without_columns(
    monkeypatch: pytest.MonkeyPatch, messages: list[Any], fmt: str = "auto"
) -> None:
    for strategy in STRATEGIES:
        for config in CONFIGS:
            shared = _prepared(messages, strategy, config, fmt)
            with monkeypatch.context() as patch:
                patch.setattr(PREPARE_MODULE, "columns_of", lambda *args, **kwargs: None)
                alone = _prepared(messages, strategy, config, fmt)
            assert shared == alone, (strategy, config)


@pytest.mark.parametrize(("calls", "repeat_rate"), [(0, 0.05), (5, 0.05), (150, 0.05), (200, 0.6)])
@pytest.mark.parametrize("fmt", ["auto", "scout"])
def test_prepare_gives_the_same_without_shared_columns(
    monkeypatch: pytest.MonkeyPatch, calls: int, repeat_rate: float, fmt: str
) -> None:
    messages = synthetic_run(calls, seed=calls + 1, repeat_rate=repeat_rate).messages
    _same_without_columns(monkeypatch, messages, fmt)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.one_of(conversations(), agent_conversations()))
def test_generated_conversations_give_the_same_without_shared_columns(
    messages: list[Any],
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _same_without_columns(monkeypatch, messages)


def test_columns_only_for_plain_scout_lists() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    columns = columns_of(plain)
    assert columns is not None
    assert (columns.roles, columns.lengths) == (["user", "assistant"], [2, 2])
    assert columns_of([{"role": "user"}]) is None  # no content
    assert columns_of([{"role": 1, "content": "x"}]) is None  # a role that is not a string
    assert columns_of(tuple(plain)) is None  # not a list
    blocks = columns_of([{"role": "user", "content": [{"type": "text", "text": "x"}]}])
    assert blocks is not None and blocks.lengths is None
    # shared only with the list it was read from, and only when handed over
    assert known_columns(plain, columns) is columns
    assert known_columns(list(plain), columns) is None
    assert known_columns(plain[:1], columns) is None
    assert known_columns(plain, None) is None


@pytest.mark.parametrize("step", [1.0, 2.0, 4.0, 8.0, 4, 3.3, 0.5, 16.0])
def test_token_estimate_from_shared_lengths(step: float) -> None:
    messages = [{"role": "user", "content": "x" * n} for n in (0, 1, 3, 4, 5, 7, 8, 9, 1001, 65537)]
    count = token_counter(PromptConfig(chars_per_token=step))
    general = message_tokens(messages, count)
    columns = columns_of(messages)
    assert message_tokens(messages, count, columns) == general


@pytest.mark.parametrize("config", CONFIGS)
def test_alternating_pairs_summed_pair_by_pair(config: PromptConfig) -> None:
    messages = synthetic_run(120, seed=4).messages
    index = index_tools(messages)
    assert index.alternating
    count = token_counter(config)
    fast = _Tokens(messages, index, count, _remarks(index))
    general = _Tokens(messages, dataclasses.replace(index, alternating=False), count)
    assert (fast.whole, fast.shortened, fast.output_end, fast.cumulative) == (
        general.whole,
        general.shortened,
        general.output_end,
        general.cumulative,
    )


def test_parallel_calls_leave_the_alternating_path() -> None:
    messages = synthetic_run(20, seed=2).messages
    calls = [i for i, m in enumerate(messages) if m["role"] == "function_call"]
    first, second = calls[0], calls[1]
    messages[first + 1], messages[second] = messages[second], messages[first + 1]
    assert not index_tools(messages).alternating


def test_a_dropped_prefix_reports_as_any_dropped_list() -> None:
    messages = synthetic_run(40, seed=6).messages
    index = index_tools(messages)
    prefix = Changes(dropped=list(range(30)), rewrites={}, narration=[])
    shuffled = Changes(dropped=list(reversed(range(30))), rewrites={}, narration=[])
    notice = "{compacted} {removed}"
    got = apply_changes("x", messages, index, prefix, notice=notice, detail=True)
    want = apply_changes("x", messages, index, shuffled, notice=notice, detail=True)
    assert got[0] == want[0]
    assert msgspec.json.encode(got[1]) == msgspec.json.encode(want[1])


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "user", "content": "x"}],
        ({"role": "user", "content": "x"},),
        [{"role": "user", 1: "x"}],
        [["not", "a", "dict"]],
        "text",
    ],
)
def test_check_plain_keeps_the_rule(messages: Any) -> None:
    problem = message_problem(messages)
    if problem is not None:
        with pytest.raises(InvalidMessages):
            check_plain(messages)
        return
    assert check_plain(messages) == (
        type(messages) is list and all(type(m) is dict for m in messages)
    )
