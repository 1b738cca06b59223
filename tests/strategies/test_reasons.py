"""Why a strategy compacted, or did not: the report's reason and each tool message's.

The default's figures are checked against an independent computation of
docs/ECONOMY.md's rule on a hand-built conversation of equal pairs, where
every count is a closed form: its tokens, what a compaction would remove, the
read cost carried since the last decision and the rewrite's extra cost.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest

import scoutd
from scoutd.config import PromptConfig
from scoutd.pricing import PRICE_PRESETS
from scoutd.strategies.cost_aware import (
    _Tokens,
    effective_prices,
    shorten_tools_cost_aware,
    token_counter,
)
from scoutd.strategies.cost_plan import GROWTH_ROUNDS, plan_compaction
from scoutd.strategies.epoch import shorten_tools_epoch
from scoutd.strategies.projection import projected_unmet, rounds_to_pay
from scoutd.strategies.reasons import ROW_TEXTS, RowReason
from scoutd.strategies.tool_messages import index_tools

from ..support.daemon import Daemon

SIZE = 1500  # characters of each output's text
# The band rule alone, which the independent computation below models: the
# retention (cost_keep_share) makes a compaction that keeps outputs pay with them
# (tests/strategies/test_retention.py; the daemon test below runs the default), with
# the shortened band of 10 pairs the figures below were worked out for.
CONFIG = PromptConfig(cost_keep_share=0, cost_compacted_tool_calls=10)
PRICES = PRICE_PRESETS["anthropic"]  # scout format: Anthropic's prices (docs/ECONOMY.md)


def run(calls: int, *, pending: bool = False) -> list[dict[str, Any]]:
    """A system prompt, a task, then ``calls`` equal pairs (and a call left waiting)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the build."},
    ]
    for number in range(calls + pending):
        ident = f"c{number:03d}"
        call = {"name": "read", "arguments": {"path": f"f{number:03d}.py"}, "id": ident}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        if number < calls:
            body = {"name": "read", "content": "x" * SIZE, "id": ident}
            messages.append({"role": "function_call_output", "content": json.dumps(body)})
    return messages


def tokens(message: dict[str, Any]) -> int:
    """docs/ECONOMY.md, "Tokens": characters / 4, rounded up, plus 4 a message."""
    return math.ceil(len(message["content"]) / 4) + 4


SHORT = math.ceil(520 / 4) + 4  # a shortened call or output: 400 (or 2 x 200) + 120 characters


class Equal:
    """The rule's figures for :func:`run`, computed pair by pair from the text."""

    def __init__(self, calls: int) -> None:
        messages = run(calls)
        self.head = tokens(messages[0]) + tokens(messages[1])
        self.pair = [
            tokens(messages[2 + 2 * k]) + tokens(messages[3 + 2 * k]) for k in range(calls)
        ]
        self.short = [
            min(tokens(messages[2 + 2 * k]), SHORT) + min(tokens(messages[3 + 2 * k]), SHORT)
            for k in range(calls)
        ]

    def prompt(self, rounds: int) -> int:
        return self.head + sum(self.pair[:rounds])

    def removed(self, rounds: int) -> int:
        """What compacting at ``rounds`` (never compacted before) removes: the pairs older
        than the newest 20, the 10 nearest them shortened, the rest dropped."""
        shortened = max(0, rounds - CONFIG.cost_full_tool_outputs)
        dropped = max(0, shortened - CONFIG.cost_compacted_tool_calls)
        return sum(self.pair[:dropped]) + sum(
            whole - short
            for whole, short in zip(
                self.pair[dropped:shortened], self.short[dropped:shortened], strict=True
            )
        )

    def rewrite(self, rounds: int) -> float:
        return (self.prompt(rounds) - self.removed(rounds) - self.head) * (
            PRICES.write - PRICES.read
        )

    def carried(self, rounds: int) -> float:
        """Read cost paid for what a compaction would remove, every round since the first."""
        return sum(self.removed(j) * PRICES.read for j in range(1, rounds + 1))


def reason_at(calls: int, **config: Any) -> Any:
    _, report = shorten_tools_cost_aware(
        run(calls),
        PromptConfig(**{"cost_keep_share": 0, "cost_compacted_tool_calls": 10, **config}),
    )
    assert report.reason is not None
    return report.reason


