"""Incremental sessions: a round costs in proportion to what is new.

An agent prepares its prompt before every inference with a conversation that
only grows. :class:`SessionPrompt` keeps that conversation with its tool index
(each tool message parsed once, pairs and repeats tracked as they arrive), so a
round decodes and schedules only the new messages. Inside an epoch the epoch
strategies only append to the prompt (docs/STRATEGIES.md), so the prepared
prompt of the last round is reused and extended; the full walk runs again only
when the epoch moves, a repeat moves the protection, or a late output changes
an older call's place.

How the prepared prompt travels as a change of the previous one is
:mod:`scoutd.delta`'s job.

Everything here is pure: no I/O except through the ``inbox`` strategy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..config import DEFAULT_STRATEGIES, Config, PromptConfig, strategy_names
from ..formats import AUTO, SCOUT, adapter, format_of, signals
from ..formats.cache import reported, stable_prefix
from ..formats.detect import first_signal
from ..formats.texts import ConversationTexts
from ..paths import safe_value
from ..strategies import BUILTINS
from ..strategies.base import InboxCall, PrepareContext, Rounds
from ..strategies.cost_aware import apply_plan
from ..strategies.cost_rounds import CostPlanner
from ..strategies.epoch import EpochStrategy, Window, epoch_changes, epoch_notice
from ..strategies.epoch_rounds import EpochState, Repeats, epoch_state, move_protection
from ..strategies.reasons import round_reason
from ..strategies.report import StrategyReport, apply_changes, content_chars
from ..strategies.rewrites import RewriteCache
from ..strategies.text import ENCODE_ERRORS, json_text
from ..strategies.tool_messages import ToolIndex, index_tools, output_handles
from .prepare import Prepared, prepare_with
from .view_tracker import ViewTracker, rebuilt

__all__ = ["SessionPrompt", "json_size"]


def _rounds(name: str) -> Rounds | None:
    """The round-by-round form of the built-in ``name`` (None: prepared whole each round)."""
    strategy = BUILTINS.get(name)
    return None if strategy is None else strategy.rounds


def _appending(names: Sequence[str]) -> bool:
    """Whether every one of ``names`` is a built-in that only appends."""
    return all(name in BUILTINS and BUILTINS[name].appends_only for name in names)


def _keeping(names: Sequence[str]) -> bool:
    """Whether every one of ``names`` is a built-in that keeps the prompt's prefix."""
    return all(name in BUILTINS and BUILTINS[name].keeps_prefix for name in names)


_encode = msgspec.json.Encoder().encode


@dataclass(slots=True)
class _Round:
    """What the last round computed, for the next one to extend."""

    names: tuple[str, ...]
    config: Config
    bands: Any  # what places every older tool message: equal bands, same places
    planner: CostPlanner | None  # the cost-aware replay, carried on
    messages: int  # conversation length then
    tools: int  # indexed tool messages then
    core: list[Any]  # the epoch strategy's output
    report: StrategyReport
    tool_present: bool  # core keeps a tool-role message (the notice stands before it)
    epoch: EpochState | None = None  # what an epoch strategy changed, to patch


