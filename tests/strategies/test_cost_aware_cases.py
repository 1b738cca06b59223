"""shorten_tools_cost_aware: small exact cases of its rules (docs/ECONOMY.md).

Each case sets every key it depends on explicitly, so that it holds whatever
the defaults become. Token counts use ``chars_per_token = 1``: a message of
``n`` characters costs ``n + 4`` tokens.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest

from scoutd.config import PromptConfig
from scoutd.errors import ConfigError
from scoutd.pricing import PRICE_PRESETS
from scoutd.strategies.cost_aware import (
    _Tokens,
    effective_prices,
    load_tokenizer,
    shorten_tools_cost_aware,
    token_counter,
)
from scoutd.strategies.cost_notice import COST_AWARE_NOTICE
from scoutd.strategies.cost_plan import _fit
from scoutd.strategies.tool_messages import index_tools

from .conversations import call, output

NAME = "shorten_tools_cost_aware"
# Every output of these runs is its pair; nothing pays, only the window forces.
FORCED_ONLY = PromptConfig(
    context_window=1000,
    compaction_trigger_share=0.0,
    compaction_limit_share=1.0,
    expected_horizon=0.0,
    compaction_risk_share=0.0,
    cache_pricing="anthropic",
    chars_per_token=1.0,
    cost_full_tool_outputs=1,
    cost_full_share=0.0,
    cost_full_share_cap=0,
    cost_compacted_tool_calls=1,
)
# The compaction notice as the limit counts it (one character a token): its template,
# room for its two counts (20 digits each), the message's 4 tokens.
NOTICE = len(COST_AWARE_NOTICE) + 2 * 20 + 4


class Words:
    """A tokenizer reached through an attribute path."""

    @staticmethod
    def count(text: str) -> int:
        return len(text.split())


def pairs(sizes: list[int], *, head: str = "h") -> list[dict[str, Any]]:
    """A user turn, then one call/output pair per size (the output's content length)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": head}]
    for number, size in enumerate(sizes):
        messages.append(call("t", {}, f"c{number}"))
        messages.append(output("t", "o" * size, f"c{number}"))
    return messages


def fates(messages: list[Any], config: PromptConfig) -> list[str]:
    """The action on each tool message, oldest first."""
    _, report = shorten_tools_cost_aware(messages, config, detail=True)
    assert report.strategy == NAME
    return [action.action for action in report.actions or []]


def tokens(message: dict[str, Any]) -> int:
    return len(message.get("content") or "") + 4


@pytest.mark.parametrize("chars_per_token", [1.0, 2.5])
def test_a_prompt_exactly_at_the_limit_is_left_alone_and_one_token_more_is_compacted(
    chars_per_token: float,
) -> None:
    messages = pairs([600, 600, 600])
    total = sum(math.ceil(len(m["content"]) / chars_per_token) + 4 for m in messages)
    config = msgspec.structs.replace(FORCED_ONLY, chars_per_token=chars_per_token)
    at_limit = msgspec.structs.replace(config, context_window=total)
    assert set(fates(messages, at_limit)) == {"kept"}
    over = msgspec.structs.replace(config, context_window=total - 1)
    # the usual bands: one pair whole, one shortened before it, the oldest dropped
    assert fates(messages, over) == ["dropped", "dropped", "kept", "truncated", "kept", "kept"]


def test_a_forced_compaction_keeps_the_newest_whole_and_shortens_only_what_it_must() -> None:
    """Pairs cost 41 + 639 tokens, 565 shortened; the head 5 tokens.

    Round 4 (2,725 tokens) is over the 2,400 limit: pairs 1-2 dropped, 3
    shortened (1,250). Round 5 could drop pair 3 but nothing pays for it
    (declined); round 6 (2,610) is over again: pairs 1-4 dropped, 5 shortened.
    With a limit of 1,000 even the newest output must be shortened.
    """
    messages = pairs([600] * 6)
    config = msgspec.structs.replace(FORCED_ONLY, context_window=2400)
    assert fates(messages, config) == ["dropped"] * 8 + ["kept", "truncated", "kept", "kept"]
    config = msgspec.structs.replace(FORCED_ONLY, context_window=1000)
    assert fates(messages, config) == ["dropped"] * 10 + ["kept", "truncated"]
    # a round earlier (5 pairs, 3,405 tokens) the bands were those of round 4
    config = msgspec.structs.replace(FORCED_ONLY, context_window=2400)
    assert fates(messages[:-2], config) == ["dropped"] * 4 + ["kept", "truncated"] + ["kept"] * 4


def test_a_lone_surrogate_in_a_non_string_content_is_counted() -> None:
    """Such a content is counted by its JSON text (it used to fail the whole prompt).

    A missing or null content counts nothing but the message's overhead.
    """
    messages = pairs([600] * 4)
    messages[1:1] = [{"role": "user", "content": None}, {"role": "user"}]
    messages.insert(1, {"role": "user", "content": ["\ud800" + "u" * 300, {"k": 1, "j": 2}]})
    config = msgspec.structs.replace(FORCED_ONLY, context_window=10_000)
    got, report = shorten_tools_cost_aware(messages, config)
    assert got == messages and report.outputs_kept == 4
    # 300 characters more in the head than the window would hold compacted
    text = json.dumps(messages[1]["content"], ensure_ascii=False, separators=(",", ":"))
    total = sum(tokens(m) for m in messages if m is not messages[1]) + len(text) + 4
    for window, changed in ((total, False), (total - 1, True)):
        config = msgspec.structs.replace(FORCED_ONLY, context_window=window)
        assert (shorten_tools_cost_aware(messages, config)[0] != messages) is changed


def test_the_report_names_the_strategy_and_lists_actions_only_on_request() -> None:
    messages = pairs([600] * 6)
    config = msgspec.structs.replace(FORCED_ONLY, context_window=2400)
    _, plain = shorten_tools_cost_aware(messages, config)
    _, detailed = shorten_tools_cost_aware(messages, config, detail=True)
    assert plain.strategy == detailed.strategy == NAME
    assert plain.actions is None and detailed.actions
    assert msgspec.structs.replace(detailed, actions=None) == plain
    _, untouched = shorten_tools_cost_aware(pairs([10]), config, detail=True)
    assert untouched.strategy == NAME and [a.action for a in untouched.actions or []] == [
        "kept",
        "kept",
    ]


def test_effective_prices_are_the_preset_with_the_configured_prices() -> None:
    for preset, prices in PRICE_PRESETS.items():
        assert effective_prices(PromptConfig(cache_pricing=preset), "openai-chat") == prices
        config = PromptConfig(cache_pricing=preset, cache_write_price=3.0, cache_read_price=0.7)
        changed = effective_prices(config, None)
        assert (changed.write, changed.read) == (3.0, 0.7)
        assert (changed.input, changed.ttl, changed.output) == (
            prices.input,
            prices.ttl,
            prices.output,
        )
    assert (
        effective_prices(PromptConfig(cache_pricing="auto"), "openai-chat")
        == (PRICE_PRESETS["openai"])
    )
    assert effective_prices(PromptConfig(cache_pricing="auto"), None) == PRICE_PRESETS["anthropic"]


def test_a_tokenizer_is_found_by_module_and_attribute_path() -> None:
    counter = load_tokenizer(f" {__name__} :Words.count")
    assert counter("three small words") == 3
    configured = token_counter(PromptConfig(tokenizer=f"{__name__}:Words.count"))
    assert configured("a b") == 2
    estimate = token_counter(PromptConfig(chars_per_token=2.5))
    assert [estimate("x" * n) for n in (0, 1, 5, 6)] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_such_module_here:count", "tokenizer 'no_such_module_here:count' cannot be loaded: "),
        (f"{__name__}:Words.nothing", "cannot be loaded: "),
        (":count", "cannot be loaded: "),
        (__name__, "is not callable"),
        (f"{__name__}:NAME", f"tokenizer '{__name__}:NAME' is not callable"),
    ],
)
def test_a_tokenizer_that_cannot_count_is_a_config_error(target: str, message: str) -> None:
    with pytest.raises(ConfigError) as failed:
        load_tokenizer(target)
    assert message in str(failed.value)


