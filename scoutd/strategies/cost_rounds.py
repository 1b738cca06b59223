"""The cost-aware default as a session computes it: only the new rounds.

``shorten_tools_cost_aware`` replays its decision at every round of the
conversation (docs/ECONOMY.md). Each round's decision reads only the token
counts of the rounds up to it, so a session keeps the counts (as prefix sums)
and where the replay stopped, and a new round counts and replays only what is
new. :class:`GrowingTokens` reads like the strategy's own token counts, and
:class:`CostPlanner` gives the same plan as the strategy would for the whole
conversation, as long as the counts of the earlier rounds stand: the session
starts a new planner when an older call is paired late (its place moves) or
the conversation is replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from ..config import PromptConfig
from ..protocol.format_names import SCOUT
from .cost_aware import (
    REMARK_ROLE,
    SHORTENED_OVERHEAD_CHARS,
    _Tokens,
    effective_prices,
    notice_tokens,
    sent_calls,
    sent_with_media,
)
from .cost_plan import Plan, Replay, fit_sent, plan_compaction
from .retention import PairCalls
from .tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter, token_counter, tokens_and_media
from .tool_messages import ARGUMENT_SIZE, OUTPUT_SIZE, ToolIndex

__all__ = ["CostPlanner", "GrowingTokens"]


class GrowingTokens(_Tokens):
    """The token counts the cost-aware replay reads, extended as the conversation grows.

    Same attributes as the strategy's counts: ``cumulative`` by message,
    ``whole`` and ``shortened`` by pair (prefix sums; a pair counts the
    assistant remarks before its first message), ``output_end`` and ``head``.
    A call still waiting for its output counts from the round its number
    reaches; until then it is pending.
    """

    def __init__(self, count: TokenCounter) -> None:  # the counts start empty
        self.count = count
        self.per_message: list[int] = []
        self.cumulative = [0]
        self.whole = [0]
        self.bare = [0]  # the pairs without their remarks
        self.shortened = [0]
        self.output_end = [0]
        self.head = 0
        self.outputs = 0
        self.slots = 0  # tool slots looked at
        self.pending: list[int] = []  # call slots whose number is past the last output
        self.calls = PairCalls(ToolIndex())  # what each pair's call does: the index's, once given
        overhead = MESSAGE_OVERHEAD_TOKENS
        self.limits = (
            count("x" * (OUTPUT_SIZE + SHORTENED_OVERHEAD_CHARS)) + overhead,
            count("x" * (2 * ARGUMENT_SIZE + SHORTENED_OVERHEAD_CHARS)) + overhead,
        )

    def extend(self, messages: Sequence[Any], index: ToolIndex) -> None:
        """Count the messages and pairs added since the last call (``index`` covers them)."""
        seen = len(self.per_message)
        new, media = tokens_and_media(messages[seen:], self.count)
        per_message = self.per_message
        per_message += new
        self.cumulative += _sums_after(self.cumulative[-1], new)
        base, outputs = self.outputs, index.outputs
        whole = [0] * (outputs - base + 1)
        bare = [0] * (outputs - base + 1)
        shortened = [0] * (outputs - base + 1)
        ends = [0] * (outputs - base + 1)
        pending = []
        calls = []  # the call slots counted at this extension
        indices, numbers, is_call, roles = index.indices, index.numbers, index.is_call, index.roles
        for slot in [*self.pending, *range(self.slots, len(indices))]:
            number = numbers[slot]
            if number > outputs:
                pending.append(slot)
                continue
            position = indices[slot]
            tokens = per_message[position]
            remarks = 0
            if slot:  # the assistant remarks between the previous tool message and this one
                for before in range(indices[slot - 1] + 1, position):
                    if roles[before] == REMARK_ROLE:
                        remarks += per_message[before]
            at = number - base
            whole[at] += tokens + remarks
            bare[at] += tokens
            shortened[at] += min(tokens, self.limits[is_call[slot]]) + remarks
            if is_call[slot]:
                calls.append(slot)
            else:
                ends[at] = position + 1
        for number, added in sent_with_media(new, media, index, self.limits[False], seen):
            shortened[number - base] += added
        long_calls = sent_calls(messages, per_message, index, calls, self.limits[True], self.count)
        for number, added in long_calls:
            shortened[number - base] += added
        self.whole += _sums_after(self.whole[-1], whole[1:])
        self.bare += _sums_after(self.bare[-1], bare[1:])
        self.shortened += _sums_after(self.shortened[-1], shortened[1:])
        self.output_end += ends[1:]
        self.outputs, self.slots, self.pending = outputs, len(indices), pending
        self.head = self.cumulative[indices[0] if indices else len(per_message)]
        if self.calls.index is not index:
            self.calls = PairCalls(index)


def _sums_after(total: int, values: list[int]) -> list[int]:
    """The running sums of ``values`` continuing from ``total``."""
    return list(accumulate(values, initial=total))[1:]


class CostPlanner:
    """The cost-aware plan of a growing scout conversation, replaying only new rounds.

    ``prices``: the format whose provider's prices are assumed (a provider
    session's scout view is priced as its provider's).
    """

    def __init__(self, config: PromptConfig, prices: str = SCOUT) -> None:
        self.tokens = GrowingTokens(token_counter(config))
        self.replay = Replay()
        self.prices = effective_prices(config, prices)

    def plan(self, messages: Sequence[Any], index: ToolIndex, config: PromptConfig) -> Plan:
        """The plan for ``messages`` (the same conversation as before, grown)."""
        self.tokens.extend(messages, index)
        notice = notice_tokens(config, self.tokens.count)
        outputs = index.outputs
        plan = plan_compaction(self.tokens, outputs, config, self.prices, self.replay, notice)
        return fit_sent(plan, self.tokens, outputs, config, notice)  # never replayed
