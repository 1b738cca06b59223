"""``shorten_tools_cost_aware``, the default: compact only when it pays.

A provider's prompt cache bills a prompt's unchanged prefix at the read price
and everything after the first change at the write price. Compacting old tool
traffic makes every later prompt smaller, but rewrites the compacted prompt
once. This strategy replays the decision it would have taken at every earlier
round (each tool output ends a round), so the bands only move at a decision and
the prompt only grows at its end between two decisions. At a round it compacts
when all of these hold (derivation in docs/ECONOMY.md):

- the prompt is at least ``compaction_trigger_share`` of ``context_window``;
- the read cost already paid for what a compaction would remove, summed since
  the last decision, has reached the rewrite's extra cost
  (``rewritten tokens * (write - read)``) times ``1 / (1 - cost_verbatim_value)``:
  the rent-or-buy rule, which removes about
  ``sqrt(2 * growth * rewrite / (read * (1 - cost_verbatim_value)))`` tokens at
  once (valuing verbatim rounds lengthens the cycle, the cheapest way to keep
  more outputs verbatim on average);
- the saving over the expected remaining rounds (``expected_horizon`` times the
  rounds so far) repays the rewrite.

Above ``compaction_limit_share`` of the window it always compacts, as far as
needed to fit. The newest ``cost_full_tool_outputs`` outputs stay verbatim,
or ``cost_full_share`` of the outputs so far, at most ``cost_full_share_cap``,
when that is more (fewer only when they alone would not fit); the
``cost_compacted_tool_calls`` pairs before them are shortened as in the epoch
strategies, and older pairs are dropped, repeated calls included (the default
notice says so), together with the assistant remarks made among them; user
turns always stay. Besides, a compaction keeps whole the newest whole read of
each file and run of each search among the ``cost_keep_lookback`` pairs
before the whole ones, up to ``cost_keep_share`` of what it removes
(:mod:`.retention`), and must still pay with them, or wait.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import replace
from itertools import accumulate, compress, islice, repeat
from operator import add, and_, gt, le, lt, ne, not_
from typing import Any

from ..config import PromptConfig
from ..pricing import AUTO, PRICE_PRESETS, CachePrices, prices_for_format
from ..protocol.report import Reason
from .base import Builtin, PrepareContext, Rounds
from .columns import Columns
from .cost_notice import compaction_notice, notice_estimate
from .cost_plan import Plan, fit_sent, plan_compaction
from .epoch import Window
from .reasons import RowReason, band_reasons, plan_reason, uncompacted_reasons
from .report import Changes, StrategyReport, apply_changes
from .retention import NOTHING, Kept, PairCalls
from .rewrites import RewriteCache, shortened, shortened_call, sized_call
from .tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TokenCounter,
    _CharEstimate,
    load_tokenizer,
    token_counter,
    tokens_and_media,
)
from .tool_messages import (
    ARGUMENT_SIZE,
    OUTPUT_SIZE,
    Handed,
    ToolIndex,
    index_tools,
)

__all__ = [
    "COST_AWARE",
    "TokenCounter",
    "apply_plan",
    "load_tokenizer",
    "shorten_tools_cost_aware",
    "token_counter",
]

NAME = "shorten_tools_cost_aware"
# Characters of a shortened tool message beyond its kept text: marker, JSON keys, id.
SHORTENED_OVERHEAD_CHARS = 120
# The text that stands for a shortened message's kept text, counted for its size.
_FILLER = "x"  # pragma: no mutate (any one letter stands for the length alike)
# The role of the model's remarks between tool calls, dropped with their pair.
REMARK_ROLE = "assistant"


def effective_prices(config: PromptConfig, format_name: str | None = None) -> CachePrices:
    """The prices the strategy assumes: the preset (``auto``: from the format), then overrides."""
    if config.cache_pricing == AUTO:
        base = prices_for_format(format_name)
    else:
        base = PRICE_PRESETS[config.cache_pricing]
    return replace(
        base,
        write=base.write if config.cache_write_price is None else config.cache_write_price,
        read=base.read if config.cache_read_price is None else config.cache_read_price,
    )


def _remarks(index: ToolIndex) -> list[tuple[int, int]]:
    """``(message index, pair number)`` of each assistant remark among the tool traffic.

    A remark belongs to the pair of the next tool message: it is what the model
    said before that call, and it is dropped with it (a remark after the newest
    output, or before the first tool message, belongs to no pair).
    """
    found: list[tuple[int, int]] = []
    indices, numbers, outputs = index.indices, index.numbers, index.outputs
    if not indices:
        return found
    start, stop = indices[0] + 1, indices[-1]
    # the positions in between whose role is the remark role, found without a Python loop
    others = map(ne, index.roles[start:stop], repeat(REMARK_ROLE))
    for position in compress(range(start, stop), map(not_, others)):
        number = numbers[bisect_left(indices, position)]  # the next tool message's
        if number <= outputs:
            found.append((position, number))
    return found


def sent_with_media(
    per_message: Sequence[int],
    media: Sequence[tuple[int, int]],
    index: ToolIndex,
    limit: int,
    offset: int = 0,
) -> list[tuple[int, int]]:
    """``(pair number, tokens)`` to add to the shortened count of each output whose text
    is too short to shorten but whose media are not: the rewrite leaves it as it was,
    and it is sent with its media (.media).

    ``media``: :func:`~.tokens.tokens_and_media`'s, of the messages from ``offset``
    on; ``limit``: the count of a shortened output (``min(tokens, limit)`` before).
    """
    found = []
    indices = index.indices
    for at, added in media:
        tokens = per_message[at]
        if tokens <= limit or tokens - added > limit:
            continue  # counted whole already, or its text is shortened (media with it)
        slot = bisect_left(indices, at + offset)
        if slot < len(indices) and indices[slot] == at + offset and not index.is_call[slot]:
            found.append((index.numbers[slot], tokens - limit))
    return found


def sent_calls(
    messages: Sequence[Any],
    per_message: Sequence[int],
    index: ToolIndex,
    slots: Iterable[int],
    limit: int,
    count: TokenCounter,
) -> list[tuple[int, int]]:
    """``(pair number, tokens)`` to add to the shortened count of each call of ``slots``
    that its shortening leaves above ``limit`` (the count of a shortened call).

    Only long top-level strings are shortened: arguments that nest long strings,
    are not an object, hold many medium strings or three long ones, or a long
    tool name, are sent longer than the bound, so such a call counts as the
    rewrite sends it (its whole count when nothing is shortened). ``per_message``:
    :func:`~.tokens.tokens_and_media`'s counts of every message.
    """
    found = []
    indices, numbers = index.indices, index.numbers
    # the estimate reads a text's length only: one as long as the rewrite will do
    rewrite = sized_call if type(count) is _CharEstimate else shortened_call
    for slot in slots:
        tokens = per_message[indices[slot]]
        if tokens <= limit:
            continue  # counted whole already
        new = rewrite(index.bodies[slot], index.content(messages, slot))
        if new is not None:
            tokens = count(new) + MESSAGE_OVERHEAD_TOKENS
        if tokens > limit:
            found.append((numbers[slot], tokens - limit))
    return found


class _Tokens:
    """Token counts of the conversation, by message and by pair, as prefix sums.

    A pair's counts include the assistant remarks that belong to it (kept
    whole when the pair is shortened, dropped with it).
    """

    def __init__(
        self,
        messages: Sequence[Any],
        index: ToolIndex,
        count: TokenCounter,
        remarks: list[tuple[int, int]] | None = None,
        columns: Columns | None = None,
    ) -> None:
        """``remarks``: ``_remarks(index)`` when the caller has it already; ``columns``:
        ``messages``' roles and contents when read already."""
        per_message, media = tokens_and_media(messages, count, columns)
        self.cumulative = [0, *accumulate(per_message)]
        outputs = index.outputs
        whole = [0] * (outputs + 1)
        shortened = [0] * (outputs + 1)
        self.output_end = output_end = [0] * (outputs + 1)  # message index + 1 of each output
        limits = (
            count(_FILLER * (OUTPUT_SIZE + SHORTENED_OVERHEAD_CHARS)) + MESSAGE_OVERHEAD_TOKENS,
            count(_FILLER * (2 * ARGUMENT_SIZE + SHORTENED_OVERHEAD_CHARS))
            + MESSAGE_OVERHEAD_TOKENS,
        )
        if type(count) is _CharEstimate and index.alternating:
            # Integer counts, pair k at slots 2k-2 and 2k-1: the same sums pair by pair
            pair_tokens = list(map(per_message.__getitem__, index.indices))
            calls, outputs_only = pair_tokens[::2], pair_tokens[1::2]
            call_limit, output_limit = limits[True], limits[False]
            whole[1:] = map(add, calls, outputs_only)
            shortened[1:] = [
                (call_limit if call_limit < call else call)
                + (output_limit if output_limit < out else out)
                for call, out in zip(calls, outputs_only, strict=True)
            ]
            output_end[1:] = map(add, index.indices[1::2], repeat(1))
        else:
            tool_tokens = map(per_message.__getitem__, index.indices)
            for number, position, tokens, is_call in zip(
                index.numbers, index.indices, tool_tokens, index.is_call, strict=True
            ):
                if number > outputs:
                    continue  # a call still waiting for its output
                whole[number] += tokens
                limit = limits[is_call]
                shortened[number] += limit if limit < tokens else tokens  # min(tokens, limit)
                if not is_call:
                    output_end[number] = position + 1
        for number, added in sent_with_media(per_message, media, index, limits[False]):
            if number <= outputs:
                shortened[number] += added
        # the calls over the bound, found without a Python loop over every slot
        over = map(gt, map(per_message.__getitem__, index.indices), repeat(limits[True]))
        call_slots = compress(range(len(index.indices)), map(and_, index.is_call, over))
        long_calls = sent_calls(messages, per_message, index, call_slots, limits[True], count)
        for number, added in long_calls:
            if number <= outputs:
                shortened[number] += added
        self.bare = list(accumulate(whole))  # without the remarks
        for position, number in _remarks(index) if remarks is None else remarks:
            whole[number] += per_message[position]
            shortened[number] += per_message[position]
        self.whole = list(accumulate(whole))
        self.shortened = list(accumulate(shortened))
        first_tool = index.indices[0] if index.indices else len(messages)
        self.head = self.cumulative[first_tool]  # never rewritten by a compaction
        self.calls = PairCalls(index)

    def saved(self, dropped: int, shortened: int) -> int:
        """Tokens a plan removes from the prompt."""
        kept_short = self.shortened[shortened] - self.shortened[dropped]
        return self.whole[shortened] - kept_short


