"""Provider prompt-cache prices, relative to one uncached input token.

The cost-aware strategy (docs/ECONOMY.md) and the simulator share these
presets. A conversation's format names its provider, so ``"auto"`` prices an
Anthropic Messages conversation at Anthropic's prices and an OpenAI one at
OpenAI's; a conversation whose format is unknown (scoutd's own tool roles)
gets Anthropic's, the dearer rewrite, so that the strategy errs towards
compacting less often.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AUTO",
    "DEFAULT_PRESET",
    "PRICE_PRESETS",
    "CachePrices",
    "preset_for_format",
    "prices_for_format",
]

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class CachePrices:
    """Price of each kind of input token, relative to an uncached input token.

    ``ttl`` is how long, in seconds, an entry stays in the cache after its
    last use (the provider's cache lifetime). ``output`` is the price of a
    generated token, which a peer that calls a model of its own to summarise
    (the simulator's ``summarize``) pays for the summary it writes.
    """

    input: float = 1.0
    write: float = 1.25
    read: float = 0.1
    ttl: float = 300.0
    output: float = 5.0


# Published ratios: Anthropic writes at 1.25x (5-minute cache) or 2x (1-hour
# cache) and reads at 0.1x; OpenAI has no write premium and reads at 0.1x on
# current models (GPT-4.1 and later, and DeepSeek), 0.5x on GPT-4o. Output
# tokens, from the same price pages: Anthropic 5x input on every current model
# (Haiku, Sonnet, Opus: $1/$5, $3/$15, $15/$75 per million); OpenAI 4x on
# GPT-4.1 ($2/$8) and GPT-4o ($2.50/$10), the lower of its current ratios
# (GPT-5 is 8x), so that a summarising peer is never over-billed.
PRICE_PRESETS: dict[str, CachePrices] = {
    "anthropic": CachePrices(1.0, 1.25, 0.1, 300.0, 5.0),
    "anthropic-1h": CachePrices(1.0, 2.0, 0.1, 3600.0, 5.0),
    "openai": CachePrices(1.0, 1.0, 0.1, 600.0, 4.0),
    "openai-4o": CachePrices(1.0, 1.0, 0.5, 600.0, 4.0),
}
DEFAULT_PRESET = "anthropic"

_FORMAT_PRESETS = {
    "anthropic": "anthropic",
    "anthropic-messages": "anthropic",
    "openai": "openai",
    "openai-chat": "openai",
    "chat": "openai",
    "openai-responses": "openai",
    "responses": "openai",
}


def preset_for_format(format_name: str | None) -> str:
    """The price preset of a conversation format (``anthropic`` when unknown)."""
    if not format_name:
        return DEFAULT_PRESET
    return _FORMAT_PRESETS.get(format_name.lower(), DEFAULT_PRESET)


def prices_for_format(format_name: str | None) -> CachePrices:
    """The default prices of a conversation format's provider."""
    return PRICE_PRESETS[preset_for_format(format_name)]