@dataclass(slots=True)
class SessionPrompt:
    """A growing conversation whose prepared prompt is computed incrementally.

    :meth:`prepare` returns exactly what :func:`scoutd.prepare` returns for the
    whole conversation (messages and report), plus how many leading messages
    are unchanged since the previous round.
    """

    messages: list[Any] = field(default_factory=list)
    chars: int = 0
    size: int = 0  # bytes of the messages as compact JSON: what the session stores
    index: ToolIndex = field(default_factory=ToolIndex)
    _repeats: Repeats = field(default_factory=Repeats)
    _unrepeated: list[int] = field(default_factory=list)  # paired calls not yet in _repeats
    _last: _Round | None = None
    _late_pairing: bool = False
    format: str = AUTO  # the session's message format (docs/FORMATS.md)
    _signals: dict[str, tuple[int, str]] = field(default_factory=dict)
    rewrites: RewriteCache = field(default_factory=RewriteCache)
    view_texts: ConversationTexts = field(default_factory=ConversationTexts)  # provider views
    prices: str = SCOUT  # the format whose provider's prices the cost-aware strategy assumes
    of_view: bool = False  # a provider conversation's scout view: scout whatever it holds
    # A provider-format conversation: its scout view, and the scout session over that view
    _provider: tuple[ViewTracker, SessionPrompt] | None = None

    def extend(self, messages: Sequence[Any], size: int | None = None) -> None:
        """Append messages to the conversation (O(len(messages))).

        ``size`` is their JSON size if the caller measured it already. Atomic:
        if it raises, the conversation is exactly as before.
        """
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise TypeError("messages must be a list of messages")
        start = len(self.messages)
        tools = len(self.index.indices)
        chars = content_chars(messages)
        size = json_size(messages) if size is None else size
        found = signals(messages)
        self.messages += messages
        try:
            # Parsing, the only step that can fail, comes before the index changes.
            self.index.extend(self.messages, start)
        except BaseException:
            del self.messages[start:]
            raise
        for fmt, (position, why) in found.items():
            self._signals.setdefault(fmt, (start + position, why))
        self.chars += chars
        self.size += size
        if any(slot < tools for slot in self.index.paired):
            self._late_pairing = True  # an older call took its own output's place
        if self.index.paired:
            self._unrepeated += self.index.paired  # counted when an epoch strategy asks

    def reset(self, messages: Sequence[Any], size: int | None = None) -> None:
        """Replace the conversation (the next round recomputes everything)."""
        self.messages, self.chars, self.size, self._last = [], 0, 0, None
        self.index, self._repeats, self._unrepeated = ToolIndex(), Repeats(), []
        self._provider = None
        self.rewrites.forget()  # what it holds is keyed by the old conversation's strings
        self.view_texts.forget()
        # no mutate: with _last None the next epoch round recomputes all anyway
        self._late_pairing = False  # pragma: no mutate
        self._signals = {}
        self.extend(messages, size)

    def truncate(self, length: int) -> None:
        """Go back to the first ``length`` messages, as after a failed round.

        Rebuilds the index (O(length)): only the failure path pays for it.
        """
        if length < len(self.messages):
            self.reset(self.messages[:length])

    def prepare(
        self,
        strategies: str | Sequence[str] | None,
        config: Config,
        *,
        save_file: str | None = None,
        format: str | None = None,
        cache_control: bool | None = None,
        inbox: InboxCall | None = None,
    ) -> tuple[Prepared, int]:
        """The prepared prompt and the number of leading messages unchanged since last round.

        A provider format (docs/FORMATS.md) is prepared by a scout session over
        the conversation's view, kept from round to round
        (:mod:`scoutd.engine.view_tracker`). Strategies without an incremental
        form are prepared whole each round (the delta sent to the client still
        carries only what changed); every strategy reuses the session's
        rewrites (:class:`~scoutd.strategies.rewrites.RewriteCache`) and the
        texts of its last provider view (:mod:`scoutd.formats.texts`). ``inbox``:
        a daemon call's (``PrepareContext.inbox``), for the ``inbox`` strategy.
        """
        # no mutate: strategy_names(None) is None, so the test is only a shortcut
        names = strategy_names(strategies) if strategies is not None else None  # pragma: no mutate
        if names is None:
            names = strategy_names(config.prompt.prompt_strategies) or list(DEFAULT_STRATEGIES)
        requested = format or self.format
        if self.of_view:
            found: str | None = SCOUT
        elif requested == AUTO:
            found = format_of(self._signals)
        else:  # a declared format with foreign traffic goes the long way, to warn
            found = requested if set(self._signals) <= {requested} else None
        incremental = bool(names) and _rounds(names[0]) is not None
        appending = _appending(names[1:])
        if incremental and appending and found not in (None, SCOUT):
            return self._provider_round(names, config, save_file, found, cache_control, inbox), 0
        if not incremental or found != SCOUT or cache_control:
            self._last = None
            return prepare_with(
                self.messages,
                names,
                save_file=save_file,
                config=config,
                format=requested,
                cache_control=cache_control,
                rewrites=self.rewrites,
                texts=self.view_texts,
                inbox=inbox,
            ), 0
        core, report, stable = self._core_round(tuple(names), config)
        tail = names[1:]
        if _appending(tail):
            prompt, reports = _appended(core, report, tail, config, save_file, inbox)
            later = sum(r.narration_dropped for r in reports[1:])
        else:
            rest = prepare_with(
                core,
                tail,
                save_file=save_file,
                config=config,
                cache_control=None,
                rewrites=self.rewrites,
                inbox=inbox,
                # recall's handles number the conversation's outputs, not what the core left
                numbered=not config.prompt.recall
                or output_handles(self.index) == output_handles(index_tools(core)),
            )
            stable = 0  # a later strategy may rewrite the core: nothing is known to stay
            prompt, reports = rest.messages, [report, *rest.report]
            later = rest.report[-1].narration_dropped  # the rest's whole count
        first = self._signals[SCOUT][0] if SCOUT in self._signals else len(self.messages)
        prefix = _stable_prefix(names, self.messages[: first + 1], prompt, *reported(reports))
        # as prepare() sets them on the last report of a scout conversation
        narration = report.narration_dropped + later  # the remarks dropped, as prepare()
        reports[-1] = msgspec.structs.replace(
            reports[-1], stable_prefix=prefix, malformed=0, narration_dropped=narration
        )
        return Prepared(messages=prompt, report=reports), stable

    def _provider_round(
        self,
        names: list[str],
        config: Config,
        save_file: str | None,
        name: str,
        cache_control: bool | None,
        inbox: InboxCall | None,
    ) -> Prepared:
        """A round in a provider format: the scout session over the conversation's
        view prepares, and the provider messages are rebuilt from its result."""
        if self._provider is None or self._provider[0].adapter.name != name:
            chosen = adapter(name)
            assert chosen is not None  # a provider format has one
            tracker = ViewTracker(chosen, self.view_texts)
            self._provider = tracker, SessionPrompt(prices=name, of_view=True)
        tracker, inner = self._provider
        if len(tracker.starts) <= len(self.messages):
            try:
                keep, added = tracker.sync(self.messages, inner.messages)
                inner.truncate(keep)
                inner.extend(added)
            except BaseException:
                self._provider = None  # the next round starts over
                raise
        scout, _ = inner.prepare(names, config, save_file=save_file, inbox=inbox)
        view = inner.messages
        keeps = _keeping(names)
        return rebuilt(tracker, self.messages, view, scout, keeps, config, cache_control)

    def _core_round(
        self, names: tuple[str, ...], config: Config
    ) -> tuple[list[Any], StrategyReport, int]:
        """The first strategy's prompt: the last round's extended when its bands stand."""
        index, prompt = self.index, config.prompt
        name = names[0]
        last = self._last
        same_run = (
            last is not None
            and last.names == names
            and last.config is config
            and not self._late_pairing
        )
        planner = plan = window = None
        protected: frozenset[int] = frozenset()
        strategy = BUILTINS[name]
        if strategy.rounds is Rounds.PLAN:
            planner = last.planner if same_run and last is not None else None
            if planner is None:
                planner = CostPlanner(prompt, self.prices)
            self._last = None  # the planner moves on: a failure here leaves nothing half done
            plan = planner.plan(self.messages, index, prompt)
            bands: Any = plan
        else:
            if self._unrepeated:
                self._repeats.add(index, self._unrepeated)
                self._unrepeated = []
            assert isinstance(strategy, EpochStrategy)  # the other round-by-round form
            window = strategy.window(index.outputs, lambda: self._repeats.numbers, prompt)
            if window is not None:
                protected = frozenset(self._repeats.latest.values())
            bands = _bands(window), protected
        extends = same_run and last is not None and (last.tool_present or not last.report.notice)
        epoch: EpochState | None = None
        if extends and last is not None and last.bands == bands:
            new = self.messages[last.messages :]
            core = last.core + new
            report = _extended_report(last.report, index, last.tools, new)
            stable = len(last.core)
            epoch = last.epoch
        elif plan is not None:
            core, report = apply_plan(
                self.messages, index, plan, prompt, False, rewrites=self.rewrites
            )
            stable = 0
        else:
            patched = (
                self._moved_protection(name, window, last, protected, prompt)
                if extends and last is not None
                else None
            )
            if patched is not None:
                core, report, epoch, stable = patched
            else:
                positions = {index.outputs - number + 1 for number in protected}
                changes = epoch_changes(
                    self.messages, index, window, positions, self.rewrites, prompt.recall
                )
                core, report = apply_changes(
                    name,
                    self.messages,
                    index,
                    changes,
                    notice=epoch_notice(prompt, index, changes),
                    detail=False,
                )
                epoch = epoch_state(index, changes, report.notice)
                stable = 0
        # the reason of this round's decision, as a whole prepare gives it (docs/STRATEGIES.md)
        report = msgspec.structs.replace(
            report, reason=round_reason(plan, window is not None, prompt)
        )
        self._last = _Round(
            names=names,
            config=config,
            bands=bands,
            planner=planner,
            messages=len(self.messages),
            tools=len(index.indices),
            core=core,
            report=report,
            # with every tool dropped, the notice stands last: what comes next goes before it
            tool_present=report.calls_dropped + report.outputs_dropped < len(index.indices),
            epoch=epoch,
        )
        self._late_pairing = False
        return core, report, stable

    def _moved_protection(
        self,
        name: str,
        window: Window | None,
        last: _Round,
        protected: frozenset[int],
        prompt: PromptConfig,
    ) -> tuple[list[Any], StrategyReport, EpochState, int] | None:
        """The last epoch round patched where the protection of repeats moved
        within the same bands (:mod:`scoutd.strategies.epoch_rounds`); None when the
        bands moved: walk it all again. Protection only ever moves to a pair
        completed since the last round (the newest output of its call key),
        which is whole in any window; the pair it left is the one to change."""
        last_window, last_protected = last.bands
        if window is None or _bands(window) != last_window:
            return None
        if last.epoch is None:  # an epoch strategy's round always leaves one
            return None
        lost = [self._repeats.call_slots[number] for number in last_protected - protected]
        return move_protection(
            name,
            self.messages,
            self.index,
            window,
            (last.core, last.report, last.epoch, last.messages),
            lost,
            prompt.compaction_notice,
            self.chars,
            self.rewrites,
            prompt.recall,
        )


