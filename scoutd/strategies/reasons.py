"""Why a strategy compacted as it did, in an operator's words (docs/STRATEGIES.md, the report).

Two kinds of reason, each a stable code and a sentence:

* the report's :class:`~scoutd.protocol.report.Reason`: why the strategy
  compacted, or did not, at the last round. The default's comes from the
  figures its plan compared at that round (:class:`~.cost_plan.Decision`),
  not from a second computation of them;
* a reason per tool message (``ToolAction.reason`` and ``why``, with
  ``detail``): a :class:`RowReason` and the figure its sentence names. A rule
  added to a strategy's retention adds its member and its sentence to
  :data:`ROW_TEXTS`.

Pure: figures in, text out.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from ..config import PromptConfig
from ..protocol.report import Reason
from .cost_plan import Decision, Plan
from .projection import forecast
from .report import Fate
from .retention import Key, retention_key
from .tool_kinds import READ, call_kind
from .tool_messages import ToolIndex

__all__ = [
    "NEVER",
    "NO_OUTPUTS",
    "ROW_TEXTS",
    "RowReason",
    "RowWhy",
    "band_reasons",
    "epoch_reason",
    "limits_reason",
    "plan_reason",
    "round_reason",
    "row_text",
    "uncompacted_reasons",
]


class RowReason(enum.StrEnum):
    """Why one tool message has its fate (its code in ``ToolAction.reason``)."""

    NEWEST = "newest"  # among the newest outputs the default keeps verbatim
    EPOCH = "epoch"  # in the current epoch, or just before it
    BAND = "band"  # in the band shown shortened
    SHORT = "short"  # in that band, but already no longer than its shortened form
    OLDER = "older"  # older than the band: dropped
    REPEAT = "repeat"  # the latest of a repeated call, kept whole
    UNCOMPACTED = "uncompacted"  # the strategy compacted nothing
    PENDING = "pending"  # a call whose output has not come yet
    KEPT = "kept"  # kept whole out of its band by the default's retention (.retention)


# The sentence of each row reason; ``{n}`` is the figure the strategy gives with it.
ROW_TEXTS: dict[RowReason, str] = {
    RowReason.NEWEST: "verbatim: one of the newest {n} outputs",
    RowReason.EPOCH: "verbatim: in the current epoch, or one of the {n} outputs before it",
    RowReason.BAND: "shortened: in the band of {n} pairs before the verbatim outputs",
    RowReason.SHORT: "kept: in the shortened band, but no longer than its shortened form",
    RowReason.OLDER: "dropped: older than the shortened band",
    RowReason.REPEAT: "kept whole: latest of a repeated call",
    RowReason.UNCOMPACTED: "kept: the strategy compacted nothing",
    RowReason.PENDING: "kept: a call whose output has not come yet",
    RowReason.KEPT: "kept whole: the {n}",
}

RowWhy = Callable[[int, Fate], tuple[str, str]]
"""A strategy's row reasons: ``(slot, fate)`` to the reason's code and sentence."""


def row_text(reason: RowReason, figure: int | str = 0) -> tuple[str, str]:
    """The code and sentence of a row reason with its figure."""
    return reason.value, ROW_TEXTS[reason].format(n=figure)


def uncompacted_reasons(index: ToolIndex) -> RowWhy:
    """Row reasons when the strategy compacted nothing."""

    def why(slot: int, fate: Fate) -> tuple[str, str]:
        if index.positions[slot] <= 0:
            return row_text(RowReason.PENDING)
        return row_text(RowReason.UNCOMPACTED)

    return why


def band_reasons(
    index: ToolIndex,
    keep_full: int,
    truncate_to: int,
    verbatim: RowReason,
    full: int,
    kept: Mapping[int, str] | None = None,
) -> RowWhy:
    """Row reasons of the bands: newest-first positions ``<= keep_full`` verbatim
    (``verbatim``, whose sentence names ``full``), then shortened up to
    ``truncate_to``, then dropped; ``kept``: the pairs (oldest-first numbers)
    the retention keeps whole out of their band, with what it says of each."""
    band = truncate_to - keep_full
    positions = index.positions
    numbers = index.numbers
    kept = kept or {}
    since = _superseded_since(index, kept)

    def why(slot: int, fate: Fate) -> tuple[str, str]:
        position = positions[slot]
        if fate is Fate.PROTECTED:
            said = kept.get(numbers[slot])
            if said is None:
                return row_text(RowReason.REPEAT)
            if numbers[slot] in since:
                said += f" at the last compaction; {since[numbers[slot]]}"
            return row_text(RowReason.KEPT, said)
        if fate is Fate.DROPPED:
            return row_text(RowReason.OLDER)
        if fate is Fate.TRUNCATED:
            return row_text(RowReason.BAND, band)
        if position <= 0:
            return row_text(RowReason.PENDING)
        if position <= keep_full:
            return row_text(verbatim, full)
        return row_text(RowReason.SHORT)

    return why


def _superseded_since(index: ToolIndex, kept: Mapping[int, str]) -> dict[int, str]:
    """The kept pairs a newer pair of the same retention key followed after the
    compaction that kept them, with the words that say so.

    The retention chooses at a compaction and the prompt keeps that choice until the
    next one: a file read again since makes "the newest whole read" no longer true.
    """
    if not kept:
        return {}
    oldest = min(kept)
    keys: dict[int, Key] = {}
    newest: dict[Key, int] = {}
    for slot, number in enumerate(index.numbers):
        if not index.is_call[slot] or number < oldest or index.partners[slot] == -1:
            continue  # an output, an older pair, or a call whose output has not come
        body = index.bodies[slot]
        key = retention_key(call_kind(body.name, body.arguments))
        if key is not None:
            keys[number] = key
            newest[key] = max(number, newest.get(key, 0))
    return {
        number: f"a newer {'read' if keys[number][0] == READ else 'run'} came since"
        for number in kept
        if number in keys and newest[keys[number]] > number
    }


def round_reason(plan: Plan | None, windowed: bool, config: PromptConfig) -> Reason | None:
    """The report's reason of a session round: the default's ``plan``, else an epoch
    strategy's, which has one only without a window (as a whole prepare gives them)."""
    if plan is not None:
        return plan_reason(plan, config)
    return None if windowed else epoch_reason(config)


