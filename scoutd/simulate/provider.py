"""Replay a conversation in its provider's own format, priced as the provider bills it.

The scout-view replay (:mod:`.replay`) measures what the strategies keep; this
one measures what a provider is sent. A round is every point where the model
is called: just before each assistant turn, and once at the end. Each round's
prompt is prepared in the conversation's format (``scoutd.prepare(...,
format=...)``; a peer emulation runs on the scout view and is rebuilt into the
format the same way) and every provider message is one cache segment, so
prefix caching works at the provider's message granularity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ..engine.prepare import prepare
from ..formats.openai_responses import turn_starts
from ..formats.openai_responses_items import CALL_KINDS
from .cache import CacheModel, billed_message
from .facts import FactTally, Hidden, RunFacts
from .replay import Settings
from .runners import PEERS, make_runner, side_cost

__all__ = [
    "ProviderResult",
    "media_segment",
    "provider_facts",
    "provider_rounds",
    "replay_in_format",
]

# Items of the OpenAI Responses format that the model produces: its reasoning, the calls
# its client answers (function, custom, shell, apply_patch, computer) and the calls of
# the provider's own tools.
_MODEL_ITEMS = CALL_KINDS | {
    "reasoning",
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
    "tool_search_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
}
_encode = msgspec.json.Encoder(order="deterministic").encode


class ProviderResult(msgspec.Struct, kw_only=True):
    """Totals of one strategy over one conversation, in provider messages."""

    strategy: str
    billed: float
    rounds: int
    peak_prompt_tokens: int
    overflow_rounds: int
    failed: bool
    cache_breaks: int
    facts: FactTally | None = None  # the hidden-fact measure (docs/ECONOMY.md)


def _from_model(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    kind = message.get("type")  # compared only as a string: a list is not hashable
    return message.get("role") == "assistant" or (type(kind) is str and kind in _MODEL_ITEMS)


def _made_by_model(messages: Sequence[Any]) -> list[bool]:
    """Whether each message is part of a model response: a model item, or an item the
    Responses adapter keeps in a model turn (a hosted shell's output the provider
    wrote into its response, docs/FORMATS.md)."""
    starts = turn_starts(messages)
    return [_from_model(m) or starts[i] != i for i, m in enumerate(messages)]


def provider_rounds(messages: Sequence[Any]) -> list[int]:
    """Prefix lengths at which the model is called: before each model turn, and at the end.

    A hosted shell's output inside a response is no call: the response goes on."""
    made = _made_by_model(messages)
    ends = [i for i in range(1, len(messages)) if made[i] and not made[i - 1]]
    if messages and (not ends or ends[-1] != len(messages)):
        ends.append(len(messages))
    return ends


def provider_facts(messages: Sequence[Any], format_name: str) -> RunFacts:
    """The hidden-fact index of a provider-format conversation, at the replay's calls."""
    return RunFacts(messages, format_name, provider_rounds(messages))


def _segment(message: Any) -> str:
    return _encode(message).decode("utf-8", "replace") + "\n"


def media_segment(message: Any, chars_per_token: float) -> str:
    """A message's segment, its media billed as the provider bills them
    (:func:`.cache.billed_message`)."""
    return _segment(billed_message(message, chars_per_token))


def replay_in_format(
    messages: Sequence[Any],
    format_name: str,
    name: str,
    settings: Settings,
    *,
    facts: RunFacts | None = None,
    record: Callable[[Hidden], None] | None = None,
) -> ProviderResult:
    """Replay ``messages`` (in ``format_name``) under one strategy and total the bill.

    With ``facts`` (:func:`provider_facts` of the same messages) every call's
    prompt is also measured for hidden facts, each given to ``record``.
    """
    calls = facts.calls_at() if facts is not None else {}
    tally = FactTally()
    model = CacheModel(settings.prices, settings.cache, settings.estimator)
    config = settings.config
    peer = make_runner(name, settings.peers, settings.estimator) if name in PEERS else None
    conversation = list(messages)
    per_token = settings.estimator.chars_per_token

    def segment(message: Any) -> str:
        return media_segment(message, per_token)

    texts = {id(m): segment(m) for m in conversation}
    billed = 0.0
    peak = overflow = breaks = 0
    ends = provider_rounds(conversation)
    for number, end in enumerate(ends, start=1):
        prefix = conversation[:end]
        if peer is not None:
            prompt = prepare(prefix, peer, format=format_name).messages
        else:
            prompt = prepare(prefix, [name], config=config, format=format_name).messages
        segments = [texts.get(id(m)) or segment(m) for m in prompt]
        if end in calls and facts is not None:
            facts.tally_call(tally, calls[end], prompt, record)
        outcome = model.step(segments, now=number * settings.round_seconds)
        billed += outcome.cost
        if peer is not None:
            billed += side_cost(peer, settings.prices, settings.estimator.chars_per_token)
        breaks += outcome.cache_break
        peak = max(peak, outcome.prompt_tokens)
        overflow += outcome.prompt_tokens > settings.context_window
    return ProviderResult(
        strategy=name,
        billed=billed,
        rounds=len(ends),
        peak_prompt_tokens=peak,
        overflow_rounds=overflow,
        failed=overflow > 0,
        cache_breaks=breaks,
        facts=tally if facts is not None else None,
    )
