"""What a message must be: one rule for the library and the daemon (docs/PROTOCOL.md).

Pure: :func:`message_problem` names the first way a message list breaks the
rule; :func:`check_messages` raises for it. The library's ``prepare`` applies
it; the daemon's wire types (``list[dict[str, Any]]`` for ``messages`` and
``append``) are the same rule, enforced as a request is decoded, so a list one
accepts the other accepts too (tests/test_message_rules.py checks both).

The rule: the messages are a list (any sequence but a string, bytes or a
mapping) of objects (mappings with string keys, as JSON has them). That is
all. What an object holds is a matter of its format (docs/FORMATS.md): a
message malformed for its format (no ``content``, no ``role``, a ``tool``
message without its call) passes through untouched and is counted in the
report's ``malformed``, on both paths alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple

from ..errors import InvalidMessages

__all__ = [
    "InvalidMessages",
    "MessageProblem",
    "check_messages",
    "check_plain",
    "message_problem",
    "too_deep",
]


class MessageProblem(NamedTuple):
    """Why a message list breaks the rule: the message's position (None: the list itself)."""

    position: int | None
    reason: str


def _type_name(value: Any) -> str:
    return type(value).__name__


_DICT = frozenset((dict,))
_STR = frozenset((str,))


def _problem_of(message: Any) -> str | None:
    if not isinstance(message, Mapping):
        return f"a message must be an object, got {_type_name(message)}"
    for key in message:
        if not isinstance(key, str):
            return f"a message's keys must be strings, got {_type_name(key)}"
    return None


def _plain(messages: Sequence[Any]) -> bool:
    """Whether every message is a plain dict whose keys are all plain strings.

    The common case, checked in C (chain() walks each dict's keys). A
    per-message Python loop cost about a tenth of a whole prepare at 2,000
    calls; anything else takes the loop of :func:`message_problem`.
    """
    return (
        set(map(type, messages)) <= _DICT and set(map(type, chain.from_iterable(messages))) <= _STR
    )


def message_problem(messages: Any, start: int = 0) -> MessageProblem | None:
    """The first way ``messages`` breaks the rule, or None when it keeps it.

    ``start``: the messages before it are known to keep the rule (a session
    checks only what is new each round).
    """
    if isinstance(messages, (str, bytes, bytearray, Mapping)) or not isinstance(messages, Sequence):
        return MessageProblem(None, f"must be a list of messages, got {_type_name(messages)}")
    new = messages[start:] if start else messages
    if _plain(new):
        return None
    for position in range(start, len(messages)):
        message = messages[position]
        reason = _problem_of(message)
        if reason is not None:
            return MessageProblem(position, reason)
    return None


def check_messages(messages: Any, start: int = 0) -> None:
    """Raise :class:`InvalidMessages` when ``messages`` breaks the rule (from ``start`` on)."""
    check_plain(messages, start)


def check_plain(messages: Any, start: int = 0) -> bool:
    """:func:`check_messages`, and whether the messages checked are plain.

    Plain: a ``list`` of plain dicts whose keys are all plain strings, so that
    reading them runs no code of the caller's (``prepare`` then reads each
    message's role and content once for all its steps; docs/PERFORMANCE.md).
    """
    if type(messages) is list:
        new = messages[start:] if start else messages
        if _plain(new):
            return True
    problem = message_problem(messages, start)
    if problem is not None:
        raise InvalidMessages(problem.position, problem.reason)
    return False


def too_deep() -> InvalidMessages:
    """The refusal of messages nested deeper than the interpreter walks (a ``RecursionError``
    while reading or encoding them): bad input, as the daemon answers it, never a crash."""
    return InvalidMessages(None, "nested too deeply to read (past the recursion limit)")
