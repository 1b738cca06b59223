"""Incremental sessions: a round costs in proportion to what is new.

An agent prepares its prompt before every inference with a conversation that
only grows. :class:`SessionPrompt` keeps that conversation with its tool index
(each tool message parsed once, pairs and repeats tracked as they arrive), so a
round decodes and schedules only the new messages. Inside an epoch the epoch
strategies only append to the prompt (docs/STRATEGIES.md), so the prepared
prompt of the last round is reused and extended; the full walk runs again only
when the epoch moves, a repeat moves the protection, or a late output changes
an older call's place.

:class:`DeltaEncoder` and :class:`DeltaDecoder` carry the prepared prompt as
"the first ``keep`` messages of the previous prompt, then ``append``", with a
CRC-32 of the kept prefix (over each message's compact JSON) so the receiver
can check that both sides agree on it.

Everything here is pure: no I/O except through the ``inbox`` strategy.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .config import DEFAULT_STRATEGIES, Config, strategy_names
from .errors import DeltaMismatch  # re-exported: it was defined here
from .formats import AUTO, SCOUT, format_of, signals
from .formats.cache import stable_prefix
from .paths import safe_value
from .prepare import Prepared, prepare
from .strategies.epoch import Window, compact, fixed_window, increment_window
from .strategies.report import StrategyReport, content_chars
from .strategies.tool_messages import TOOL_ROLES, ToolIndex, call_keys

__all__ = [
    "DeltaDecoder",
    "DeltaEncoder",
    "DeltaMismatch",
    "PromptDelta",
    "SessionPrompt",
    "json_size",
]

EPOCH_STRATEGIES = frozenset(("shorten_tools_epoch", "shorten_tools_epoch_increment"))
# Strategies that leave the messages they get in place (they may only append).
APPENDING_STRATEGIES = frozenset(("inbox", "none"))
_encode = msgspec.json.Encoder().encode


class _Repeats:
    """Pairs grouped by call key, kept up to date as pairs complete."""

    def __init__(self) -> None:
        self.occurrences: dict[bytes, list[tuple[int, int]]] = {}  # key -> [(call slot, number)]
        self.numbers: list[int] = []  # sorted output numbers of every repeat
        self.latest: dict[bytes, int] = {}  # newest output number of each repeated key

    def add(self, index: ToolIndex, call_slots: Sequence[int]) -> None:
        """Count the pairs completed by ``call_slots`` (O(log n) each, usually)."""
        keys = call_keys([index.bodies[s] for s in call_slots])
        # no mutate: call_keys gives one key per slot, so strict= never matters
        for slot, key in zip(call_slots, keys, strict=True):  # pragma: no mutate
            number = index.numbers[slot]
            seen = self.occurrences.setdefault(key, [])
            place = bisect.bisect(seen, (slot, number))
            seen.insert(place, (slot, number))
            if len(seen) < 2:
                continue
            # Every occurrence after the first, in call order, is a repeat: a late
            # pair that is first in call order turns the former first into one.
            bisect.insort(self.numbers, seen[1][1] if place == 0 else number)
            # pairs complete in output order: this one has the key's newest output
            self.latest[key] = number


@dataclass(slots=True)
class _Round:
    """What the last round computed, for the next one to extend."""

    names: tuple[str, ...]
    config: Config
    window: Window | None
    protected: frozenset[int]  # output numbers
    messages: int  # conversation length then
    tools: int  # indexed tool messages then
    core: list[Any]  # the epoch strategy's output
    report: StrategyReport
    tool_present: bool  # core holds a tool-role message (the notice stands before it)


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
    _repeats: _Repeats = field(default_factory=_Repeats)
    _last: _Round | None = None
    _late_pairing: bool = False
    format: str = AUTO  # the session's message format (docs/FORMATS.md)
    _signals: dict[str, tuple[int, str]] = field(default_factory=dict)

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
            self._repeats.add(self.index, self.index.paired)

    def reset(self, messages: Sequence[Any], size: int | None = None) -> None:
        """Replace the conversation (the next round recomputes everything)."""
        self.messages, self.chars, self.size, self._last = [], 0, 0, None
        self.index, self._repeats = ToolIndex(), _Repeats()
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
    ) -> tuple[Prepared, int]:
        """The prepared prompt and the number of leading messages unchanged since last round.

        Provider formats (docs/FORMATS.md) are prepared whole each round; the
        delta sent to the client still carries only what changed.
        """
        names = strategy_names(strategies) if strategies is not None else None
        if names is None:
            names = strategy_names(config.prompt.prompt_strategies) or list(DEFAULT_STRATEGIES)
        requested = format or self.format
        if requested == AUTO:
            scout = format_of(self._signals) == SCOUT
        else:  # a declared scout session with foreign traffic goes the long way, to warn
            scout = requested == SCOUT and set(self._signals) <= {SCOUT}
        if not names or names[0] not in EPOCH_STRATEGIES or not scout or cache_control:
            self._last = None
            return prepare(
                self.messages,
                names,
                save_file=save_file,
                config=config,
                format=requested,
                cache_control=cache_control,
            ), 0
        core, report, stable = self._epoch_round(tuple(names), config)
        reports = [report]
        prompt = core
        if names[1:]:
            rest = prepare(core, names[1:], save_file=save_file, config=config)
            if not APPENDING_STRATEGIES.issuperset(names[1:]):
                stable = 0  # a later strategy may rewrite the core: nothing is known to stay
            prompt, reports = rest.messages, [report, *rest.report]
        delivered = sum(r.inbox_delivered for r in reports)
        protected = sum(r.calls_protected + r.outputs_protected for r in reports)
        prefix = stable_prefix(names, self.messages, prompt, delivered, protected, SCOUT)
        reports[-1] = msgspec.structs.replace(reports[-1], stable_prefix=prefix)
        return Prepared(messages=prompt, report=reports), stable

    def _epoch_round(
        self, names: tuple[str, ...], config: Config
    ) -> tuple[list[Any], StrategyReport, int]:
        index, prompt = self.index, config.prompt
        name = names[0]
        if name == "shorten_tools_epoch":
            window = fixed_window(index.outputs, prompt)
        else:
            window = increment_window(index.outputs, self._repeats.numbers, prompt)
        protected = frozenset(self._repeats.latest.values()) if window is not None else frozenset()
        last = self._last
        if (
            last is not None
            and last.names == names
            and last.config is config
            and _same_bands(last.window, window)
            and last.protected == protected
            and not self._late_pairing
            and (last.tool_present or not last.report.notice)
        ):
            new = self.messages[last.messages :]
            core = last.core + new
            report = _extended_report(last.report, index, last.tools, new)
            stable = len(last.core)
        else:
            positions = {index.outputs - number + 1 for number in protected}
            core, report = compact(name, self.messages, index, window, positions, prompt)
            stable = 0
        self._last = _Round(
            names=names,
            config=config,
            window=window,
            protected=protected,
            messages=len(self.messages),
            tools=len(index.indices),
            core=core,
            report=report,
            tool_present=_holds_tool(last, index.roles),
        )
        self._late_pairing = False
        return core, report, stable


def json_size(messages: Sequence[Any]) -> int:
    """The sum of each message's bytes as compact JSON.

    Additive, so that a session's size is the sum over its appends: the list's
    brackets and commas are not counted (an empty append adds nothing).
    """
    if not messages:
        return 0
    try:
        encoded = len(_encode(messages))
    except UnicodeEncodeError:
        # A lone surrogate in a caller's string (JSON text cannot hold one): count
        # it as the escape the daemon would send in its place (docs/PROTOCOL.md).
        encoded = len(_encode(safe_value(messages)))
    return encoded - len(messages) - 1  # "[" + ",".join(items) + "]"


def _holds_tool(last: _Round | None, roles: list[Any]) -> bool:
    """Whether the conversation holds a tool-role message (looking only at what is new)."""
    if last is not None and last.tool_present:
        return True
    start = 0 if last is None else last.messages
    return any(role in TOOL_ROLES for role in roles[start:])


def _same_bands(before: Window | None, after: Window | None) -> bool:
    """True when every older tool message keeps its band.

    Counted oldest-first, the bands stay where they are while the epoch start
    and the compacted window stay (the full window comes from the config,
    which is the same snapshot).
    """
    if before is None or after is None:
        return before is after
    return (
        before.pinned == after.pinned
        and before.truncate_to - before.keep_full == after.truncate_to - after.keep_full
    )


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


class PromptDelta(msgspec.Struct, kw_only=True):
    """The prepared prompt as a change of the previous one.

    The new prompt is the first ``keep`` messages of the previous prepared
    prompt followed by ``append``; ``checksum`` is the CRC-32 of the compact
    JSON of those ``keep`` messages, one after the other.
    """

    keep: int
    append: list[Any]
    checksum: int


def _running_crcs(messages: Sequence[Any], start: int) -> list[int]:
    crcs = []
    crc = start
    for message in messages:
        crc = zlib.crc32(_encode(message), crc)
        crcs.append(crc)
    return crcs


class _Checksummed:
    """A prepared prompt with the running CRC after each of its messages."""

    def __init__(self) -> None:
        self.prompt: list[Any] = []
        self.crcs: list[int] = []

    def prefix_crc(self, keep: int) -> int:
        return self.crcs[keep - 1] if keep else 0

    def replace(self, keep: int, append: list[Any]) -> None:
        del self.prompt[keep:], self.crcs[keep:]
        self.crcs += _running_crcs(append, self.prefix_crc(keep))
        self.prompt += append


class DeltaEncoder(_Checksummed):
    """Sender side: turns each new prepared prompt into a :class:`PromptDelta`."""

    def delta(self, prompt: list[Any], stable: int = 0) -> PromptDelta:
        """The delta from the previous prompt to ``prompt``.

        ``stable`` leading messages are known to be unchanged (they are not
        compared again).
        """
        previous = self.prompt
        keep = min(stable, len(previous), len(prompt))
        if keep and previous[keep - 1] is not prompt[keep - 1]:
            keep = 0  # the hint does not hold (a stable prefix shares its objects)
        limit = min(len(previous), len(prompt))
        while keep < limit and (previous[keep] is prompt[keep] or previous[keep] == prompt[keep]):
            keep += 1
        checksum = self.prefix_crc(keep)
        append = prompt[keep:]
        self.replace(keep, append)
        return PromptDelta(keep=keep, append=append, checksum=checksum)

    def forget(self) -> None:
        """Forget the previous prompt: the next delta carries everything."""
        self.prompt, self.crcs = [], []


class DeltaDecoder(_Checksummed):
    """Receiver side: applies deltas to the prompt it holds, checking the prefix."""

    def apply(self, delta: PromptDelta | Mapping[str, Any]) -> list[Any]:
        """The new prepared prompt. Raises :class:`DeltaMismatch` if the prefix differs."""
        if isinstance(delta, Mapping):
            delta = msgspec.convert(delta, PromptDelta)
        if delta.keep > len(self.prompt) or self.prefix_crc(delta.keep) != delta.checksum:
            raise DeltaMismatch(
                f"prompt delta does not apply: keep={delta.keep} of {len(self.prompt)} messages"
            )
        self.replace(delta.keep, list(delta.append))
        return list(self.prompt)

    def full(self, prompt: list[Any]) -> list[Any]:
        """Take a full prompt (the sender forgot the previous one)."""
        self.prompt, self.crcs = [], []
        self.replace(0, list(prompt))
        return list(self.prompt)