def test_below_the_trigger_the_reason_gives_the_prompt_and_the_trigger() -> None:
    equal = Equal(21)
    reason = reason_at(21)
    assert equal.prompt(21) < 10_000  # one output past the verbatim band, under 5 % of 200,000
    assert reason.code == "below_trigger"
    assert (reason.prompt_tokens, reason.trigger_tokens) == (equal.prompt(21), 10_000)
    assert reason.text.startswith(
        f"the prompt is {equal.prompt(21):,} tokens, under the trigger of 10,000"
        " (5 % of a 200,000 window); it will pay at about "
    )


def test_above_the_trigger_the_reason_says_it_does_not_pay_yet_with_the_figures() -> None:
    equal = Equal(40)
    reason = reason_at(40)
    assert equal.prompt(40) >= 10_000
    assert reason.code == "not_paying"
    assert reason.removed_tokens == equal.removed(40)
    assert reason.rewrite_cost == round(equal.rewrite(40), 1)
    assert reason.paid_cost == round(equal.carried(40), 1)
    batch = 1 / (1 - CONFIG.cost_verbatim_value)
    assert reason.needed_cost == round(batch * equal.rewrite(40), 1)
    assert reason.paid_cost < reason.needed_cost
    assert reason.text == (
        f"compaction does not pay yet: it would remove {equal.removed(40):,} tokens, saving"
        f" {round(equal.removed(40) * PRICES.read):,} a round at the cache-read price, and the"
        f" rewrite costs {round(equal.rewrite(40)):,} (uncached-token units); reading what it"
        f" would remove has cost {round(equal.carried(40)):,} since the start, and it waits"
        f" for {round(batch * equal.rewrite(40)):,} ({batch:g} times the rewrite); it will pay"
        f" at about {reason.more_tokens:,} more tokens of prompt"
    )


@pytest.mark.parametrize("calls", [25, 40, 60])
def test_it_pays_about_where_the_reason_says(calls: int) -> None:
    """The projected growth is within a quarter of where the compaction really comes."""
    said = reason_at(calls).more_tokens
    equal = Equal(400)
    for later in range(calls + 1, 400):
        if reason_at(later).code == "compacted":
            break
    else:
        pytest.fail("no compaction in 400 rounds")
    grown = equal.prompt(later) - equal.prompt(calls)
    assert 0.75 * grown <= said <= 1.25 * grown, (said, grown, later)


def test_the_projection_grows_as_the_recent_rounds_did() -> None:
    """A run whose outputs triple in size halfway: the growth the projection takes is
    that of the last GROWTH_ROUNDS rounds (of all rounds while fewer), by the text."""
    messages = run(80)
    for at in range(2 + 2 * 40 + 1, len(messages), 2):  # outputs 41 to 80, three times longer
        body = json.loads(messages[at]["content"])
        body["content"] *= 3
        messages[at] = {**messages[at], "content": json.dumps(body)}
    prompt = [tokens(messages[0]) + tokens(messages[1])]  # the whole prompt at each round
    for k in range(80):
        prompt.append(prompt[-1] + tokens(messages[2 + 2 * k]) + tokens(messages[3 + 2 * k]))
    for n in (10, 30, 45, 80):
        index = index_tools(messages[: 2 + 2 * n])
        counted = _Tokens(messages[: 2 + 2 * n], index, token_counter(CONFIG))
        plan = plan_compaction(counted, n, CONFIG, PRICES)
        assert plan.decision is not None
        since = max(0, n - GROWTH_ROUNDS)
        expected = (prompt[n] - prompt[since]) / (n - since)
        assert plan.decision.growth == pytest.approx(expected), n
    # by the end the recent rounds grow three times as fast as the first ones did
    assert expected > 2.5 * (prompt[30] - prompt[0]) / 30


@pytest.mark.parametrize(
    "config",
    [{}, {"expected_horizon": 0.01}, {"compaction_risk_share": 0.005}, {"context_window": 1e6}],
)
def test_the_projection_is_the_first_round_its_tests_all_pass(config: dict[str, Any]) -> None:
    """rounds_to_pay, solved in closed form, against the rule's tests projected round by round."""
    messages = run(300)
    prompt = PromptConfig(**config)
    checked = 0
    for n in range(1, 301, 7):
        index = index_tools(messages[: 2 + 2 * n])
        tokens = _Tokens(messages[: 2 + 2 * n], index, token_counter(prompt))
        plan = plan_compaction(tokens, index.outputs, prompt, effective_prices(prompt))
        decision = plan.decision
        assert decision is not None
        rounds = rounds_to_pay(decision)
        if rounds is None:
            continue
        checked += 1
        assert projected_unmet(decision, rounds) is None, (n, rounds)
        assert rounds == 0 or projected_unmet(decision, rounds - 1) is not None, (n, rounds)
    assert checked >= 10