def notice_tokens(config: PromptConfig, count: TokenCounter) -> int:
    """What a compaction's notice adds to the prompt, as the plan counts it."""
    return count(notice_estimate(config)) + MESSAGE_OVERHEAD_TOKENS


def shorten_tools_cost_aware(
    messages: Sequence[Any],
    config: PromptConfig,
    *,
    detail: bool = False,
    format_name: str | None = None,
    columns: Columns | None = None,
    given: Handed | None = None,
    rewrites: RewriteCache | None = None,
) -> tuple[list[Any], StrategyReport]:
    """Apply ``shorten_tools_cost_aware`` to ``messages``.

    ``format_name`` is the conversation's provider format, used when
    ``cache_pricing`` is ``auto`` (unknown: Anthropic's prices).
    """
    index = index_tools(messages, columns, given)
    if not index.outputs:  # no round ended yet: nothing to compact
        return apply_plan(messages, index, Plan(0, 0, 0), config, detail, [], columns)
    remarks = _remarks(index)  # read by the counts and by the compaction: found once
    count = token_counter(config)
    tokens = _Tokens(messages, index, count, remarks, columns)
    if type(count) is not _CharEstimate:
        columns = None  # a tokenizer is code of its own: read the messages afresh after it
    notice = notice_tokens(config, count)
    prices = effective_prices(config, format_name)
    plan = plan_compaction(tokens, index.outputs, config, prices, notice=notice)
    plan = fit_sent(plan, tokens, index.outputs, config, notice)
    return apply_plan(messages, index, plan, config, detail, remarks, columns, rewrites)