def _appended(
    core: list[Any],
    report: StrategyReport,
    names: Sequence[str],
    config: Config,
    save_file: str | None,
    inbox: InboxCall | None,
) -> tuple[list[Any], list[StrategyReport]]:
    """Run strategies that only append after the core, without walking the core again.

    Each one is given an empty list, so what it returns is what it appends;
    its report's character counts are then shifted by the core's (they add up).
    """
    appended: list[Any] = []
    reports = [report]
    chars = report.chars_after
    for name in names:
        ctx = PrepareContext(config.prompt, SCOUT, save_file, snapshot=config, inbox=inbox)
        added, step = BUILTINS[name].run([], ctx)
        appended += added
        step.chars_before += chars
        step.chars_after += chars
        chars = step.chars_after
        reports.append(step)
    return [*core, *appended], reports


def _stable_prefix(
    names: Sequence[str], messages: Sequence[Any], prompt: list[Any], delivered: int, protected: int
) -> int:
    """:func:`~scoutd.formats.cache.stable_prefix` of a scout round, without a full walk.

    Where that function counts the input's own messages before the first tool
    traffic of the prompt, only the prompt's leading run of the input's own
    messages needs looking at: the count is the first tool traffic within that
    run, or its length. ``messages`` may stop just after the input's first tool
    traffic: the run cannot go past it.
    """
    if not protected and _keeping(names):
        return stable_prefix(True, messages, prompt, delivered, protected, False)
    same = 0
    for given, sent in zip(messages, prompt, strict=False):
        if given is not sent:
            break
        same += 1
    return first_signal(prompt[:same])