def limits_reason(config: PromptConfig) -> Reason:
    """Why ``shorten_tools`` changed nothing: every tool message is within its limits."""
    return Reason(
        code="within_limits",
        text=f"nothing to shorten: every tool message is among the newest"
        f" {config.full_tool_outputs:,}, in the newest user turn, within the first"
        f" {config.max_tool_chars:,} characters of tool traffic, or already short",
    )


NEVER = Reason(code="never", text="strategy none never compacts")
NO_OUTPUTS = Reason(code="no_outputs", text="nothing to compact yet: no tool output so far")


def epoch_reason(config: PromptConfig) -> Reason:
    """Why an epoch strategy has no window: compaction is off, or the run is under its threshold.

    No count of the run's outputs in it: a session carries it from round to
    round while the window stays absent.
    """
    if (
        config.epoch_full_tool_calls == 0 and config.epoch_compacted_tool_calls == 0
    ) or config.epoch_size <= 0:
        return Reason(
            code="epoch_off",
            text="compaction is off: epoch_size is 0, or epoch_full_tool_calls and"
            " epoch_compacted_tool_calls both are",
        )
    threshold = config.epoch_tool_call_threshold
    return Reason(
        code="epoch_threshold",
        text=f"under the epoch threshold of {threshold:,} tool outputs: nothing is compacted"
        " before it",
    )


def _tokens(value: float) -> str:
    return f"{round(value):,}"


def _share(value: float) -> str:
    return f"{value:.0%}".replace("%", " %")


def _figures(
    code: str, text: str, decision: Decision, decided: int | None, weighed: bool, more: int | None
) -> Reason:
    """The reason with the figures the decision read (its costs when it weighed one)."""
    return Reason(
        code=code,
        text=text,
        prompt_tokens=decision.prompt,
        trigger_tokens=round(decision.trigger),
        limit_tokens=round(decision.limit),
        removed_tokens=decision.removed if weighed else None,
        rewrite_cost=round(decision.rewrite, 1) if weighed else None,
        paid_cost=round(decision.carried, 1) if weighed else None,
        needed_cost=round(decision.batch * decision.rewrite, 1) if weighed else None,
        more_tokens=more,
        decided_at=decided,
    )


