"""What a provider format's adapter is: its two directions, and what it declares.

The engine needs to know a few things of a format besides its view and its
rebuilding: where a piece of a conversation may be viewed on its own (the
session engine's view tracker, :mod:`scoutd.engine.view_tracker`), whether a
message appended to a rebuilt prompt comes back as itself, how inbox notices
land, and whether the format carries a cache breakpoint. Each adapter says so
here, so that no code outside the format's own module branches on its name
(docs/ARCHITECTURE.md, "Where to add").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .texts import ConversationTexts
from .view import Outcome, Rebuilt, View, outcome

__all__ = ["Adapter"]


@dataclass(frozen=True, slots=True)
class Adapter:
    """The two directions of one provider format, and what it declares of them.

    ``view(messages, mark, kept)``: the scout view, reusing the texts of the
    conversation's previous view kept in ``kept`` (:mod:`.texts`).
    ``opens_group(message)``: whether the view always starts a new group at
    ``message``, so that the messages before it can be viewed apart; None for
    a format that pairs calls by id wherever they stand, which gives
    ``call_ids(messages)`` instead: the ids its pairing reads (pieces viewed
    apart must share none).
    ``continues(messages, start, prompt)``: whether provider message ``start``,
    appended after ``prompt`` (the rebuilt prompt of ``messages[:start]``),
    comes back as itself rather than joined with what comes before.
    ``notices_join_turn``: inbox notices join the last user turn (one message
    for them all) instead of one message each. ``cache_hint``: the format
    carries a prompt-cache breakpoint (``cache_control``).
    """

    name: str
    view: Callable[[Sequence[Any], bool, ConversationTexts | None], View]
    rebuild: Callable[[Sequence[Any], View, Outcome], Rebuilt]
    opens_group: Callable[[Any], bool] | None
    continues: Callable[[Sequence[Any], int, Sequence[Any]], bool]
    call_ids: Callable[[Sequence[Any]], set[str]] = lambda messages: set()
    notices_join_turn: bool = False
    cache_hint: bool = False

    def restore(self, messages: Sequence[Any], shape: View, result: Sequence[Any]) -> Rebuilt:
        """The provider messages for the strategies' ``result`` over ``shape``, the
        view of ``messages``: ``messages`` themselves when nothing changed."""
        read = outcome(shape, result)
        if read.unchanged:
            return Rebuilt(list(messages))
        return self.rebuild(messages, shape, read)
