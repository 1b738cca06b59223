"""The indices answer of a session-less ``prepare_prompt`` (docs/PROTOCOL.md).

A client that sends ``"answer": "indices"`` gets, instead of every prepared
message, a ``layout``: for each stretch of the prepared prompt either the
request messages it keeps unchanged (an index ``i``, or ``[start, stop]`` for
the run ``start .. stop - 1``) or a new message, whole (a JSON object). The
client already holds the kept messages: it rebuilds the prompt from its own
objects, so the answer carries and decodes only what changed.

The daemon builds the layout (:func:`layout_of`); the clients apply it
(:func:`rebuild`). No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["LayoutError", "layout_of", "rebuild"]


class LayoutError(ValueError):
    """A layout that does not fit the messages it is applied to (a daemon's bug)."""


def layout_of(request: Sequence[Any], prepared: Sequence[Any]) -> list[Any] | None:
    """The layout of ``prepared`` over ``request``, or None when it has no such form.

    "Kept unchanged" means the very same object: the daemon decoded the request
    into fresh objects and the strategies never modify their input, so a
    prepared message that *is* request message ``i`` is equal to what the
    client sent as message ``i``; anything built anew is sent whole. O(n): one
    identity map, one pass. None when a new message is not a JSON object (it
    could not be told from an index), so the caller answers ``messages``.
    """
    # not mutated: every zip here pairs lists of one length (strict= changes nothing)
    where = dict(zip(map(id, request), range(len(request)), strict=True))  # pragma: no mutate
    positions = list(map(where.get, map(id, prepared)))
    layout: list[Any] = []
    # the run of kept request messages being gathered: start .. stop - 1; empty
    # while start == stop (not mutated: any equal pair is an empty run)
    start = stop = -1  # pragma: no mutate
    for position, message in zip(positions, prepared, strict=True):  # pragma: no mutate
        if position is not None and position == stop:
            stop += 1
            continue
        _close_run(layout, start, stop)
        if position is None:
            if type(message) is not dict:
                return None
            layout.append(message)
            start = stop = -1  # pragma: no mutate
        else:
            start, stop = position, position + 1
    _close_run(layout, start, stop)
    return layout


def _close_run(layout: list[Any], start: int, stop: int) -> None:
    """Add the run ``start .. stop - 1`` to ``layout``: nothing, an index, or ``[start, stop]``."""
    length = stop - start
    if length == 1:
        layout.append(start)
    elif length:
        layout.append([start, stop])


def rebuild(layout: Sequence[Any], sent: Sequence[Any]) -> list[Any]:
    """The prepared prompt from its layout and the messages sent, as objects of ``sent``.

    Raises:
        LayoutError: an index outside ``sent``, a run that is not ``[start, stop]``
            with ``start < stop``, or an item that is none of the three forms.
    """
    count = len(sent)
    prompt: list[Any] = []
    for item in layout:
        kind = type(item)
        if kind is dict:
            prompt.append(item)
        elif kind is int:
            if not 0 <= item < count:
                raise LayoutError(f"layout index {item} outside the {count} messages sent")
            prompt.append(sent[item])
        elif (
            kind is list
            and len(item) == 2
            and type(item[0]) is int
            and type(item[1]) is int
            and 0 <= item[0] < item[1] <= count
        ):
            prompt += sent[item[0] : item[1]]
        else:
            raise LayoutError(f"layout item {item!r} is not an index, a run or a message")
    return prompt