def test_remarks_between_a_call_and_its_output_go_with_their_pair() -> None:
    """A remark belongs to the pair of the next tool message, also inside a pair."""
    messages = pairs([600, 600])
    messages.insert(2, {"role": "assistant", "content": "r0"})  # inside the first pair
    messages.insert(5, {"role": "assistant", "content": "r1"})  # inside the newest pair
    messages.append({"role": "assistant", "content": "after"})  # after every tool message
    config = msgspec.structs.replace(FORCED_ONLY, context_window=100)
    got, report = shorten_tools_cost_aware(messages, config)
    # not even the newest output fits: every pair goes, with the remarks inside them
    assert report.outputs_dropped == 2 and report.narration_dropped == 2
    assert [m["content"] for m in got if m["role"] == "assistant"] == ["after"]
    # no tool message remains: the notice comes last
    assert got[:2] == [messages[0], messages[-1]] and len(got) == 3
    assert got[-1]["content"].startswith("[Context compaction]\n")


@pytest.mark.parametrize("long_side", ["call", "output"])
def test_a_shortened_message_is_estimated_at_its_kept_size(long_side: str) -> None:
    """A shortened tool message counts 520 characters (what shortening keeps) plus 4.

    The oldest pair has one long message, the newest a long output. The
    limit is set exactly at the prompt of round 2 with the oldest pair
    shortened, and the notice: round 1 fits whole, round 2 fits with that pair
    shortened and no more (the fitting stops at equality); one token lower it
    does not, and the oldest pair is dropped, the newest output shortened.
    """
    long_text = "q" * 2000
    messages: list[dict[str, Any]] = [{"role": "user", "content": "h"}]
    if long_side == "call":
        messages += [call("t", {"q": long_text}, "c0"), output("t", "short", "c0")]
    else:
        messages += [call("t", {}, "c0"), output("t", long_text, "c0")]
    messages += [call("t", {}, "c1"), output("t", long_text, "c1")]
    long_at = 1 if long_side == "call" else 2
    shortened = sum(tokens(m) for i, m in enumerate(messages) if i != long_at) + 520 + 4 + NOTICE
    config = msgspec.structs.replace(FORCED_ONLY, context_window=shortened)
    kept = ["kept", "kept", "kept", "kept"]
    kept[long_at - 1] = "truncated"
    assert fates(messages, config) == kept
    config = msgspec.structs.replace(FORCED_ONLY, context_window=shortened - 1)
    assert fates(messages, config) == ["dropped", "dropped", "kept", "truncated"]