def apply_plan(
    messages: Sequence[Any],
    index: ToolIndex,
    plan: Plan,
    config: PromptConfig,
    detail: bool,
    remarks: list[tuple[int, int]] | None = None,
    columns: Columns | None = None,
    rewrites: RewriteCache | None = None,
) -> tuple[list[Any], StrategyReport]:
    """The prompt and report of ``plan`` over ``messages`` (``remarks``: ``_remarks(index)``,
    ``columns``: ``messages``' roles and contents when read already, ``rewrites``: a
    session's)."""
    reason = plan_reason(plan, config)  # why it compacted, or did not (docs/STRATEGIES.md)
    if plan.shortened:
        outputs = index.outputs
        window = Window(
            # not mutated: _compact reads only the two bands, never these two
            pinned=plan.decided_at,  # pragma: no mutate
            size=0,  # pragma: no mutate
            keep_full=outputs - plan.shortened,
            truncate_to=outputs - plan.dropped,
        )
        if remarks is None:
            remarks = _remarks(index)
        return _compact(
            messages,
            index,
            window,
            config,
            detail,
            remarks,
            columns,
            rewrites,
            reason,
            plan.kept,
        )
    why = uncompacted_reasons(index) if detail else None
    return apply_changes(
        NAME, messages, index, Changes(), detail=detail, columns=columns, reason=reason, why=why
    )


