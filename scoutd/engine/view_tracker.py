"""The scout view of a provider-format session, kept from round to round.

A session in a provider format (docs/FORMATS.md) runs the strategies over the
scout view of its conversation. Making that view again every round costs as
much as the strategies themselves, so :class:`ViewTracker` views only what is
new and hands the view messages it already made back as the very same
objects: the scout session engine over the view (:mod:`scoutd.engine.incremental`)
then sees a conversation that only grows.

This rests on the view being made piece by piece: the view of a conversation
is the view of a leading part followed by the view of the rest, whenever the
rest starts at a *cut*:

* A format that reads a group (an assistant message and the answers right
  after it) by looking one message past it (OpenAI Chat, Anthropic) declares
  the messages that always start a group (``Adapter.opens_group``: Chat any
  but a ``tool`` message; Anthropic any but a user turn with ``tool_result``
  blocks). A cut is such a message that exists, so the group before it knows
  it is closed.
* A format that pairs items by call id wherever they stand (OpenAI
  Responses, ``opens_group`` None) has a cut wherever the items before it and
  after it share no call id.

Each round the tracker views the messages from its last cut (a few), moves the
cut to the last one known, and compares the new view messages with those it
handed out before. A view message that changed (a call left waiting that got
its answer, a repeated Responses call id) is reported, and the engine
recomputes from there. :func:`rebuilt` then extends the last provider prompt
when the strategies' result only grew, and rebuilds it whole otherwise
(docs/PERFORMANCE.md, provider-format sessions).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any

import msgspec

from ..config import Config
from ..formats import Adapter, View
from ..formats.cache import hinted
from ..formats.texts import ConversationTexts
from ..formats.view import PASSTHROUGH, VIEW_KEY
from .prepare import Prepared

__all__ = ["ViewTracker", "rebuilt"]


@dataclass(slots=True)
class ViewTracker:
    """The scout view of a growing provider conversation, made a piece at a time.

    ``refs`` and ``starts`` are those of :class:`~scoutd.formats.view.View`
    for the messages seen so far; the view messages themselves are the ones
    the caller holds (the engine's conversation). ``texts``: the conversation's
    view texts, kept from one piece's view to the next (:mod:`scoutd.formats.texts`).
    """

    adapter: Adapter
    texts: ConversationTexts | None = None
    refs: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=lambda: [0])
    malformed: int = 0  # of the whole view
    cut: int = 0  # provider messages before the last cut: their view is final
    _malformed_before_cut: int = 0
    _call_ids: set[str] = field(default_factory=set)  # paired by call id: every id seen
    last: _LastRound | None = None  # the last round's provider prompt, to extend

    def sync(self, messages: Sequence[Any], held: Sequence[Any]) -> tuple[int, list[Any]]:
        """Bring the view to ``messages``, which extend the messages seen so far.

        ``held`` is the view made so far, as the caller keeps it. Returns
        ``(keep, added)``: the view of ``messages`` is ``held[:keep] + added``,
        and every view message of ``added`` equal to the one at its place in
        ``held`` is that very object (``keep`` is then past it).
        """
        opens = self.adapter.opens_group
        if opens is None:  # the format pairs by call id (Adapter.call_ids)
            start, last_cut = self._paired_cut(messages)
        else:
            start, last_cut = self.cut, self.cut
            for position in range(len(messages) - 1, self.cut, -1):
                if opens(messages[position]):
                    last_cut = position
                    break
        base = self.starts[start]
        del self.refs[base:], self.starts[start + 1 :]
        if start < self.cut:
            self.cut, self._malformed_before_cut = start, 0  # Responses: from the start
        made: list[Any] = []
        if last_cut > self.cut:
            # The cut's own message is viewed as the last one here, and again below
            settled = self.adapter.view(messages[self.cut : last_cut + 1], True, self.texts)
            alone = self.adapter.view(messages[last_cut : last_cut + 1], True, self.texts)
            self._malformed_before_cut += settled.malformed - alone.malformed
            made = self._append(settled, last_cut - self.cut, base)
            self.cut = last_cut
        rest = self.adapter.view(messages[self.cut :], True, self.texts)
        made += self._append(rest, len(messages) - self.cut, base + len(made))
        self.malformed = self._malformed_before_cut + rest.malformed
        if opens is None:  # pairing by call id: everything seen is final until a repeat
            self.cut, self._malformed_before_cut = len(messages), self.malformed
        keep, added = _reuse(held, base, made)
        if keep < len(held):
            self.last = None  # an older view message changed: its fates may have too
        return keep, added

    def _paired_cut(self, messages: Sequence[Any]) -> tuple[int, int]:
        """Where a view paired by call id starts again: the last cut, or the very
        start when a new item shares a call id with an item before the cut."""
        call_ids = self.adapter.call_ids
        new = call_ids(messages[self.cut :])
        if new.isdisjoint(self._call_ids):
            self._call_ids |= new
            return self.cut, self.cut
        self._call_ids = call_ids(messages)
        return 0, 0

    def _append(self, piece: View, provider_messages: int, base: int) -> list[Any]:
        """Take the first ``provider_messages`` of ``piece`` into the view, placed at ``base``."""
        end = piece.starts[provider_messages]
        made = piece.messages[:end]
        refs = piece.refs[:end]
        for message, ref in zip(made, refs, strict=True):
            if ref != PASSTHROUGH:
                message[VIEW_KEY] += base
        self.refs += refs
        self.starts += [base + s for s in piece.starts[1 : provider_messages + 1]]
        return made

    def view(self, held: list[Any]) -> View:
        """The whole view, over the caller's view messages ``held``, to restore from."""
        return View(messages=held, refs=self.refs, starts=self.starts)


def _reuse(held: Sequence[Any], base: int, made: list[Any]) -> tuple[int, list[Any]]:
    """``(keep, added)`` for the view ``held[:base] + made``, reusing what ``held`` has."""
    same = 0
    limit = min(len(held) - base, len(made))
    while same < limit:
        old = held[base + same]
        if old is not made[same] and old != made[same]:
            break
        same += 1
    return base + same, made[same:]


@dataclass(slots=True)
class _LastRound:
    """A round's provider prompt (before any cache hint) and what it came from."""

    prompt: list[Any]
    messages: int  # provider messages then
    view: int  # view messages then
    scout: list[Any]  # the strategies' result over the view
    narration: int


def rebuilt(
    tracker: ViewTracker,
    messages: list[Any],
    view_messages: list[Any],
    scout: Prepared,
    keeps: bool,
    config: Config,
    cache_control: bool | None,
) -> Prepared:
    """The provider prompt and report from ``scout``, the strategies' result over
    the view: what :func:`scoutd.prepare` makes of its own view's result.

    While the view only grows, a result that is the last one followed by the
    new view messages gives the last provider prompt followed by the new
    provider messages (:func:`_extended`); any other is rebuilt whole.
    """
    chosen = tracker.adapter
    extended = _extended(tracker, messages, view_messages, scout.messages)
    if extended is not None:
        prompt, narration = extended
    else:
        rebuilt = chosen.restore(messages, tracker.view(view_messages), scout.messages)
        prompt, narration = rebuilt.messages, rebuilt.narration_dropped
    tracker.last = _LastRound(prompt, len(messages), len(view_messages), scout.messages, narration)
    hint = config.prompt.cache_control if cache_control is None else cache_control
    # the caller gets its own list: the one kept is extended next round
    prompt, stable = hinted(keeps, messages, list(prompt), scout.report, chosen, hint)
    reports = [msgspec.structs.replace(r, format=chosen.name) for r in scout.report]
    reports[-1] = msgspec.structs.replace(
        reports[-1], malformed=tracker.malformed, narration_dropped=narration, stable_prefix=stable
    )
    return Prepared(messages=prompt, report=reports)


def _extended(
    tracker: ViewTracker, messages: list[Any], view_messages: list[Any], result: list[Any]
) -> tuple[list[Any], int] | None:
    """The last round's provider prompt followed by the new provider messages, when
    that is what rebuilding ``result`` would give; None when it may not be.

    It is when ``result`` is the last result (the very same objects) followed by
    the new view messages, all kept as they are, and nothing else: the messages
    before keep their fates, and each new provider message comes back as it is,
    unless the format joins it with what comes before (an Anthropic turn merged
    with the one before it, a Responses call joining an earlier model turn).
    A last result that ended with new messages (inbox notices) is never the
    start of the next one: they are delivered once.
    """
    last = tracker.last
    if last is None:
        return None
    seen, added = len(last.scout), len(view_messages) - last.view
    if len(result) != seen + added:
        return None
    if not all(map(is_, result[:seen], last.scout)):
        return None
    if not all(map(is_, result[seen:], view_messages[last.view :])):
        return None
    if not _continues(tracker.adapter, messages, last):
        return None
    return last.prompt + messages[last.messages :], last.narration


def _continues(chosen: Adapter, messages: list[Any], last: _LastRound) -> bool:
    """Whether the first new provider message starts afresh in its format's rebuilding
    (``Adapter.continues``)."""
    start = last.messages
    return start == len(messages) or start == 0 or chosen.continues(messages, start, last.prompt)