def balanced_run() -> tuple[list[dict[str, Any]], int]:
    """A head of T tokens and two pairs of T tokens each (T returned)."""
    messages = pairs([300, 300])[1:]
    pair = sum(tokens(m) for m in messages[:2])
    return [{"role": "user", "content": "h" * (pair - 4)}, *messages], pair


# At round 2 a compaction could drop pair 1: it removes S = T tokens and the
# rewrite is (P' - H) * (write - read) = T * 1. The read cost carried since the
# last decision is S * read = T; over the horizon it saves S * read * 2 * h =
# T; the bill so far is 2T * write (round 1) + 2T * read + T * write (round 2) = 8T.
AT_EVERY_BOUND = PromptConfig(
    context_window=1_000_000,
    compaction_trigger_share=0.0,
    compaction_limit_share=1.0,
    expected_horizon=0.5,
    compaction_risk_share=0.125,
    cache_pricing="openai",
    cache_write_price=2.0,
    cache_read_price=1.0,
    chars_per_token=1.0,
    cost_full_tool_outputs=1,
    cost_full_share=0.0,
    cost_full_share_cap=0,
    cost_compacted_tool_calls=0,
    # verbatim rounds not valued: the rent-or-buy rule at its plain break-even
    cost_verbatim_value=0.0,
)
COMPACTED = ["dropped", "dropped", "kept", "kept"]


