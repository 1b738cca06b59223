"""The simulator's cache and cost model (``scoutd/simulate/cache.py``) against a plain one.

The reference below walks the prompts message by message and character by
character and keeps the cache as a dictionary of prompt prefixes: no
bisection, no prefix hashes, one token per character (a tokenizer of
``len``). Drawn sequences of prompts (each grown, changed or cut from the one
before, at drawn times) go through both under drawn settings, in both cache
models; every figure of every round must agree. Then each piece on its own:
the settings' refusals, the presets, a message's text and its billed media,
the token estimate.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.pricing import PRICE_PRESETS
from scoutd.simulate import cache
from scoutd.simulate.cache import (
    CacheModel,
    CacheSettings,
    Estimator,
    Prices,
    billed_message,
    common_chars,
    common_segments,
    segment_text,
)
from scoutd.strategies.media import IMAGE_TOKENS, billed_content

PRICES = Prices(input=2.0, write=3.0, read=0.5, output=5.0)  # each term told apart


def same_start(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share, walked one by one."""
    same = 0
    while same < min(len(a), len(b)) and a[same] == b[same]:
        same += 1
    return same


@dataclass
class Reference:
    """The cache as plainly as it can be said, one token a character."""

    settings: CacheSettings
    previous: list[str] = field(default_factory=list)
    previous_whole: int = 0
    previous_time: float = 0.0
    entries: dict[str, tuple[int, float]] = field(default_factory=dict)

    def cacheable(self, tokens: int) -> int:
        rounded = tokens // self.settings.granularity * self.settings.granularity
        return rounded if rounded >= self.settings.min_tokens else 0

    def alive(self, used: float, now: float) -> bool:
        return self.settings.ttl is None or now - used <= self.settings.ttl

    def prefix_hit(self, segments: list[str], now: float) -> int:
        if not self.previous or not self.alive(self.previous_time, now):
            return 0
        whole = same_start(segments, self.previous)
        common = sum(len(s) for s in segments[:whole])
        if not self.settings.whole_messages and whole < min(len(segments), len(self.previous)):
            common += same_start(segments[whole], self.previous[whole])
        return self.cacheable(min(common, self.previous_whole))

    def breakpoint_hit(self, segments: list[str], now: float) -> int:
        count = len(segments)
        lowest = max(count - self.settings.lookback, 1)
        for boundary in [*range(count, lowest - 1, -1), 1]:
            if not 1 <= boundary <= count:
                continue
            key = "\x00".join(segments[:boundary])
            entry = self.entries.get(key)
            if entry is not None and self.alive(entry[1], now):
                self.entries[key] = (entry[0], now)
                return entry[0]
        return 0

    def step(self, segments: list[str], now: float) -> tuple[Any, ...]:
        prompt = sum(len(s) for s in segments)
        if self.settings.model == "breakpoints":
            cached = self.breakpoint_hit(segments, now)
            for boundary in {1, len(segments)}:
                if 1 <= boundary <= len(segments):
                    tokens = sum(len(s) for s in segments[:boundary])
                    if tokens >= self.settings.min_tokens:
                        self.entries["\x00".join(segments[:boundary])] = (tokens, now)
        else:
            cached = self.prefix_hit(segments, now)
        written = prompt - cached if prompt >= self.settings.min_tokens else 0
        rest = prompt - cached - written
        invalidated = 0
        if self.alive(self.previous_time, now):
            invalidated = max(0, self.cacheable(self.previous_whole) - cached)
        cost = cached * PRICES.read + written * PRICES.write + rest * PRICES.input
        self.previous, self.previous_time = segments, now
        self.previous_whole = prompt if prompt >= self.settings.min_tokens else 0
        return (prompt, cached, written, rest, cost, invalidated > 0, invalidated)


segment = st.text(alphabet="ab", min_size=0, max_size=6)
edit = st.one_of(
    st.tuples(st.just("append"), st.lists(segment, min_size=1, max_size=3)),
    st.tuples(st.just("change"), st.integers(0, 8), segment),
    st.tuples(st.just("cut"), st.integers(0, 8)),
    st.tuples(st.just("same")),
)
cache_settings = st.builds(
    CacheSettings,
    granularity=st.integers(1, 4),
    min_tokens=st.integers(0, 12),
    model=st.sampled_from(cache.CACHE_MODELS),
    whole_messages=st.booleans(),
    lookback=st.integers(0, 4),
    ttl=st.one_of(st.none(), st.sampled_from([0.5, 2.0, 5.0])),
)
# seconds between rounds: 0.5 and 2.0 are lifetimes drawn below, tried at equality
PAUSES = [0.0, 0.4, 0.5, 1.0, 2.0, 3.0]
DRAWS = (
    cache_settings,
    st.lists(segment, min_size=1, max_size=4),
    st.lists(
        st.tuples(edit, st.sampled_from([0.0, 0.4, 0.5, 1.0, 2.0, 3.0])), min_size=1, max_size=8
    ),
)