def _bands(index: ToolIndex, window: Window) -> tuple[list[int], list[int]]:
    """The slots to drop (positions past ``truncate_to``) and to shorten (past ``keep_full``).

    A slot's position is ``outputs + 1 - number``. When the numbers never go
    down (tools in conversation order, the usual case) each band is a run of
    slots found by bisection; otherwise every position is tested.
    """
    keep_full, truncate_to = window.keep_full, window.truncate_to
    numbers = index.numbers
    # numbers paired call, output, ... go 1, 1, 2, 2, ...: no need to look
    if index.alternating or all(map(le, numbers, islice(numbers, 1, None))):
        cut = bisect_right(numbers, index.outputs - truncate_to)
        return list(range(cut)), list(range(cut, bisect_right(numbers, index.outputs - keep_full)))
    positions = index.positions
    slots = range(len(positions))
    dropped = list(compress(slots, map(gt, positions, repeat(truncate_to))))
    # keep_full < position <= truncate_to, tested by map rather than slot by slot
    inside = map(
        and_, map(lt, repeat(keep_full), positions), map(le, positions, repeat(truncate_to))
    )
    return dropped, list(compress(slots, inside))


def _compact(
    messages: Sequence[Any],
    index: ToolIndex,
    window: Window,
    config: PromptConfig,
    detail: bool,
    remarks: list[tuple[int, int]],
    columns: Columns | None = None,
    rewrites: RewriteCache | None = None,
    reason: Reason | None = None,
    kept: Kept = NOTHING,
) -> tuple[list[Any], StrategyReport]:
    """Shorten and drop tool messages by ``window`` and insert the notice.

    ``kept``: pairs inside the bands kept whole all the same (reported as
    protected, with the retention's reason); the remarks of those in the dropped band go,
    as the other dropped pairs' do.
    """
    changes = Changes()
    dropped_pairs = index.outputs - window.truncate_to  # oldest-first numbers up to it
    changes.dropped, truncated = _bands(index, window)
    changes.narration = [at for at, number in remarks if number <= dropped_pairs]
    if kept.numbers:
        whole = frozenset(kept.numbers)
        numbers = index.numbers
        changes.protected = [s for s in [*changes.dropped, *truncated] if numbers[s] in whole]
        changes.dropped = [s for s in changes.dropped if numbers[s] not in whole]
        truncated = [s for s in truncated if numbers[s] not in whole]
    for slot in truncated:
        new = shortened(index, messages, slot, rewrites, config.recall)
        if new is not None:
            changes.rewrites[slot] = new
    notice = compaction_notice(config, index, changes.dropped)
    keep_full = window.keep_full
    why = (
        band_reasons(
            index,
            keep_full,
            window.truncate_to,
            RowReason.NEWEST,
            keep_full,
            dict(zip(kept.numbers, kept.reasons, strict=True)),
        )
        if detail
        else None
    )
    return apply_changes(
        NAME,
        messages,
        index,
        changes,
        notice=notice,
        detail=detail,
        columns=columns,
        reason=reason,
        why=why,
    )


def _run(messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
    return shorten_tools_cost_aware(
        messages,
        ctx.config,
        detail=ctx.detail,
        format_name=ctx.format,
        columns=ctx.columns,
        given=ctx.given,
        rewrites=ctx.rewrites,
    )


# A session carries its plan from round to round (scoutd.strategies.cost_rounds)
COST_AWARE = Builtin(NAME, _run, rounds=Rounds.PLAN)
