"""The fast paths of the core against plain references (docs/PERFORMANCE.md).

The cost-aware replay, its token counts, its bands, the remark finder and the
pairing of the tool index were rewritten for speed. Each reference below is
the straightforward loop they replaced; the rewritten code must give the same
values on every conversation, so that no decision changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoutd.config import PromptConfig
from scoutd.simulate.workload import synthetic_run
from scoutd.strategies.cost_aware import (
    REMARK_ROLE,
    SHORTENED_OVERHEAD_CHARS,
    _bands,
    _remarks,
    _Tokens,
    effective_prices,
)
from scoutd.strategies.cost_plan import Plan, Replay, plan_compaction
from scoutd.strategies.epoch import Window
from scoutd.strategies.retention import KEEP_REASONS, Kept, Key
from scoutd.strategies.rewrites import shortened_call
from scoutd.strategies.tokens import MESSAGE_OVERHEAD_TOKENS, message_tokens, token_counter
from scoutd.strategies.tool_messages import (
    ARGUMENT_SIZE,
    OUTPUT_SIZE,
    TOOL_ROLES,
    ToolIndex,
    _pair_key,
    index_tools,
    roles_of,
)

from .conversations import agent_conversations, conversations

# Small windows and bands, so that every branch of the replay runs.
CONFIGS = [
    PromptConfig(),
    PromptConfig(context_window=2_000, compaction_trigger_share=0.1),
    PromptConfig(context_window=600, compaction_limit_share=0.5, cost_full_tool_outputs=2),
    PromptConfig(
        context_window=5_000,
        cost_full_tool_outputs=1,
        cost_compacted_tool_calls=1,
        cost_full_share=0.0,
        expected_horizon=3.0,
        compaction_risk_share=1.0,
    ),
    PromptConfig(context_window=50_000, chars_per_token=3.3, cache_pricing="openai"),
]


def reference_plan(tokens: Any, outputs: int, config: PromptConfig, prices: Any) -> Plan:
    """The replay as first written: every saving asked of ``tokens.saved``, and what
    the compaction keeps whole besides (:func:`reference_retain`) added back pair by pair."""
    window = config.context_window
    trigger = config.compaction_trigger_share * window
    limit = config.compaction_limit_share * window
    premium = max(prices.write - prices.read, 0.0)
    dropped = shortened = decided = previous = 0
    carried = billed = 0.0
    kept = Kept()
    for number in range(1, outputs + 1):
        prompt = tokens.cumulative[tokens.output_end[number]] - tokens.saved(dropped, shortened)
        prompt += reference_kept_tokens(tokens, kept.numbers, dropped)
        billed += min(previous, prompt) * prices.read + max(prompt - previous, 0) * prices.write
        previous = prompt
        forced = prompt > limit
        full = max(
            config.cost_full_tool_outputs,
            min(int(number * config.cost_full_share), config.cost_full_share_cap),
        )
        if number - full <= shortened and not forced:
            continue
        whole_prompt = tokens.cumulative[tokens.output_end[number]]
        new_shortened = max(0, number - full)
        new_dropped = max(0, new_shortened - config.cost_compacted_tool_calls)
        while whole_prompt - tokens.saved(new_dropped, new_shortened) > limit and (
            new_shortened < number
        ):
            new_shortened += 1
            new_dropped = max(0, new_shortened - config.cost_compacted_tool_calls)
        while whole_prompt - tokens.saved(new_dropped, new_shortened) > limit and (
            new_dropped < number
        ):
            new_dropped += 1
        if (new_dropped, new_shortened) <= (dropped, shortened):
            continue
        new_prompt = tokens.cumulative[tokens.output_end[number]]
        new_prompt -= tokens.saved(new_dropped, new_shortened)
        removed = prompt - new_prompt
        carried += removed * prices.read
        rewrite = max(new_prompt - tokens.head, 0) * premium
        horizon = number * config.expected_horizon
        pays = (
            prompt >= trigger
            # verbatim rounds valued at cost_verbatim_value of their read cost
            and carried >= 1.0 / (1.0 - config.cost_verbatim_value) * rewrite
            and removed * prices.read * horizon >= rewrite
            and rewrite <= config.compaction_risk_share * billed
        )
        if not (forced or pays):
            continue

        def size_of(pair: int, dropped: int = new_dropped) -> int:
            return reference_kept_tokens(tokens, (pair,), dropped)

        new_kept = reference_retain(
            tokens.calls.keys_to(number).keys,
            size_of,
            number,
            new_shortened,
            0 if forced else int(config.cost_keep_share * removed),  # forced: the bands alone
            config.cost_keep_lookback,
        )
        if new_kept.numbers:
            kept_prompt = new_prompt + reference_kept_tokens(tokens, new_kept.numbers, new_dropped)
            kept_rewrite = max(kept_prompt - tokens.head, 0) * premium
            fits = (
                carried >= 1.0 / (1.0 - config.cost_verbatim_value) * kept_rewrite
                and (prompt - kept_prompt) * prices.read * horizon >= kept_rewrite
                and kept_rewrite <= config.compaction_risk_share * billed
            )
            if not fits:
                continue
            new_prompt, removed, rewrite = kept_prompt, prompt - kept_prompt, kept_rewrite
        dropped, shortened, decided, kept = new_dropped, new_shortened, number, new_kept
        carried = 0.0
        billed += rewrite - removed * prices.read
        previous = new_prompt
    return Plan(dropped, shortened, decided, kept)


def reference_retain(
    keys: Sequence[Key | None],
    size_of: Callable[[int], int],
    number: int,
    band_end: int,
    budget: int,
    lookback: int,
) -> Kept:
    """The retention as docs/STRATEGIES.md says it: walking from pair ``number`` back,
    each key seen supersedes older pairs of the same key; a pair of ``1..band_end``
    within ``lookback`` of its end, not superseded, is kept whole when its
    ``size_of`` still fits the budget."""
    if budget <= 0 or band_end <= 0:
        return Kept()
    newer: set[Key] = set()
    kept: list[int] = []
    left = budget
    for pair in range(number, max(1, band_end - lookback + 1) - 1, -1):
        key = keys[pair]
        if key is None or key in newer:
            continue  # never kept, or superseded
        newer.add(key)
        if pair <= band_end and size_of(pair) <= left:
            left -= size_of(pair)
            kept.append(pair)
    kept.reverse()
    return Kept(tuple(kept), tuple(KEEP_REASONS[keys[pair][0]] for pair in kept))  # type: ignore[index]


def reference_kept_tokens(tokens: Any, numbers: tuple[int, ...], dropped: int) -> int:
    """What keeping ``numbers`` whole adds: a dropped pair without its remarks, a shortened
    one its whole size less its shortened one."""
    total = 0
    for k in numbers:
        if k > dropped:
            total += (tokens.whole[k] - tokens.whole[k - 1]) - (
                tokens.shortened[k] - tokens.shortened[k - 1]
            )
        else:
            total += tokens.bare[k] - tokens.bare[k - 1]
    return total


def reference_remarks(index: ToolIndex) -> list[tuple[int, int]]:
    found = []
    for position, role in enumerate(index.roles):
        if not index.indices or not index.indices[0] < position < index.indices[-1]:
            continue
        if role != REMARK_ROLE:
            continue
        slot = next(s for s, at in enumerate(index.indices) if at > position)
        if index.numbers[slot] <= index.outputs:
            found.append((position, index.numbers[slot]))
    return found


def reference_counts(messages: list[Any], index: ToolIndex, count: Any) -> tuple[list[int], ...]:
    """Pair sums (whole, shortened, prefix sums) and output ends, slot by slot."""
    per_message = message_tokens(messages, count)
    outputs = index.outputs
    whole, shortened, ends = [0] * (outputs + 1), [0] * (outputs + 1), [0] * (outputs + 1)
    limits = (
        count("x" * (OUTPUT_SIZE + SHORTENED_OVERHEAD_CHARS)),
        count("x" * (2 * ARGUMENT_SIZE + SHORTENED_OVERHEAD_CHARS)),
    )
    for slot, number in enumerate(index.numbers):
        if number > outputs:
            continue
        tokens = per_message[index.indices[slot]]
        whole[number] += tokens
        limit = limits[index.is_call[slot]] + MESSAGE_OVERHEAD_TOKENS
        short = min(tokens, limit)
        if index.is_call[slot] and tokens > limit:
            # a call counts at least what its rewrite sends (all of it when none is made)
            sent = shortened_call(index.bodies[slot], index.content(messages, slot))
            short = max(limit, tokens if sent is None else count(sent) + MESSAGE_OVERHEAD_TOKENS)
        shortened[number] += short
        if not index.is_call[slot]:
            ends[number] = index.indices[slot] + 1
    for position, number in reference_remarks(index):
        whole[number] += per_message[position]
        shortened[number] += per_message[position]
    sums = [sum(whole[: n + 1]) for n in range(outputs + 1)]
    short_sums = [sum(shortened[: n + 1]) for n in range(outputs + 1)]
    bare_sums = [
        sums[n] - sum(per_message[p] for p, k in reference_remarks(index) if k <= n)
        for n in range(outputs + 1)
    ]
    return sums, short_sums, ends, bare_sums


def reference_pairing(messages: list[Any]) -> tuple[list[int], list[int], list[int], int]:
    """Numbers, partners, paired call slots and outputs, tool by tool."""
    index = index_tools(messages)  # for the usable slots only
    numbers, partners, paired = [], [], []
    waiting: dict[Any, int] = {}
    outputs = 0
    for slot, body in enumerate(index.bodies):
        key = body.id if type(body.id) is str else _pair_key(body.id)
        numbers.append(0)
        partners.append(-1)
        if index.roles[index.indices[slot]] == "function_call":
            numbers[slot] = outputs + 1
            if key is not None:
                waiting[key] = slot
        else:
            outputs += 1
            numbers[slot] = outputs
            partner = waiting.pop(key, -1) if key is not None else -1
            if partner >= 0:
                partners[slot], partners[partner] = partner, slot
                numbers[partner] = outputs
                paired.append(partner)
    return numbers, partners, paired, outputs


def check_all(messages: list[Any], config: PromptConfig) -> None:
    index = index_tools(messages)
    assert (index.numbers, index.partners, index.paired, index.outputs) == reference_pairing(
        messages
    )
    assert _remarks(index) == reference_remarks(index)
    if not index.outputs:
        return
    count = token_counter(config)
    tokens = _Tokens(messages, index, count)
    assert (tokens.whole, tokens.shortened, tokens.output_end, tokens.bare) == reference_counts(
        messages, index, count
    )
    prices = effective_prices(config, "scout")
    plan = plan_compaction(tokens, index.outputs, config, prices)
    assert plan == reference_plan(tokens, index.outputs, config, prices)
    # a replay in two steps (as a session makes it) ends where one replay does
    replay = Replay()
    plan_compaction(tokens, index.outputs // 2, config, prices, replay)
    assert plan_compaction(tokens, index.outputs, config, prices, replay) == plan
    outputs = index.outputs
    for dropped, shortened in {(plan.dropped, plan.shortened), (0, outputs), (outputs // 3, 0)}:
        window = Window(
            pinned=0, size=0, keep_full=outputs - shortened, truncate_to=outputs - dropped
        )
        positions = index.positions
        expected = (
            [s for s, p in enumerate(positions) if p > window.truncate_to],
            [s for s, p in enumerate(positions) if window.keep_full < p <= window.truncate_to],
        )
        assert _bands(index, window) == expected


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(("calls", "repeat_rate"), [(0, 0.05), (3, 0.05), (120, 0.05), (300, 0.6)])
def test_synthetic_runs_match_the_references(
    config: PromptConfig, calls: int, repeat_rate: float
) -> None:
    messages = synthetic_run(calls, seed=calls, repeat_rate=repeat_rate).messages
    check_all(messages, config)


def _interleaved(messages: list[Any]) -> list[Any]:
    """The calls of each two neighbouring pairs first, then their outputs (out of order)."""
    out: list[Any] = []
    tools = [m for m in messages if m["role"] in TOOL_ROLES]
    for at in range(0, len(tools) - 3, 4):
        first_call, first_output, second_call, second_output = tools[at : at + 4]
        out += [first_call, second_call, second_output, first_output]
        out.append({"role": "assistant", "content": "a remark " * 20})
    return out


@pytest.mark.parametrize("config", CONFIGS)
def test_parallel_calls_match_the_references(config: PromptConfig) -> None:
    messages = synthetic_run(200, seed=3).messages
    check_all(messages[:2] + _interleaved(messages), config)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.one_of(conversations(), agent_conversations()),
    config=st.sampled_from(CONFIGS),
)
def test_generated_conversations_match_the_references(
    messages: list[Any], config: PromptConfig
) -> None:
    check_all(messages, config)


def test_a_session_index_pairs_as_one_index() -> None:
    """Extending an index with a call still waiting takes the general pairing path."""
    messages = synthetic_run(40, seed=5).messages
    cut = next(i for i, m in enumerate(messages) if i > 30 and m["role"] == "function_call") + 1
    index = ToolIndex()
    index.extend(messages[:cut], 0)
    assert index.waiting  # the last call waits for its output
    index.extend(messages, cut)
    whole = index_tools(messages)
    assert (index.numbers, index.partners, index.outputs) == (
        whole.numbers,
        whole.partners,
        whole.outputs,
    )
    assert roles_of(messages) == index.roles


def test_counts_with_a_tokenizer_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A configured tokenizer goes through the general counting path, with the same sums."""
    messages = synthetic_run(60, seed=9).messages
    index = index_tools(messages)

    def count(text: str) -> int:
        return len(msgspec.json.encode(text)) // 3

    monkeypatch.setattr("scoutd.strategies.tokens.load_tokenizer", lambda target: count)
    config = PromptConfig(context_window=3_000, tokenizer="any:thing")
    counter = token_counter(config)
    tokens = _Tokens(messages, index, counter)
    assert (tokens.whole, tokens.shortened, tokens.output_end, tokens.bare) == reference_counts(
        messages, index, counter
    )
    check_all(messages, config)