def edited(segments: list[str], change: tuple[Any, ...]) -> list[str]:
    kind = change[0]
    if kind == "append":
        return [*segments, *change[1]]
    if kind == "change" and segments:
        at = change[1] % len(segments)
        return [*segments[:at], change[2], *segments[at + 1 :]]
    if kind == "cut":
        return segments[: change[1]]
    return list(segments)


def replay(
    chosen: CacheSettings, first: list[str], rounds: list[tuple[tuple[Any, ...], float]]
) -> list[cache.RoundCost]:
    """Each round through the model, checked against the reference; the model's costs."""
    model = CacheModel(PRICES, chosen, Estimator(len))
    reference = Reference(chosen)
    segments, now, costs = first, 0.0, []
    for change, pause in [(("same",), 0.0), *rounds]:
        segments, now = edited(segments, change), now + pause
        cost = model.step(list(segments), now)
        figures = (
            cost.prompt_tokens,
            cost.cached_tokens,
            cost.written_tokens,
            cost.input_tokens,
            cost.cost,
            cost.cache_break,
            cost.invalidated_tokens,
        )
        assert figures == reference.step(list(segments), now), (chosen, segments, now)
        costs.append(cost)
    return costs


@settings(max_examples=400, derandomize=True, database=None)
@given(*DRAWS)
def test_every_round_costs_what_the_plain_model_says(
    chosen: CacheSettings, first: list[str], rounds: list[tuple[tuple[Any, ...], float]]
) -> None:
    replay(chosen, first, rounds)