@pytest.mark.parametrize(
    "change",
    [
        {},  # every rule holds with equality: it compacts
        {"expected_horizon": 0.49},  # the saving over the horizon falls short
        {"compaction_risk_share": 0.124},  # the rewrite is over the risk share of the bill
        {"cache_write_price": 2.001, "expected_horizon": 1.0},  # carried < rewrite
        # verbatim rounds valued: the carried read cost must reach rewrite / (1 - v)
        {"cost_verbatim_value": 0.01},
        {"cost_verbatim_value": 0.5, "expected_horizon": 1.0},
        {"trigger": 1},  # the prompt is one token under the trigger
        # read at 0.5, write at 1.0: everything halves, still at equality
        {"cache_write_price": 1.0, "cache_read_price": 0.5, "compacts": 1},
        {"cache_write_price": 1.0, "cache_read_price": 0.5, "expected_horizon": 0.49},
        {"cache_write_price": 1.0, "cache_read_price": 0.5, "compaction_risk_share": 0.124},
    ],
)
def test_each_rule_of_the_decision_holds_at_equality(change: dict[str, float]) -> None:
    messages, pair = balanced_run()
    config = AT_EVERY_BOUND
    change = dict(change)  # the parameter is shared between runs: leave it whole
    trigger = change.pop("trigger", None)
    if trigger is not None:  # the trigger at 3T + 1 (the prompt is 3T)
        config = msgspec.structs.replace(
            config, context_window=6 * pair + 2, compaction_trigger_share=0.5
        )
    compacts = change.pop("compacts", not change and trigger is None)
    config = msgspec.structs.replace(config, **change)
    expected = COMPACTED if compacts else ["kept"] * 4
    assert fates(messages, config) == expected


def test_the_trigger_holds_at_equality() -> None:
    messages, pair = balanced_run()
    config = msgspec.structs.replace(
        AT_EVERY_BOUND, context_window=6 * pair, compaction_trigger_share=0.5
    )
    assert fates(messages, config) == COMPACTED


@pytest.mark.parametrize("longer", [0, 1])
def test_without_a_head_the_rewrite_is_the_whole_kept_prompt(longer: int) -> None:
    """No message before the first tool message: the rewrite is every kept token.

    Pair 1 and pair 2 of T tokens: dropping pair 1 at round 2 carries T and
    rewrites T, which pays (at equality); with pair 2 one token longer the
    rewrite is T + 1 and it does not.
    """
    messages = [
        call("t", {}, "c0"),
        output("t", "o" * 300, "c0"),
        call("t", {}, "c1"),
        output("t", "o" * (300 + longer), "c1"),
    ]
    config = msgspec.structs.replace(
        AT_EVERY_BOUND, expected_horizon=1.0, compaction_risk_share=2.0
    )
    assert fates(messages, config) == (["kept"] * 4 if longer else COMPACTED)


def test_dropping_stops_exactly_at_the_limit() -> None:
    """Six pairs; at 570 tokens and the notice the newest pair alone fits shortened
    (5 + 41 + 524)."""
    messages = pairs([600] * 6)
    config = msgspec.structs.replace(FORCED_ONLY, context_window=570 + NOTICE)
    assert fates(messages, config) == ["dropped"] * 10 + ["kept", "truncated"]
    config = msgspec.structs.replace(FORCED_ONLY, context_window=569 + NOTICE)
    assert fates(messages, config) == ["dropped"] * 12


@pytest.mark.parametrize(("full", "expected"), [(3, (0, 0)), (4, (0, 0)), (2, (0, 1))])
def test_fitting_asks_for_no_more_than_the_outputs_kept_whole_when_all_fits(
    full: int, expected: tuple[int, int]
) -> None:
    """With room to spare, the least compaction shortens only the pairs past ``full``."""
    messages = pairs([600] * 3)
    counts = _Tokens(messages, index_tools(messages), token_counter(FORCED_ONLY))
    assert _fit(counts, 3, full, 1, 10_000.0) == expected


