"""A prefix-caching model of a provider's prompt cache, and what each round costs.

A prompt is serialized as the concatenation of one *segment* per message
(``role + "\\n" + content + "\\n"``). The cache holds the previous round's
prompt; this round reads from it the longest common prefix, counted in tokens,
rounded down to the cache granularity, and nothing at all below the minimum
cacheable size. The rest of the prompt is uncached: with a write premium
(Anthropic-like) all of it is written to the cache at the write price when the
prompt is large enough to be cached, else it is billed at the input price.

Costs are in units of one uncached input token: multiply by your price per
input token to get money.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ..formats.openai_responses_items import COMPUTER_OUTPUT
from ..pricing import PRICE_PRESETS
from ..strategies.media import IMAGE_TOKENS, billed_content

__all__ = [
    "CACHE_MODELS",
    "PRESETS",
    "CacheModel",
    "CacheSettings",
    "Estimator",
    "Prices",
    "RoundCost",
    "Tokenizer",
    "billed_message",
    "common_chars",
    "common_segments",
    "segment_text",
]

Tokenizer = Callable[[str], int]

# The default estimator: one token per four characters, the usual rule of
# thumb for English text and code with BPE tokenizers.
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True, slots=True)
class Prices:
    """Price per token of each kind of input token, relative to one another."""

    input: float = 1.0  # uncached input token
    write: float = 1.25  # token written to the cache (Anthropic: 1.25 x input)
    read: float = 0.1  # token read from the cache (Anthropic: 0.1 x input)
    output: float = 5.0  # generated token, paid by a summariser (Anthropic: 5 x input)


CACHE_MODELS = ("prefix", "breakpoints")
# Anthropic looks for an earlier cache entry at most about 20 blocks before a breakpoint.
LOOKBACK_BLOCKS = 20


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """How the provider caches.

    ``model`` ``prefix``: the longest common prefix with the previous prompt,
    rounded down to ``granularity`` tokens (``whole_messages``: to the last
    whole message in common). ``breakpoints``: only up to a message boundary
    where an earlier prompt ended or the fixed breakpoint after the first
    message, looked up at most ``lookback`` messages before the end. Entries
    expire ``ttl`` seconds after their last use (None: never).
    """

    granularity: int = 1  # 1: any common prefix counts (prefix match)
    min_tokens: int = 1024  # a shorter prefix is never cached
    model: str = "prefix"
    whole_messages: bool = False
    lookback: int = LOOKBACK_BLOCKS
    ttl: float | None = None

    def __post_init__(self) -> None:
        if self.granularity < 1:
            raise ValueError("cache granularity must be >= 1 token")
        if self.min_tokens < 0:
            raise ValueError("minimum cacheable size must be >= 0 tokens")
        if self.model not in CACHE_MODELS:
            raise ValueError(f"cache model must be one of {', '.join(CACHE_MODELS)}")
        if self.lookback < 0:
            raise ValueError("lookback must be >= 0 messages")
        if self.ttl is not None and not self.ttl > 0:
            raise ValueError("cache ttl must be > 0 seconds")


def _preset(name: str, granularity: int) -> tuple[Prices, CacheSettings]:
    found = PRICE_PRESETS[name]
    prices = Prices(found.input, found.write, found.read, found.output)
    return prices, CacheSettings(granularity, 1024, ttl=found.ttl)


# Published prices (scoutd.pricing): Anthropic caches any prefix of at least
# 1,024 tokens at the breakpoints the client marks; OpenAI from 1,024 tokens on
# in steps of 128.
PRESETS: dict[str, tuple[Prices, CacheSettings]] = {
    "anthropic": _preset("anthropic", 1),
    "anthropic-1h": _preset("anthropic-1h", 1),
    "openai": _preset("openai", 128),
    "openai-4o": _preset("openai-4o", 128),
}


def billed_message(message: Any, chars_per_token: float) -> Any:
    """``message`` with its media as the provider bills them, in every format
    (:mod:`scoutd.strategies.media`: an image by its size, a PDF by its pages, a text
    document by its text, audio by its seconds), not by the characters of their data:
    each a text of as many characters as its tokens take at ``chars_per_token``. A
    screenshot (a Responses computer output) is an image. Unchanged: ``message`` itself."""
    if type(message) is not dict:
        return message
    output = message.get("output")
    if message.get("type") == COMPUTER_OUTPUT and isinstance(output, dict):
        message = {**message, "output": "m" * math.ceil(IMAGE_TOKENS * chars_per_token)}
    for key in ("content", "output"):
        value = message.get(key)
        billed = billed_content(value, chars_per_token)
        if billed is not value:
            message = {**message, key: billed}
    return message


def segment_text(message: Any) -> str:
    """The canonical text of one message in a serialized prompt."""
    if not isinstance(message, Mapping):
        return msgspec.json.encode(message).decode("utf-8") + "\n"
    role = message.get("role")
    content = message.get("content")
    if type(content) is not str:
        content = "" if content is None else msgspec.json.encode(content).decode("utf-8")
    return f"{role}\n{content}\n"


def common_segments(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading segments ``a`` and ``b`` share.

    Compares whole slices (identity first, then C-level string equality) and
    bisects on the first difference, so unchanged messages cost no Python loop.
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] holds, a[:hi] == b[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def common_chars(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (bisection on slices)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class Estimator:
    """Counts tokens: characters / ``chars_per_token``, or a tokenizer callable.

    With the character estimate a prompt of ``c`` characters is ``ceil(c / 4)``
    tokens and a cached prefix of ``c`` characters ``floor(c / 4)`` (a partial
    token is billed, never cached). With a tokenizer, a prompt's tokens are the
    sum over its message segments (counted once per distinct text), and a
    prefix's tokens those of its whole segments plus the partial one.
    """

    def __init__(
        self, tokenizer: Tokenizer | None = None, chars_per_token: float = CHARS_PER_TOKEN
    ) -> None:
        if not chars_per_token > 0 or not math.isfinite(chars_per_token):
            raise ValueError("chars_per_token must be a positive number")
        self.tokenizer = tokenizer
        self.chars_per_token = chars_per_token
        self._memo: dict[str, int] = {}

    def _count(self, text: str) -> int:
        assert self.tokenizer is not None
        found = self._memo.get(text)
        if found is None:
            found = int(self.tokenizer(text))
            if found < 0:
                raise ValueError("the tokenizer returned a negative count")
            self._memo[text] = found
        return found

    def prompt(self, segments: Sequence[str]) -> int:
        """Tokens of a whole prompt."""
        if self.tokenizer is None:
            return math.ceil(sum(map(len, segments)) / self.chars_per_token)
        return sum(map(self._count, segments))

    def prefix(self, segments: Sequence[str], whole: int, partial: str) -> int:
        """Tokens of ``segments[:whole]`` followed by ``partial`` (a cached prefix)."""
        if self.tokenizer is None:
            chars = sum(map(len, segments[:whole])) + len(partial)
            return math.floor(chars / self.chars_per_token)
        tokens = sum(map(self._count, segments[:whole]))
        return tokens + (int(self.tokenizer(partial)) if partial else 0)

    def text(self, text: str) -> int:
        """Tokens of one piece of text (the estimate used by the peer emulations)."""
        if self.tokenizer is None:
            return math.ceil(len(text) / self.chars_per_token)
        return self._count(text)


@dataclass(frozen=True, slots=True)
class RoundCost:
    """The cache and cost outcome of one round."""

    prompt_tokens: int
    cached_tokens: int  # read from the cache
    written_tokens: int  # written to the cache (billed at the write price)
    input_tokens: int  # neither read nor written (billed at the input price)
    cost: float
    # The cache could not reuse all of the previous prompt: part of what it held
    # was invalidated by a change and is written again.
    cache_break: bool
    invalidated_tokens: int  # cacheable tokens of the previous prompt not reused now


class CacheModel:
    """Feeds rounds through the cache, one serialized prompt after another."""

    def __init__(
        self,
        prices: Prices | None = None,
        settings: CacheSettings | None = None,
        estimator: Estimator | None = None,
    ) -> None:
        self.prices = prices or Prices()
        self.settings = settings or CacheSettings()
        self.estimator = estimator or Estimator()
        self._previous: Sequence[str] = ()
        self._previous_whole = 0  # tokens of the previous prompt that can be cached
        self._previous_time = 0.0
        self._hashes: list[int] = []  # prefix hash after each segment of the previous prompt
        # breakpoints model: prefix hash -> (tokens, time of last use)
        self._entries: dict[int, tuple[int, float]] = {}

    def _cacheable(self, tokens: int) -> int:
        """Tokens of a prefix that the cache can hold: granular, above the minimum."""
        rounded = tokens - tokens % self.settings.granularity
        return rounded if rounded >= self.settings.min_tokens else 0

    def _alive(self, used: float, now: float) -> bool:
        ttl = self.settings.ttl
        return ttl is None or now - used <= ttl

    def _prefix_hashes(self, segments: Sequence[str], whole: int) -> list[int]:
        hashes = self._hashes[:whole]
        last = hashes[-1] if hashes else 0
        for segment in segments[whole:]:
            last = hash((last, segment))
            hashes.append(last)
        return hashes

    def _prefix_hit(self, segments: Sequence[str], whole: int, now: float) -> int:
        previous = self._previous
        if not previous or not self._alive(self._previous_time, now):
            return 0
        partial = ""
        if not self.settings.whole_messages and whole < len(previous) and whole < len(segments):
            partial = segments[whole][: common_chars(previous[whole], segments[whole])]
        common = self.estimator.prefix(segments, whole, partial)
        return self._cacheable(min(common, self._previous_whole))

    def _breakpoint_hit(self, segments: Sequence[str], hashes: list[int], now: float) -> int:
        entries, count = self._entries, len(segments)
        candidates = [*range(count, max(count - self.settings.lookback, 0) - 1, -1), 1]
        for boundary in candidates:
            if boundary < 1 or boundary > count:
                continue
            entry = entries.get(hashes[boundary - 1])
            if entry is not None and self._alive(entry[1], now):
                entries[hashes[boundary - 1]] = (entry[0], now)  # a read refreshes the entry
                return entry[0]
        return 0

    def _write_breakpoints(self, segments: Sequence[str], hashes: list[int], now: float) -> None:
        """Entries at the fixed breakpoint (after the first message) and at the end."""
        for boundary in {1, len(segments)}:
            if 1 <= boundary <= len(segments):
                tokens = self.estimator.prefix(segments, boundary, "")
                if tokens >= self.settings.min_tokens:
                    self._entries[hashes[boundary - 1]] = (tokens, now)

    def step(self, segments: Sequence[str], now: float = 0.0) -> RoundCost:
        """Account one round whose prompt is the concatenation of ``segments``.

        ``now`` is the round's time in seconds, for the cache lifetime.
        """
        estimator = self.estimator
        prompt = estimator.prompt(segments)
        whole = common_segments(self._previous, segments)
        hashes = self._prefix_hashes(segments, whole)
        if self.settings.model == "breakpoints":
            cached = self._breakpoint_hit(segments, hashes, now)
            self._write_breakpoints(segments, hashes, now)
        else:
            cached = self._prefix_hit(segments, whole, now)
        uncached = prompt - cached
        written = uncached if prompt >= self.settings.min_tokens else 0
        rest = uncached - written
        prices = self.prices
        invalidated = 0
        if self._alive(self._previous_time, now):
            invalidated = max(0, self._cacheable(self._previous_whole) - cached)
        cost = cached * prices.read + written * prices.write + rest * prices.input
        result = RoundCost(
            prompt_tokens=prompt,
            cached_tokens=cached,
            written_tokens=written,
            input_tokens=rest,
            cost=cost,
            cache_break=invalidated > 0,
            invalidated_tokens=invalidated,
        )
        self._previous = segments
        self._previous_time = now
        self._hashes = hashes
        # Only a prompt large enough to be cached can be read back next round.
        cacheable = prompt >= self.settings.min_tokens
        self._previous_whole = estimator.prefix(segments, len(segments), "") if cacheable else 0
        return result
