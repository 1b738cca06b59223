"""The role and content of every message, read once per prepare (docs/PERFORMANCE.md).

Several steps of one prepare read every message's ``role`` and ``content``:
format detection, the tool index, the token counts, the report's character
counts. On a long agent run each such pass costs a tenth of decoding the tool
messages, mostly in memory reads. :func:`columns_of` reads both once for the
common list (plain dicts that all have a string ``role`` and a ``content``);
``prepare`` hands the result to the first strategy it runs in its
``PrepareContext``, and the steps that would read the messages again ask
:func:`known_columns` first.

A :class:`Columns` is only valid while nothing changes the messages, which is
why it is shared with the first strategy alone (no other code runs between the
read and that strategy), for the very list object it was read from; it is
passed explicitly, so concurrent prepares never see each other's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

__all__ = ["Columns", "columns_of", "known_columns"]

_get_role = itemgetter("role")
_get_content = itemgetter("content")
_DICT = frozenset((dict,))
_STR = frozenset((str,))


@dataclass(frozen=True, slots=True)
class Columns:
    """``roles[i]`` and ``contents[i]`` of ``messages[i]``; ``lengths`` when every content is a str.

    ``content_types`` is the set of the contents' types.
    """

    messages: Sequence[Any]
    roles: list[str]
    contents: list[Any]
    content_types: frozenset[type]
    lengths: list[int] | None

    def over(self, messages: Sequence[Any]) -> Columns:
        """The same columns for another list holding the same message objects in order."""
        return Columns(messages, self.roles, self.contents, self.content_types, self.lengths)


def columns_of(messages: Sequence[Any], dicts: bool = False) -> Columns | None:
    """The columns of ``messages``, or None unless it is a list of plain dicts that all
    have a string ``role`` and a ``content`` (the other lists take the general paths).

    ``dicts``: the caller knows every message to be a plain dict already.
    """
    if type(messages) is not list or not (dicts or set(map(type, messages)) <= _DICT):
        return None
    try:
        roles = list(map(_get_role, messages))
        contents = list(map(_get_content, messages))
    except KeyError:
        return None
    if not set(map(type, roles)) <= _STR:
        return None
    content_types = frozenset(map(type, contents))
    lengths = list(map(len, contents)) if content_types <= _STR else None
    return Columns(messages, roles, contents, content_types, lengths)


def known_columns(messages: Sequence[Any], columns: Columns | None) -> Columns | None:
    """``columns`` when they were read from ``messages`` itself (unchanged in length)."""
    if columns is None or columns.messages is not messages:
        return None
    if len(messages) != len(columns.roles):
        return None
    return columns