def test_when_it_pays_it_compacts_and_says_so() -> None:
    equal = Equal(120)
    first = next(n for n in range(21, 120) if reason_at(n).code == "compacted")
    before, at = reason_at(first - 1), reason_at(first)
    assert before.code in ("not_paying", "risk")
    batch = 1 / (1 - CONFIG.cost_verbatim_value)
    # the rent-or-buy test of the independent rule holds there
    assert equal.carried(first) >= batch * equal.rewrite(first)
    assert (at.removed_tokens, at.paid_cost) == (
        equal.removed(first),
        round(equal.carried(first), 1),
    )
    assert at.decided_at == first
    assert at.text.startswith(f"compacted at this output: it removed {equal.removed(first):,}")
    _, report = shorten_tools_cost_aware(run(first), CONFIG)
    assert report.outputs_dropped + report.outputs_truncated > 0
    after = reason_at(first + 1)
    assert after.decided_at == first
    assert after.text.startswith(f"the compaction at output {first} stands; ")


def test_the_other_tests_of_the_rule_are_named() -> None:
    assert reason_at(0).code == "no_outputs"
    few = reason_at(5)
    assert few.code == "within_verbatim"
    assert few.text == "all 5 outputs are among the newest 20 kept verbatim: nothing to compact yet"
    assert reason_at(1).text.startswith("the only output is among the newest 20")
    # past the rent-or-buy test, a share of the bill of 0: no compaction is ever safe enough
    risky = reason_at(84, compaction_risk_share=0.0)
    assert risky.code == "risk" and risky.paid_cost >= risky.needed_cost
    assert "more than 0 % of the bill so far" in risky.text
    horizon = reason_at(84, expected_horizon=0.001)
    assert horizon.code == "horizon"
    assert ",;" not in horizon.text and "; about 0.1 more rounds are expected" in horizon.text
    forced = [reason_at(n, compaction_risk_share=0.0, context_window=40_000) for n in range(60, 80)]
    over = next(r for r in forced if r.code == "over_limit")
    assert over.prompt_tokens > over.limit_tokens == 30_000
    assert "over the limit of 30,000 (75 % of a 40,000 window)" in over.text


def test_the_reason_names_a_compaction_exactly_when_the_bands_moved() -> None:
    """code compacted or over_limit <=> decided at this very round, over a long run."""
    messages = run(260)
    for n in range(1, 261):
        _, report = shorten_tools_cost_aware(messages[: 2 + 2 * n], CONFIG)
        reason = report.reason
        assert reason is not None
        moved = reason.code in ("compacted", "over_limit")
        assert moved == (reason.decided_at == n), (n, reason)


def _rows(messages: list[Any], strategy: str, **config: Any) -> list[Any]:
    prepared = scoutd.prepare(messages, strategy, config=config, detail=True)
    actions = prepared.report[0].actions
    assert actions is not None
    return actions


def test_each_fate_of_the_default_has_its_reason() -> None:
    messages = run(90)  # compacted at output 85 (above): 5 more outputs since
    rows = _rows(
        messages, "shorten_tools_cost_aware", cost_keep_share=0, cost_compacted_tool_calls=10
    )
    by_position: dict[int, set[str | None]] = {}
    for row in rows:
        assert row.why == ROW_TEXTS[RowReason(row.reason)].format(
            n=25 if row.reason == "newest" else 10
        )
        by_position.setdefault(row.position, set()).add(row.reason)
    # newest 25 (20 at the compaction, 5 since) verbatim; 10 before them shortened; the rest dropped
    assert all(by_position[p] == {"newest"} for p in range(1, 26))
    # in the band, the output is shortened and its short call kept: no longer than its short form
    assert all(by_position[p] == {"band", "short"} for p in range(26, 36))
    assert all(by_position[p] == {"older"} for p in range(36, 91))
    output = next(r for r in rows if r.position == 30 and r.role == "function_call_output")
    assert (output.action, output.why) == (
        "truncated",
        "shortened: in the band of 10 pairs before the verbatim outputs",
    )
    assert {r.why for r in rows if r.action == "dropped"} == {
        "dropped: older than the shortened band"
    }
    assert {r.why for r in rows if r.position <= 25} == {"verbatim: one of the newest 25 outputs"}


