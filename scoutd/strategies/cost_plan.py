"""The replay of ``shorten_tools_cost_aware``'s decisions (docs/ECONOMY.md).

:func:`plan_compaction` replays the decision the strategy would have taken at
every round of the conversation and returns the bands after the last one; the
rule itself is described in :mod:`scoutd.strategies.cost_aware`, which
re-exports these names.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..config import PromptConfig
from ..pricing import CachePrices
from .retention import NOTHING, Kept, PairCalls, retain

__all__ = ["Decision", "Plan", "Replay", "Tokens", "fit_sent", "plan_compaction", "unmet_test"]

# The report's projection of when a compaction will pay (.projection) takes each
# later round to add what a round added over this many rounds before (or all of
# them, when fewer): on the recorded real runs the recent rounds foretell the next
# ones better than the average since the start (docs/ECONOMY.md).
GROWTH_ROUNDS = 30


class Tokens(Protocol):
    """The prefix sums a plan reads (``cost_aware``'s counts; ``cost_rounds``' grown ones).

    ``cumulative[m]``: tokens of the first ``m`` messages; ``whole[k]`` and
    ``shortened[k]``: of the first ``k`` pairs, whole or shortened (with the
    assistant remarks that belong to them); ``bare[k]``: whole, without them;
    ``output_end[k]``: one past pair ``k``'s output; ``head``: the tokens
    before the first tool message.
    """

    cumulative: list[int]
    whole: list[int]
    bare: list[int]
    shortened: list[int]
    output_end: list[int]
    head: int
    calls: PairCalls  # what each pair's call does, for the retention

    def saved(self, dropped: int, shortened: int) -> int:
        """Tokens a plan removes from the prompt."""
        ...


@dataclass(frozen=True, slots=True)
class Decision:
    """The figures the rule read at the last round replayed, for the report's reason.

    ``weighed``: a compaction further than the current bands was weighed (else
    no output had left the verbatim band since the last decision); then
    ``removed``, ``rewrite``, ``carried`` and ``billed`` are the values the
    rule compared, ``compacted`` whether it compacted. Tokens are counts,
    costs are in uncached input tokens (docs/ECONOMY.md, the model).
    """

    round: int
    prompt: int  # with the bands in force before this round's decision
    full: int  # outputs kept verbatim at this round
    trigger: float
    limit: float
    forced: bool
    weighed: bool
    compacted: bool
    removed: int = 0
    rewrite: float = 0.0
    carried: float = 0.0
    billed: float = 0.0
    batch: float = 1.0  # the rent-or-buy factor, 1 / (1 - cost_verbatim_value)
    read: float = 0.0
    write: float = 0.0
    horizon: float = 0.0  # the rounds expected to remain
    risk: float = 0.0
    growth: float = 0.0  # tokens a round added to the prompt, over the last GROWTH_ROUNDS

    def unmet(self) -> str | None:
        """The first test of the rule (in the order :func:`plan_compaction` makes them)
        that this round failed, None when it compacted or the bands did not move."""
        if self.compacted or not self.weighed:
            return None
        return unmet_test(self, self.prompt, self.carried, self.removed, self.horizon, self.billed)


def unmet_test(
    decision: Decision, prompt: float, carried: float, removed: float, horizon: float, billed: float
) -> str | None:
    """The first of the rule's tests that fails for these figures (the loop's ``pays``, term by
    term: ``trigger``, ``rent`` (rent-or-buy), ``horizon``, ``risk``), None when all pass."""
    rewrite = decision.rewrite
    if not prompt >= decision.trigger:
        return "trigger"
    if not carried >= decision.batch * rewrite:
        return "rent"
    if not removed * decision.read * horizon >= rewrite:
        return "horizon"
    if not rewrite <= decision.risk * billed:
        return "risk"
    return None


@dataclass(frozen=True, slots=True)
class Plan:
    """The bands after the last decision, in oldest-first output numbers.

    Pairs ``<= dropped`` are removed, pairs ``<= shortened`` are shortened, the
    rest are whole; ``decided_at`` is the round (output number) of the last
    decision (0: never compacted); ``kept``: the pairs ``<= shortened`` that
    the decision keeps whole all the same (:func:`.retention.retain`), with why.
    ``decision``: the figures of the last round (for the report; not part of
    the bands, so not compared).
    """

    dropped: int
    shortened: int
    decided_at: int
    kept: Kept = NOTHING
    decision: Decision | None = field(default=None, compare=False)
    kept_tokens: int = field(default=0, compare=False)  # what ``kept`` puts back


def _fit(tokens: Tokens, number: int, full: int, band: int, limit: float) -> tuple[int, int]:
    """The least compaction at round ``number`` that keeps ``full`` outputs whole, or fits.

    First the fewest pairs shortened (with the band of shortened ones before
    the dropped ones), then the fewest dropped. What a plan saves never
    decreases as it shortens or drops more, so each is found by bisection: a
    round costs ``log(number)`` whatever ``full`` and ``band`` are, where a
    step at a time made a run of ``n`` rounds cost ``n * n`` when an override
    set both far above the rounds (docs/RELIABILITY.md, "What a client may
    configure").
    """
    prompt = tokens.cumulative[tokens.output_end[number]]
    least = max(0, number - full)

    def fits_shortened(shortened: int) -> bool:
        return prompt - tokens.saved(max(0, shortened - band), shortened) <= limit

    # the first count from `least` on that fits; `number` when none before it does
    shortened = least + bisect_left(range(least, number), True, key=fits_shortened)
    start = max(0, shortened - band)

    def fits_dropped(dropped: int) -> bool:
        return prompt - tokens.saved(dropped, shortened) <= limit

    return start + bisect_left(range(start, number), True, key=fits_dropped), shortened


@dataclass(slots=True)
class Replay:
    """Where a replay stopped, so that a session replays only its new rounds."""

    rounds: int = 0
    dropped: int = 0
    shortened: int = 0
    decided: int = 0
    carried: float = 0.0
    billed: float = 0.0
    previous: int = 0
    decision: Decision | None = None  # the last round's, for a call with no new round
    kept: Kept = NOTHING
    kept_tokens: int = 0  # what ``kept`` puts back into the prompt, as retain() counted it


def _growth(tokens: Tokens, outputs: int, whole: int) -> float:
    """Tokens a round added to the whole prompt over the last ``GROWTH_ROUNDS`` rounds."""
    since = max(0, outputs - GROWTH_ROUNDS)
    before = tokens.head if since == 0 else tokens.cumulative[tokens.output_end[since]]
    return (whole - before) / (outputs - since) if outputs > since else 0.0


def plan_compaction(
    tokens: Tokens,
    outputs: int,
    config: PromptConfig,
    prices: CachePrices,
    replay: Replay | None = None,
    notice: int = 0,
) -> Plan:
    """Replay the decision of every round up to ``outputs`` and return the last bands.

    ``replay``, when given, is where an earlier call over the same first rounds
    stopped: only the rounds after it are replayed, and it is moved forward.
    ``notice``: the tokens of the notice a compacted prompt holds, which the
    limit must hold too.

    The loop runs once per round of the conversation, so it reads the prefix
    sums directly and keeps the tokens the current bands save instead of
    asking :meth:`Tokens.saved` again (docs/PERFORMANCE.md); the arithmetic,
    and its order for the floating-point sums, is that of the rule above.
    """
    window = config.context_window
    trigger = config.compaction_trigger_share * window
    limit = config.compaction_limit_share * window
    room = limit - notice  # for a compacted prompt: the limit less its notice
    least_full, band = config.cost_full_tool_outputs, config.cost_compacted_tool_calls
    full_share, share_cap = config.cost_full_share, config.cost_full_share_cap
    read, write = prices.read, prices.write
    premium = max(write - read, 0.0)
    risk, horizon_share, head = config.compaction_risk_share, config.expected_horizon, tokens.head
    whole, short = tokens.whole, tokens.shortened
    # Valuing verbatim rounds lengthens the rent-or-buy cycle (docs/ECONOMY.md).
    batch = 1.0 / (1.0 - config.cost_verbatim_value)
    keep_share, lookback = config.cost_keep_share, config.cost_keep_lookback
    # not mutated: a fresh replay of every round ends in the same plan (tested), only slower
    state = Replay() if replay is None else replay  # pragma: no mutate
    dropped, shortened, decided, kept = state.dropped, state.shortened, state.decided, state.kept
    kept_in_force = state.kept_tokens
    carried = state.carried  # read cost paid since the last decision for what a compaction removes
    billed = state.billed  # the estimated bill so far, with this plan
    previous = state.previous
    decision = state.decision
    weighed, paid, bill = 0, 0.0, 0.0  # the last round weighed, and its figures at a compaction
    # what the current bands remove
    saving = tokens.saved(dropped, shortened) - kept_in_force
    cumulative = tokens.cumulative
    counts, calls = (whole, short, tokens.bare), tokens.calls
    first = state.rounds + 1
    # The whole prompt at the end of each round, before any compaction.
    ends = map(cumulative.__getitem__, tokens.output_end[first : outputs + 1])
    for number, whole_prompt in enumerate(ends, first):
        # min() and max() spelt as comparisons: the same values, without a call each.
        # Not mutated (the lines so marked): at the equality of such a comparison
        # both sides give the same value, and between two decisions the prompt
        # never shrinks, so the else branch below only completes min() and max()
        prompt = whole_prompt - saving
        if prompt >= previous:  # pragma: no mutate
            billed += previous * read + (prompt - previous) * write
        else:
            billed += prompt * read + 0 * write  # pragma: no mutate
        previous = prompt
        forced = prompt > (room if shortened else limit)
        full = int(number * full_share)
        full = share_cap if share_cap < full else full  # pragma: no mutate
        full = full if full > least_full else least_full  # pragma: no mutate
        new_shortened = number - full
        if new_shortened <= shortened and not forced:
            continue
        # _fit, whose loops only run when the least compaction does not fit
        new_shortened = new_shortened if new_shortened > 0 else 0
        # not mutated: at new_shortened == band both sides give 0
        new_dropped = new_shortened - band if new_shortened > band else 0  # pragma: no mutate
        new_saving = whole[new_shortened] - short[new_shortened] + short[new_dropped]
        if whole_prompt - new_saving > room:
            new_dropped, new_shortened = _fit(tokens, number, full, band, room)
            new_saving = tokens.saved(new_dropped, new_shortened)
        if new_dropped < dropped or (new_dropped == dropped and new_shortened <= shortened):
            continue  # no further than the current bands
        new_prompt = whole_prompt - new_saving
        removed = prompt - new_prompt
        carried += removed * read
        # not mutated: a prompt always holds its head, and at equality both sides give 0
        rewrite = (new_prompt - head if new_prompt > head else 0) * premium  # pragma: no mutate
        weighed = number  # the last round weighed, for the report (Decision)
        pays = (
            prompt >= trigger
            and carried >= batch * rewrite
            and removed * read * (number * horizon_share) >= rewrite
            and rewrite <= risk * billed
        )
        if not (forced or pays) and number < outputs:
            continue
        # What the compaction keeps whole besides (.retention): at most a share of what
        # it removes, so it still removes most; it must pay all the same, or wait. At the
        # last round it is weighed even when the compaction does not pay, so that the
        # report's figures (Decision) are those of the compaction that would come. A
        # forced compaction keeps nothing besides: at the window, what is kept would
        # only bring the next forced one (a rewrite) sooner.
        budget = 0 if forced else int(keep_share * removed)
        new_kept: tuple[int, ...] = ()
        kept_tokens = 0
        if budget > 0:  # else none is looked at (nor classified)
            keys = calls.keys_to(number)
            bands = (new_dropped, new_shortened)
            new_kept, kept_tokens = retain(keys, counts, number, bands, budget, lookback)
        if new_kept:
            kept_saving = new_saving - kept_tokens
            kept_prompt = whole_prompt - kept_saving
            kept_removed = prompt - kept_prompt
            # not mutated: a prompt always holds its head, and at equality both sides give 0
            kept_rewrite = (
                kept_prompt - head if kept_prompt > head else 0
            ) * premium  # pragma: no mutate
            removed, rewrite = kept_removed, kept_rewrite  # what it compares (or waits with)
            if not (
                pays
                and carried >= batch * kept_rewrite
                and kept_removed * read * (number * horizon_share) >= kept_rewrite
                and kept_rewrite <= risk * billed
            ):
                continue
            new_saving, new_prompt = kept_saving, kept_prompt
        if not (forced or pays):
            continue
        paid, bill = carried, billed  # as the rule read them, for the report
        dropped, shortened, decided = new_dropped, new_shortened, number
        kept = calls.found.kept(new_kept) if new_kept else NOTHING
        kept_in_force = kept_tokens
        saving = new_saving
        carried = 0.0
        billed += rewrite - removed * read
        previous = new_prompt
    if outputs >= first:  # the last round was replayed here: what the rule read at it
        compacted = decided == outputs
        decision = Decision(
            round=outputs,
            prompt=prompt,
            full=full,
            trigger=trigger,
            limit=limit,
            forced=forced,
            weighed=weighed == outputs,
            compacted=compacted,
            removed=removed if weighed == outputs else 0,
            rewrite=rewrite if weighed == outputs else 0.0,
            carried=paid if compacted else carried,
            billed=bill if compacted else billed,
            batch=batch,
            read=read,
            write=write,
            horizon=outputs * horizon_share,
            growth=_growth(tokens, outputs, whole_prompt),
            risk=risk,
        )
    # not mutated: with no new round (equality) the replay holds these values already
    if replay is not None and outputs > replay.rounds:  # pragma: no mutate
        replay.rounds, replay.dropped, replay.shortened = outputs, dropped, shortened
        replay.decided, replay.carried, replay.billed = decided, carried, billed
        replay.previous, replay.kept, replay.decision = previous, kept, decision
        replay.kept_tokens = kept_in_force
    return Plan(dropped, shortened, decided, kept, decision, kept_in_force)


def fit_sent(plan: Plan, tokens: Tokens, outputs: int, config: PromptConfig, notice: int) -> Plan:
    """``plan``, compacted further when the prompt sent would pass the limit.

    The replay weighs each round's prompt up to its output. The prompt sent at
    the last round also holds what follows that output (user turns, a call still
    waiting) and, once compacted, the notice (``notice`` tokens): when they take
    it past ``compaction_limit_share`` of the window, what the plan kept besides
    its bands goes, then the least further compaction that fits is taken, as a
    forced compaction does. The replay is left as it was (the next round weighs
    this one without them), so a session's plan stays the whole replay's.
    """
    limit = config.compaction_limit_share * config.context_window
    total = tokens.cumulative[-1]
    extra = total - tokens.cumulative[tokens.output_end[outputs]] + notice
    sent = total - tokens.saved(plan.dropped, plan.shortened) + plan.kept_tokens
    if plan.shortened:
        sent += notice
    if sent <= limit:
        return plan
    dropped, shortened = plan.dropped, plan.shortened
    if not shortened or sent - plan.kept_tokens > limit:
        full = _verbatim(outputs, config)
        fits = _fit(tokens, outputs, full, config.cost_compacted_tool_calls, limit - extra)
        dropped, shortened = max(dropped, fits[0]), max(shortened, fits[1])
    removed = sent - (total - tokens.saved(dropped, shortened) + notice)
    decision = plan.decision
    if decision is not None:  # the report says why: the prompt was over the limit
        decision = replace(
            decision,
            prompt=sent,
            forced=True,
            weighed=True,
            compacted=True,
            removed=removed if removed > 0 else 0,
        )
    return Plan(dropped, shortened, outputs, NOTHING, decision)


def _verbatim(number: int, config: PromptConfig) -> int:
    """The outputs kept verbatim at round ``number``: a share of the outputs so far,
    capped, and at least ``cost_full_tool_outputs``."""
    full = min(int(number * config.cost_full_share), config.cost_full_share_cap)
    return max(full, config.cost_full_tool_outputs)