@pytest.mark.parametrize("margin", [200, 230])
def test_shortening_more_to_fit_drops_nothing_the_band_still_covers(margin: int) -> None:
    """Two newest kept whole would not fit: one more is shortened, none dropped (band 5).

    At a margin of 230 the prompt with two outputs shortened (and the notice) is
    exactly at the limit: it fits, so the newest output stays whole.
    """
    messages = pairs([600] * 3)
    notice = "[compacted]"  # a short one: shortening must pay for it, as for the prompt
    total = sum(tokens(m) for m in messages) + len(notice) + 2 * 20 + 4
    config = msgspec.structs.replace(
        FORCED_ONLY,
        compaction_notice=notice,
        context_window=total - margin,  # shortening one output saves 115, two save 230
        cost_full_tool_outputs=2,
        cost_compacted_tool_calls=5,
    )
    assert fates(messages, config) == ["kept", "truncated", "kept", "truncated", "kept", "kept"]


# Prices from the format: five pairs of 300 tokens drop four under OpenAI's, none under Anthropic's.
AUTO_PRICED = msgspec.structs.replace(
    AT_EVERY_BOUND,
    cache_pricing="auto",
    cache_write_price=None,
    cache_read_price=None,
    expected_horizon=3.0,
    compaction_risk_share=2.0,
)


@pytest.mark.parametrize("format_name", ["openai-chat", None])
def test_automatic_prices_follow_the_conversation_format(format_name: str | None) -> None:
    """Five pairs of T tokens, each round able to drop all but the newest.

    The read cost carried by round n is 0.1 * T * n * (n - 1) / 2: at round
    5 it reaches OpenAI's rewrite (0.9 T) but not Anthropic's (1.15 T).
    """
    messages = pairs([300] * 5, head="h" * 50)
    _, report = shorten_tools_cost_aware(messages, AUTO_PRICED, format_name=format_name)
    assert report.outputs_dropped == (4 if format_name else 0)


def test_calls_still_waiting_for_their_output_are_left_alone_and_listed() -> None:
    """No output yet: nothing is compacted, even under a window the calls overflow."""
    messages = [{"role": "user", "content": "h"}, call("t", {"a": "x" * 900}, "c0")]
    messages.append(call("t", {"a": "y" * 900}, "c1"))
    config = msgspec.structs.replace(FORCED_ONLY, context_window=100)
    assert fates(messages, config) == ["kept", "kept"]
    prompt, _ = shorten_tools_cost_aware(messages, config)
    assert prompt == messages


@pytest.mark.parametrize(("after", "window"), [(0, 1315), (300, 2400), (1500, 2400)])
def test_the_prompt_sent_fits_its_limit_with_the_notice_and_what_follows_the_last_output(
    after: int, window: int
) -> None:
    """The limit holds the whole prompt sent, counted as the strategy counts: the
    notice a compaction adds (1,215 tokens of bands fitted a limit of 1,315, then
    the notice's 344 went out with them) and the user's text after the newest
    output (3,006 tokens went out under a limit of 2,400)."""
    messages = pairs([600] * 6)
    if after:
        messages.append({"role": "user", "content": "u" * after})
    config = msgspec.structs.replace(FORCED_ONLY, context_window=window)
    prompt, report = shorten_tools_cost_aware(messages, config)
    assert report.outputs_dropped + report.outputs_truncated > 0  # it had to compact
    assert sum(tokens(message) for message in prompt) <= window
    assert not after or messages[-1] in prompt  # what follows the outputs is never cut


def test_the_prompt_sent_fits_every_limit_it_can_fit() -> None:
    """Over limits from 1,300 to 3,200 tokens and user turns of 300 to 1,500 after
    the last output: whenever the head, that turn and the notice fit, the prompt
    sent fits too (counted as the strategy counts, one character a token)."""
    fitted = 0
    for after in (300, 700, 1500):
        messages = [*pairs([600] * 6), {"role": "user", "content": "u" * after}]
        for window in range(1300, 3200, 7):
            config = msgspec.structs.replace(FORCED_ONLY, context_window=window)
            prompt, report = shorten_tools_cost_aware(messages, config)
            if tokens(messages[0]) + tokens(messages[-1]) + NOTICE > window:
                continue  # nothing fits: all the tool traffic goes, the rest stays
            assert sum(tokens(message) for message in prompt) <= window, (after, window)
            fitted += report.outputs_dropped + report.outputs_truncated > 0
    assert fitted > 200  # compacted to fit, most of them