def test_an_output_the_retention_keeps_says_why() -> None:
    """Each read is of its own file, so each is the newest read of it: those the default's
    retention keeps whole out of the bands are protected, and say it."""
    rows = _rows(run(135), "shorten_tools_cost_aware")  # compacted at output 131
    kept = [row for row in rows if row.reason == "kept"]
    assert kept
    assert {(row.action, row.why) for row in kept} == {
        ("protected", "kept whole: the newest whole read of its file")
    }
    assert min(row.position for row in kept) > 24  # out of the verbatim band (20, 4 since)
    assert {row.reason for row in rows if row.position <= 24} == {"newest"}


def test_nothing_compacted_and_a_call_waiting_have_their_reasons() -> None:
    rows = _rows(run(5, pending=True), "shorten_tools_cost_aware")
    assert {(r.reason, r.why) for r in rows[:-1]} == {
        ("uncompacted", "kept: the strategy compacted nothing")
    }
    assert (rows[-1].reason, rows[-1].why) == (
        "pending",
        "kept: a call whose output has not come yet",
    )


def test_the_epoch_strategies_give_their_reasons() -> None:
    messages = run(120)
    repeat = json.loads(messages[2 + 2 * 5]["content"])  # pair 30 repeats pair 5's call
    messages[2 + 2 * 30] = {
        "role": "function_call",
        "content": json.dumps({**repeat, "id": "c030"}),
    }
    rows = _rows(messages, "shorten_tools_epoch")
    reasons = {r.reason for r in rows}
    assert reasons == {"epoch", "band", "short", "older", "repeat"}
    assert [r.index for r in rows if r.reason == "repeat"] == [2 + 2 * 30, 3 + 2 * 30]
    assert {r.why for r in rows if r.reason == "repeat"} == {
        "kept whole: latest of a repeated call"
    }
    assert {r.why for r in rows if r.reason == "epoch"} == {
        "verbatim: in the current epoch, or one of the 20 outputs before it"
    }
    _, compacted = shorten_tools_epoch(messages, CONFIG)
    assert compacted.reason is None  # it compacted: the rows say why
    _, under = shorten_tools_epoch(run(12), CONFIG)
    assert under.reason is not None and under.reason.code == "epoch_threshold"
    assert under.reason.text == (
        "under the epoch threshold of 50 tool outputs: nothing is compacted before it"
    )
    _, off = shorten_tools_epoch(run(60), PromptConfig(epoch_size=0))
    assert off.reason is not None and off.reason.code == "epoch_off"
    none = scoutd.prepare(run(3), "none").report[0].reason
    assert none is not None and none.text == "strategy none never compacts"


def test_shorten_tools_says_why_it_changed_nothing() -> None:
    untouched = scoutd.prepare(run(3), "shorten_tools").report[0]
    assert untouched.reason is not None and untouched.reason.code == "within_limits"
    assert untouched.reason.text.startswith(
        "nothing to shorten: every tool message is among the newest 10, in the newest user"
        " turn, within the first 100,000 characters of tool traffic"
    )
    later = [*run(120), {"role": "user", "content": "Go on."}]  # the tools: an older turn
    changed = scoutd.prepare(later, "shorten_tools").report[0]
    assert changed.outputs_truncated + changed.outputs_dropped > 0
    assert changed.reason is None


def test_a_session_gives_the_reason_of_a_whole_prepare_at_every_round() -> None:
    messages = run(100)
    with scoutd.Session(None) as session:
        for n in range(1, 101):
            got = session.prepare(messages[: 2 + 2 * n]).report[0].reason
            assert got == scoutd.prepare(messages[: 2 + 2 * n]).report[0].reason, n


def test_the_reason_comes_through_the_daemon() -> None:
    """A daemon session's rounds carry the reason over the wire, as a local prepare gives it."""
    messages = run(131)
    with (
        Daemon() as daemon,
        scoutd.Client(daemon.socket_path, timeout=20) as client,
        client.session(os.path.join(daemon.dir, "why.chat")) as session,
    ):
        seen = set()
        for n in (10, 21, 40, 91, 131):
            remote = session.prepare(messages[: 2 + 2 * n]).report[0].reason
            assert remote is not None
            assert remote == scoutd.prepare(messages[: 2 + 2 * n]).report[0].reason
            seen.add(remote.code)
        assert seen == {"within_verbatim", "below_trigger", "not_paying", "risk", "compacted"}
