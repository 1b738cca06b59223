"""An epoch round whose protected repeats moved: the last prompt, patched.

Inside one epoch the bands of the epoch strategies stay put (docs/STRATEGIES.md),
so when a repeated call moves the protection to its newest pair, which is whole
anyway, only the pair that lost it changes: truncated or dropped like its
neighbours. :func:`move_protection` applies that to the last round's prompt,
at a cost in proportion to what changed, where
:func:`~scoutd.strategies.epoch.compact` walks the whole conversation again;
the two give the same prompt and report (tests/test_incremental.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

from .epoch import Window
from .report import Changes, StrategyReport, content_chars, count_changes, notice_text
from .rewrites import RewriteCache, recall_notice, shortened
from .tool_messages import TOOL_ROLES, ToolIndex, call_keys, with_content

__all__ = ["Repeats", "EpochState", "epoch_state", "move_protection"]

NO_NOTICE = -1


@dataclass(slots=True)
class EpochState:
    """What an epoch round leaves for the next one to patch: its changes, the
    message indexes of the tools it dropped (sorted), and the message index
    its notice stands before (``NO_NOTICE`` without one)."""

    changes: Changes
    dropped: list[int]
    notice_before: int


def epoch_state(index: ToolIndex, changes: Changes, notice: bool) -> EpochState:
    """The state :func:`~scoutd.strategies.report.apply_changes` left with ``changes``."""
    dropped = [index.indices[slot] for slot in changes.dropped]  # slot order: sorted
    return EpochState(
        changes, dropped, _first_tool(index.roles, dropped, 0) if notice else NO_NOTICE
    )


def _first_tool(roles: Sequence[Any], dropped: list[int], start: int) -> int:
    """The first tool-role message from ``start`` on that was not dropped (where the
    notice goes), or ``len(roles)`` when none is left (it goes at the end)."""
    for at in compress(range(start, len(roles)), map(TOOL_ROLES.__contains__, roles[start:])):
        place = bisect_left(dropped, at)
        if place == len(dropped) or dropped[place] != at:
            return at
    return len(roles)


def _at_place_of(index: ToolIndex, call: int) -> list[int]:
    """The tools protected with the pair of ``call``: protection goes by place, and
    besides the pair a call left waiting (no output with its id came) stands at
    the place of the output after it, so the calls just before that output may
    share it."""
    output, number = index.partners[call], index.numbers[call]
    slots = [call, output]
    slot = output - 1
    while slot >= 0 and index.is_call[slot]:  # the calls since the output before
        if slot != call and index.numbers[slot] == number:
            slots.append(slot)
        slot -= 1
    return slots


def move_protection(
    name: str,
    messages: Sequence[Any],
    index: ToolIndex,
    window: Window,
    last: tuple[list[Any], StrategyReport, EpochState, int],
    lost: Sequence[int],
    template: str | None,
    chars_before: int,
    rewrites: RewriteCache | None = None,
    recall: bool = False,
) -> tuple[list[Any], StrategyReport, EpochState, int]:
    """This round's prompt, report and state, and how many leading messages of
    the last prompt it keeps.

    ``last`` is the last round's prompt, report, state and conversation
    length, under the same bands; the conversation has grown since by new
    tools only, all whole in this window. ``lost`` are the call slots of the
    pairs that lost their protection since; ``chars_before`` counts the
    characters of the whole conversation (the report's).
    """
    core, report, state, start = last
    changes = Changes(
        dropped=list(state.changes.dropped),
        rewrites=dict(state.changes.rewrites),
        protected=list(state.changes.protected),
    )
    protected = set(changes.protected)
    moves: dict[int, str | None] = {}  # message index -> new content (None: dropped)
    for call in lost:
        position = index.outputs - index.numbers[call] + 1
        if position > window.keep_full:  # else whole either way
            for slot in _at_place_of(index, call):  # protected in the last round
                protected.discard(slot)
                if position > window.truncate_to:
                    changes.dropped.append(slot)
                    moves[index.indices[slot]] = None
                    continue
                new = shortened(index, messages, slot, rewrites, recall)
                if new is not None:
                    changes.rewrites[slot] = new
                    moves[index.indices[slot]] = new
    changes.protected = [slot for slot in changes.protected if slot in protected]

    out = list(core)
    chars = report.chars_after
    touched = [len(core)]  # positions of the last prompt from which this one differs
    old_notice: Any = None
    old_at = state.notice_before - bisect_left(state.dropped, state.notice_before)
    if state.notice_before != NO_NOTICE:  # taken out, put back where it belongs now
        old_notice = out.pop(old_at)
        chars -= len(old_notice["content"])
    for message in sorted(moves, reverse=True):  # from the end: earlier places stay put
        at = message - bisect_left(state.dropped, message)
        touched.append(at)  # at or after the notice, which stands before the first tool kept
        chars -= len(messages[message]["content"])
        new = moves[message]
        if new is None:
            del out[at]
        else:
            out[at] = with_content(messages[message], new)
            chars += len(new)
    dropped = state.dropped
    if None in moves.values():
        dropped = sorted([*dropped, *(m for m, new in moves.items() if new is None)])
    fresh = messages[start:]
    out += fresh
    chars += content_chars(fresh)

    notice_before = NO_NOTICE
    if template is not None and (changes.rewrites or changes.dropped):
        # drops only grow, so the first tool kept is the last one's or a later one
        notice_before = _first_tool(index.roles, dropped, max(state.notice_before, 0))
        if recall:
            template = recall_notice(template, index, changes.dropped)
        text = notice_text(template, len(changes.rewrites), len(changes.dropped))
        at = notice_before - bisect_left(dropped, notice_before)
        out.insert(at, {"role": "user", "content": text})
        touched.append(at)
        chars += len(text)
    if old_notice is not None:
        touched.append(old_at)

    patched = StrategyReport(
        strategy=name,
        chars_before=chars_before,
        chars_after=chars,
        notice=notice_before != NO_NOTICE,
    )
    count_changes(patched, index, changes, prefix=False)
    return out, patched, EpochState(changes, dropped, notice_before), min(touched)


class Repeats:
    """Pairs grouped by call key, kept up to date as pairs complete.

    Each step is O(1) or O(log n) whatever the order in which pairs complete:
    a key keeps only its first pair in call order (not a sorted list of all,
    where inserting at the front moved every entry), and repeat numbers that
    arrive out of order wait in ``_late`` until :attr:`numbers` is read, which
    merges them in one pass (docs/RELIABILITY.md, CPU and memory).
    """

    def __init__(self) -> None:
        self.first: dict[bytes, tuple[int, int]] = {}  # key -> (call slot, number) of its first
        self._numbers: list[int] = []  # sorted output numbers of every repeat
        self._late: list[int] = []  # repeat numbers below the last of ``_numbers``
        self.latest: dict[bytes, int] = {}  # newest output number of each repeated key
        self.call_slots: dict[int, int] = {}  # call slot of each number ever in ``latest``

    @property
    def numbers(self) -> list[int]:
        """The output numbers of every repeat, sorted."""
        if self._late:
            self._numbers += self._late
            self._numbers.sort()  # two sorted runs, or a few late ones: linear
            self._late = []
        return self._numbers

    def add(self, index: ToolIndex, call_slots: Sequence[int]) -> None:
        """Count the pairs completed by ``call_slots`` (O(1) each)."""
        keys = call_keys([index.bodies[s] for s in call_slots])
        # no mutate: call_keys gives one key per slot, so strict= never matters
        for slot, key in zip(call_slots, keys, strict=True):  # pragma: no mutate
            number = index.numbers[slot]
            first = self.first.get(key)
            if first is None:
                self.first[key] = (slot, number)
                continue
            # Every occurrence after the first, in call order, is a repeat: a late
            # pair that is first in call order turns the former first into one.
            repeat = number
            if (slot, number) < first:
                self.first[key] = (slot, number)
                repeat = first[1]
            if self._numbers and repeat < self._numbers[-1]:
                self._late.append(repeat)
            else:
                self._numbers.append(repeat)
            # pairs complete in output order: this one has the key's newest output
            self.latest[key] = number
            self.call_slots[number] = slot