def plan_reason(plan: Plan, config: PromptConfig) -> Reason:
    """The default's reason at the last round, from the figures its plan read there."""
    decision = plan.decision
    if decision is None:  # a plan of no round: the strategy saw no tool output
        return NO_OUTPUTS
    decided = plan.decided_at or None
    if decision.compacted:
        return _figures(*_compacted(decision, config), decision, decided, True, None)
    if not decision.weighed:
        if decided is None:
            among = (
                "the only output is"
                if decision.round == 1
                else f"all {decision.round:,} outputs are"
            )
            text = (
                f"{among} among the newest {decision.full:,} kept verbatim: nothing to compact yet"
            )
        else:
            text = (
                f"no output has left the newest {decision.full:,} kept verbatim since the"
                f" compaction at output {decided:,}"
            )
        return _figures("within_verbatim", text, decision, decided, False, None)
    unmet = decision.unmet() or "risk"  # weighed and not compacted: one test failed
    ahead = forecast(decision)
    more = None if ahead is None else ahead.tokens
    stand = f"the compaction at output {decided:,} stands; " if decided is not None else ""
    if ahead is None:
        then = "; it will not pay while the prompt stays about this size"
    elif ahead.forced:  # the window comes first: the next compaction is forced, not paid for
        then = (
            f"; before it pays, the prompt will pass the limit of {_tokens(decision.limit)}"
            f" and be compacted to fit, at about {ahead.tokens:,} more tokens of prompt"
        )
    else:
        then = f"; it will pay at about {ahead.tokens:,} more tokens of prompt"
    saving = (
        f"it would remove {_tokens(decision.removed)} tokens, saving"
        f" {_tokens(decision.removed * decision.read)} a round at the cache-read price,"
        f" and the rewrite costs {_tokens(decision.rewrite)} (uncached-token units)"
    )
    if unmet == "trigger":
        text = (
            f"{stand}the prompt is {_tokens(decision.prompt)} tokens, under the trigger of"
            f" {_tokens(decision.trigger)} ({_share(config.compaction_trigger_share)} of a"
            f" {config.context_window:,} window){then}"
        )
    elif unmet == "rent":
        text = (
            f"{stand}compaction does not pay yet: {saving}; reading what it would remove"
            f" has cost {_tokens(decision.carried)} since"
            f" {'that compaction' if decided else 'the start'}, and it waits for"
            f" {_tokens(decision.batch * decision.rewrite)}"
            f" ({decision.batch:g} times the rewrite){then}"
        )
    elif unmet == "horizon":
        rounds = f"{decision.horizon:,.1f}" if decision.horizon < 10 else _tokens(decision.horizon)
        text = (
            f"{stand}compaction would not repay over the rounds expected to remain: {saving};"
            f" about {rounds} more rounds are expected{then}"
        )
    else:
        text = (
            f"{stand}compaction would risk too much: the rewrite would cost"
            f" {_tokens(decision.rewrite)} (uncached-token units), more than"
            f" {_share(config.compaction_risk_share)} of the bill so far"
            f" ({_tokens(decision.billed)}){then}"
        )
    return _figures(_CODES[unmet], text, decision, decided, True, more)


_CODES = {"trigger": "below_trigger", "rent": "not_paying", "horizon": "horizon", "risk": "risk"}


def _compacted(decision: Decision, config: PromptConfig) -> tuple[str, str]:
    """The code and sentence of a compaction at the last round: forced by the limit, or paying."""
    if decision.forced:
        # a prompt holding an earlier compaction's notice is held to the limit with it
        held = " and its compaction notice were" if decision.prompt <= decision.limit else " was"
        return "over_limit", (
            f"compacted at this output to fit: the prompt of {_tokens(decision.prompt)} tokens"
            f"{held} over the limit of {_tokens(decision.limit)}"
            f" ({_share(config.compaction_limit_share)} of a {config.context_window:,} window);"
            f" it removed {_tokens(decision.removed)} tokens"
        )
    return "compacted", (
        f"compacted at this output: it removed {_tokens(decision.removed)} tokens, whose reading"
        f" had cost {_tokens(decision.carried)}, at least {decision.batch:g} times the"
        f" rewrite's {_tokens(decision.rewrite)} (uncached-token units)"
    )