def json_size(messages: Sequence[Any]) -> int:
    """The sum of each message's bytes as compact JSON.

    Additive, so that a session's size is the sum over its appends: the list's
    brackets and commas are not counted (an empty append adds nothing).
    """
    if not messages:
        return 0
    try:
        encoded = len(_encode(messages))
    except ENCODE_ERRORS:
        # A lone surrogate in a caller's string (JSON text cannot hold one): count
        # it as the escape the daemon would send in its place (docs/PROTOCOL.md);
        # an in-process key that is not a string, or another object, as text.
        encoded = _lenient_size(messages)
    return encoded - len(messages) - 1  # "[" + ",".join(items) + "]"


def _lenient_size(messages: Sequence[Any]) -> int:
    """:func:`json_size`'s count of messages msgspec cannot encode: strings made safe,
    keys made strings, and any other object counted as its ``repr`` (never an exception)."""
    safe = safe_value(messages)
    try:
        return len(_encode(safe))
    except ENCODE_ERRORS:
        return len(json_text(safe).encode("utf-8", "surrogatepass"))


def _bands(window: Window | None) -> tuple[int, int] | None:
    """What keeps every older tool message in its band while it stays the same.

    Counted oldest-first, the bands stay where they are while the epoch start
    and the compacted window stay (the full window comes from the config,
    which is the same snapshot).
    """
    if window is None:
        return None
    return window.pinned, window.truncate_to - window.keep_full


def _extended_report(
    report: StrategyReport, index: ToolIndex, tools_before: int, new: Sequence[Any]
) -> StrategyReport:
    calls = sum(index.is_call[tools_before:])
    outputs = len(index.indices) - tools_before - calls
    added = content_chars(new)
    return msgspec.structs.replace(
        report,
        calls_kept=report.calls_kept + calls,
        outputs_kept=report.outputs_kept + outputs,
        chars_before=report.chars_before + added,
        chars_after=report.chars_after + added,
    )
