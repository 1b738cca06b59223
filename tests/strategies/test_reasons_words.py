"""Each sentence the report can give, word for word, from figures built by hand.

The default's reason is read off its plan's last decision (``plan_reason``), an
epoch strategy's off its config (``epoch_reason``), and each tool message's off
its fate and bands (``band_reasons``): every branch of each is written out here
as an operator reads it, with the figures the reason carries beside its text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from scoutd.config import PromptConfig
from scoutd.protocol.report import Reason
from scoutd.strategies.cost_plan import Decision, Plan
from scoutd.strategies.reasons import RowReason, band_reasons, epoch_reason, plan_reason
from scoutd.strategies.report import Fate
from scoutd.strategies.tool_messages import index_tools

CONFIG = PromptConfig(context_window=200_000, compaction_trigger_share=0.5)


def decision(**figures: Any) -> Decision:
    """A round that weighed a compaction and did not take it, as the replay reports it."""
    base: dict[str, Any] = {
        "round": 50,
        "prompt": 120_000,
        "full": 20,
        "trigger": 100_000.0,
        "limit": 170_000.0,
        "forced": False,
        "weighed": True,
        "compacted": False,
        "removed": 40_000,
        "rewrite": 100_000.0,
        "carried": 123_456.0,
        "billed": 5e6,
        "batch": 4.0,
        "read": 0.1,
        "write": 1.25,
        "horizon": 25.0,
        "risk": 0.06,
        "growth": 0.0,  # no projection unless a test asks for one
    }
    return Decision(**{**base, **figures})


def reason(made: Decision, decided: int = 0) -> Reason:
    return plan_reason(Plan(10, 30, decided, decision=made), CONFIG)


def test_within_the_verbatim_band_no_costs_are_given() -> None:
    first = reason(decision(round=1, weighed=False, full=20))
    assert first.code == "within_verbatim"
    assert first.text == (
        "the only output is among the newest 20 kept verbatim: nothing to compact yet"
    )
    assert reason(decision(round=12, weighed=False)).text == (
        "all 12 outputs are among the newest 20 kept verbatim: nothing to compact yet"
    )
    since = reason(decision(round=1_234, weighed=False, full=25), decided=1_230)
    assert since.text == (
        "no output has left the newest 25 kept verbatim since the compaction at output 1,230"
    )
    assert since.decided_at == 1_230 and since.prompt_tokens == 120_000
    assert (since.removed_tokens, since.rewrite_cost, since.paid_cost, since.needed_cost) == (
        None,
        None,
        None,
        None,
    )
    assert since.more_tokens is None


def test_under_the_trigger() -> None:
    said = reason(decision(prompt=90_000))
    assert said.code == "below_trigger"
    assert said.text == (
        "the prompt is 90,000 tokens, under the trigger of 100,000 (50 % of a 200,000"
        " window); it will not pay while the prompt stays about this size"
    )
    assert said.decided_at is None and said.more_tokens is None


def test_not_paying_yet_names_what_it_waits_for() -> None:
    said = reason(decision(carried=123_456.04, rewrite=100_000.06))
    assert said.code == "not_paying"
    assert said.text == (
        "compaction does not pay yet: it would remove 40,000 tokens, saving 4,000 a round at"
        " the cache-read price, and the rewrite costs 100,000 (uncached-token units);"
        " reading what it would remove has cost 123,456 since the start, and it waits for"
        " 400,000 (4 times the rewrite); it will not pay while the prompt stays about this"
        " size"
    )
    assert (said.removed_tokens, said.rewrite_cost, said.paid_cost, said.needed_cost) == (
        40_000,
        100_000.1,
        123_456.0,
        400_000.2,
    )
    stands = reason(decision(), decided=31)
    assert stands.text.startswith("the compaction at output 31 stands; compaction does not")
    assert "has cost 123,456 since that compaction, and it waits" in stands.text
    assert stands.decided_at == 31


@pytest.mark.parametrize(
    ("horizon", "rounds"), [(9.95, "9.9"), (9.96, "10.0"), (10.0, "10"), (1_234.5, "1,234")]
)
def test_not_repaying_over_the_horizon(horizon: float, rounds: str) -> None:
    said = reason(decision(carried=1e9, rewrite=1e6, removed=100, horizon=horizon))
    assert said.code == "horizon"
    assert said.text == (
        "compaction would not repay over the rounds expected to remain: it would remove 100"
        " tokens, saving 10 a round at the cache-read price, and the rewrite costs 1,000,000"
        f" (uncached-token units); about {rounds} more rounds are expected; it will not pay"
        " while the prompt stays about this size"
    )


def test_too_much_risk() -> None:
    said = reason(decision(carried=1e9, rewrite=400_000.0, horizon=1e6, billed=5e6))
    assert said.code == "risk"
    assert said.text == (
        "compaction would risk too much: the rewrite would cost 400,000 (uncached-token"
        " units), more than 6 % of the bill so far (5,000,000); it will not pay while the"
        " prompt stays about this size"
    )


def test_a_round_weighed_with_every_test_passed_reads_as_the_last_test() -> None:
    """Not compacted though each test passes on the figures given: the reason falls back
    on the last test rather than on none."""
    said = reason(decision(carried=1e9, rewrite=1_000.0, horizon=1e6))
    assert said.code == "risk"
    assert said.text.startswith("compaction would risk too much: the rewrite would cost 1,000")


def test_the_projection_is_named_when_there_is_one() -> None:
    only_the_trigger = {"prompt": 90_000, "carried": 1e9, "rewrite": 1_000.0, "horizon": 1e6}
    grows = reason(decision(**only_the_trigger, growth=1_000.0))
    assert grows.text.endswith("; it will pay at about 10,000 more tokens of prompt")
    assert grows.more_tokens == 10_000
    forced = reason(decision(**only_the_trigger, growth=1_000.0, limit=95_500.0))
    assert forced.text.endswith(
        "; before it pays, the prompt will pass the limit of 95,500 and be compacted to fit,"
        " at about 6,000 more tokens of prompt"
    )
    assert forced.more_tokens == 6_000


def test_a_compaction_says_what_it_removed() -> None:
    paid = reason(decision(compacted=True), decided=50)
    assert paid.code == "compacted"
    assert paid.text == (
        "compacted at this output: it removed 40,000 tokens, whose reading had cost 123,456,"
        " at least 4 times the rewrite's 100,000 (uncached-token units)"
    )
    assert paid.removed_tokens == 40_000 and paid.needed_cost == 400_000.0
    at_limit = reason(decision(compacted=True, forced=True, prompt=170_000), decided=50)
    assert at_limit.code == "over_limit"
    assert at_limit.text == (
        "compacted at this output to fit: the prompt of 170,000 tokens and its compaction"
        " notice were over the limit of 170,000 (75 % of a 200,000 window); it removed"
        " 40,000 tokens"
    )
    over = reason(decision(compacted=True, forced=True, prompt=170_001), decided=50)
    assert "the prompt of 170,001 tokens was over the limit" in over.text


@pytest.mark.parametrize(
    ("config", "code"),
    [
        (PromptConfig(), "epoch_threshold"),
        (PromptConfig(epoch_full_tool_calls=0, epoch_compacted_tool_calls=0), "epoch_off"),
        (PromptConfig(epoch_full_tool_calls=0, epoch_compacted_tool_calls=1), "epoch_threshold"),
        (PromptConfig(epoch_full_tool_calls=1, epoch_compacted_tool_calls=0), "epoch_threshold"),
        (PromptConfig(epoch_size=0), "epoch_off"),
        (PromptConfig(epoch_size=1), "epoch_threshold"),
    ],
)
def test_an_epoch_strategy_says_whether_it_is_off(config: PromptConfig, code: str) -> None:
    said = epoch_reason(config)
    assert said.code == code
    if code == "epoch_off":
        assert said.text == (
            "compaction is off: epoch_size is 0, or epoch_full_tool_calls and"
            " epoch_compacted_tool_calls both are"
        )
    else:
        assert said.text == (
            f"under the epoch threshold of {config.epoch_tool_call_threshold:,} tool outputs:"
            " nothing is compacted before it"
        )


def _pair(ident: str, name: str, arguments: dict[str, Any], output: bool = True) -> list[Any]:
    call = {"name": name, "arguments": arguments, "id": ident}
    made = [{"role": "function_call", "content": json.dumps(call)}]
    if output:
        body = {"name": name, "content": f"output of {ident}", "id": ident}
        made.append({"role": "function_call_output", "content": json.dumps(body)})
    return made


def test_a_kept_output_says_when_a_newer_one_came_since() -> None:
    """Pairs 1 (read a.py), 2 (a search) and 3 (read b.py) were kept; then a.py was
    read again (pair 4) and the search run again (pair 5); b.py's second read has
    no output yet, so it supersedes nothing."""
    search = {"command": "grep -rn needle src"}
    messages = [
        {"role": "user", "content": "Go."},
        *_pair("c1", "read", {"path": "a.py"}),
        *_pair("c2", "bash", search),
        *_pair("c3", "read", {"path": "b.py"}),
        *_pair("c4", "read", {"path": "a.py"}),
        *_pair("c5", "bash", search),
        *_pair("c6", "read", {"path": "b.py"}, output=False),
    ]
    index = index_tools(messages)
    kept = {1: "newest whole read of its file", 2: "newest run of its search"}
    kept[3] = kept[1]
    why = band_reasons(index, 2, 3, RowReason.NEWEST, 2, kept)
    said = {index.numbers[slot]: why(slot, Fate.PROTECTED)[1] for slot in (0, 2, 4)}
    assert said == {
        1: "kept whole: the newest whole read of its file at the last compaction;"
        " a newer read came since",
        2: "kept whole: the newest run of its search at the last compaction;"
        " a newer run came since",
        3: "kept whole: the newest whole read of its file",
    }
    pending = len(index.numbers) - 1
    assert index.positions[pending] == 0
    assert why(pending, Fate.KEPT) == ("pending", "kept: a call whose output has not come yet")
    newest = pending - 1  # pair 5's output: the newest
    assert why(newest, Fate.KEPT) == ("newest", "verbatim: one of the newest 2 outputs")