def test_the_drawn_rounds_reach_each_case() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=400, derandomize=True, database=None)
    @given(*DRAWS)
    def collect(
        chosen: CacheSettings, first: list[str], rounds: list[tuple[tuple[Any, ...], float]]
    ) -> None:
        for cost in replay(chosen, first, rounds):
            kind = chosen.model if not chosen.whole_messages else f"{chosen.model}, whole"
            seen[f"{kind}: read"] += cost.cached_tokens > 0
            seen[f"{kind}: break"] += cost.cache_break
            seen["under the minimum"] += cost.input_tokens > 0

    collect()
    models = ("prefix", "prefix, whole", "breakpoints")
    wanted = [f"{m}: {what}" for m in models for what in ("read", "break")]
    rare = {case: seen[case] for case in [*wanted, "under the minimum"] if seen[case] < 5}
    assert not rare, seen


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"granularity": 0}, "cache granularity must be >= 1 token"),
        ({"min_tokens": -1}, "minimum cacheable size must be >= 0 tokens"),
        ({"model": "lru"}, "cache model must be one of prefix, breakpoints"),
        ({"lookback": -1}, "lookback must be >= 0 messages"),
        ({"ttl": 0.0}, "cache ttl must be > 0 seconds"),
        ({"ttl": -1.0}, "cache ttl must be > 0 seconds"),
        ({"ttl": math.nan}, "cache ttl must be > 0 seconds"),
    ],
)
def test_settings_out_of_range_are_refused_naming_the_rule(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        CacheSettings(**fields)
    assert str(refused.value) == message


def test_settings_at_each_bound_are_taken() -> None:
    least = CacheSettings(granularity=1, min_tokens=0, lookback=0, ttl=1e-9, model="breakpoints")
    assert (least.granularity, least.min_tokens, least.lookback, least.ttl) == (1, 0, 0, 1e-9)
    assert CacheSettings().model == "prefix" and CacheSettings().ttl is None


@pytest.mark.parametrize(("name", "granularity"), [("anthropic", 1), ("openai", 128)])
def test_a_preset_has_the_published_prices_and_the_providers_cache(
    name: str, granularity: int
) -> None:
    published = PRICE_PRESETS[name]
    for prices, chosen in (cache._preset(name, granularity), cache.PRESETS[name]):
        assert prices == Prices(published.input, published.write, published.read, published.output)
        assert chosen == CacheSettings(granularity, 1024, ttl=published.ttl)
    assert set(cache.PRESETS) == {"anthropic", "anthropic-1h", "openai", "openai-4o"}


def test_a_segment_is_role_line_content_line() -> None:
    assert segment_text({"role": "user", "content": "hi"}) == "user\nhi\n"
    assert segment_text({"role": "tool", "content": None}) == "tool\n\n"
    assert segment_text({"role": "user", "content": [{"a": 1}]}) == 'user\n[{"a":1}]\n'
    assert segment_text({"content": 5}) == "None\n5\n"
    assert segment_text(["not", "a", "mapping"]) == '["not","a","mapping"]\n'


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def test_media_are_billed_as_their_tokens_take_and_nothing_else_changes() -> None:
    plain = {"role": "user", "content": "text"}
    assert billed_message(plain, 4.0) is plain
    assert billed_message("not a dict", 4.0) == "not a dict"
    with_image = {"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE]}
    billed = billed_message(with_image, 4.0)
    assert billed == {**with_image, "content": billed_content(with_image["content"], 4.0)}
    assert billed["content"] != with_image["content"]  # the image is billed, not its data
    assert with_image["content"][1] is IMAGE  # the message given is left as it was
    screenshot = {"type": "computer_call_output", "call_id": "c", "output": {"image_url": "x"}}
    assert billed_message(screenshot, 2.0) == {
        **screenshot,
        "output": "m" * math.ceil(IMAGE_TOKENS * 2.0),
    }
    output = [{"type": "input_text", "text": "look"}, {**IMAGE, "type": "input_image"}]
    returned = {"type": "function_call_output", "call_id": "c", "output": output}
    billed = billed_message(returned, 4.0)
    assert billed == {**returned, "output": billed_content(output, 4.0)}
    assert billed["output"] != output
    text_output = {"type": "computer_call_output", "output": "already text"}
    assert billed_message(text_output, 2.0) is text_output


@settings(max_examples=300, derandomize=True, database=None)
@given(st.text(alphabet="ab", max_size=12), st.text(alphabet="ab", max_size=12))
def test_common_prefixes_against_a_character_walk(a: str, b: str) -> None:
    same = same_start(a, b)
    assert common_chars(a, b) == same
    assert common_segments(list(a), list(b)) == same


def test_the_estimate_bills_a_partial_token_and_never_caches_one() -> None:
    estimate = Estimator()
    assert estimate.prompt(["abcde"]) == 2  # ceil(5 / 4)
    assert estimate.prefix(["abcde", "fgh"], 1, "fg") == 1  # floor(7 / 4)
    assert estimate.prefix(["abcd", "efgh"], 2, "") == 2
    assert estimate.text("abcde") == 2
    assert Estimator(chars_per_token=2.5).prompt(["abcdef"]) == 3  # ceil(2.4)
    assert Estimator(chars_per_token=1.0).prompt(["abc"]) == 3
    assert Estimator(chars_per_token=0.5).prompt(["abc"]) == 6  # a rate under one is a rate


@pytest.mark.parametrize("chars", [0.0, -1.0, math.inf, math.nan])
def test_an_estimate_needs_a_positive_finite_rate(chars: float) -> None:
    with pytest.raises(ValueError, match=r"^chars_per_token must be a positive number$"):
        Estimator(chars_per_token=chars)


def test_a_tokenizer_is_asked_once_a_text_and_held_to_its_sign() -> None:
    asked: list[str] = []

    def tokenizer(text: str) -> int:
        asked.append(text)
        return len(text) + 1

    estimate = Estimator(tokenizer)
    assert estimate.prompt(["ab", "cd", "ab"]) == 9
    assert estimate.text("cd") == 3
    assert estimate.prefix(["ab", "cd"], 1, "c") == 5  # the partial text, asked afresh
    assert estimate.prefix(["ab", "cd"], 2, "") == 6  # no partial: nothing more asked
    assert asked == ["ab", "cd", "c"]
    negative = Estimator(lambda text: -1)
    with pytest.raises(ValueError, match=r"^the tokenizer returned a negative count$"):
        negative.prompt(["x"])
    assert Estimator(lambda text: 0).prompt(["x"]) == 0  # zero is a count


def test_a_round_given_no_time_is_at_time_zero() -> None:
    model = CacheModel(PRICES, CacheSettings(min_tokens=0, ttl=0.5), Estimator(len))
    model.step(["abc"])
    assert model.step(["abc"], 0.5).cached_tokens == 3  # half a second after time 0: alive
    model.step(["abc"])
    assert model.step(["abc"], 0.6).cached_tokens == 0  # expired
