"""A recall call's arguments, read the one way every path reads them (docs/STRATEGIES.md).

Pure, and free of the engine, so that the client reads them as the library
does. :func:`recall_question` turns what a model sent into the question a
conversation answers (an output's number, or a text to search for), or into
the tool-error text that needs no conversation: arguments of the wrong type,
a malformed handle, a search too short or too long, a lone surrogate. The
client answers those itself, as :meth:`scoutd.Session.recall` does, and sends
only a question the wire's types carry, so that every path answers alike.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .messages import MAX_RECALL_SEARCH

__all__ = [
    "MAX_HANDLE_DIGITS",
    "MIN_SEARCH",
    "NO_CONVERSATION",
    "Question",
    "arguments_problem",
    "parse_handle",
    "recall_question",
]

# What a search must hold at least: a shorter text matches nearly every output.
MIN_SEARCH = 3
# The most digits a handle has, whether a text or an integer: more name no output,
# and Python will not even write an integer of over 4,300 digits as text.
MAX_HANDLE_DIGITS = 18
# The answer of a session that holds no conversation: before its first round that
# succeeded, or (in the daemon) once dropped while idle.
NO_CONVERSATION = (
    "no conversation is stored for this session yet (or it was dropped while"
    " idle): prepare a prompt in this session first"
)


class Question(NamedTuple):
    """What a conversation is asked: output ``number``, else the newest with ``search``."""

    number: int | None
    search: str | None


def parse_handle(handle: Any) -> int | None:
    """The number in ``"#37"``, ``"37"`` or ``37``; None when it is not one (at most
    :data:`MAX_HANDLE_DIGITS` digits, as a text or as an integer)."""
    if type(handle) is int:
        return handle if 0 < handle < 10**MAX_HANDLE_DIGITS else None
    if not isinstance(handle, str):
        return None
    text = handle.strip().removeprefix("#").strip()
    if not text.isascii() or not text.isdigit() or len(text) > MAX_HANDLE_DIGITS:
        return None
    number = int(text)
    return number if number > 0 else None


def arguments_problem(handle: Any, search: Any) -> str | None:
    """Why a recall call's arguments, as a model sent them, cannot be looked up; None when
    they can (a handle a text or a number, a search a text).

    A text must be one UTF-8 can carry: JSON's ``"\\ud800"`` gives a lone surrogate,
    which no output held (its message passes through, shown whole) and which the
    daemon's client cannot send; refused here, it is the same text in every path.
    """
    if not isinstance(handle, str | int | None) or not isinstance(search, str | None):
        return "handle and search must be strings"
    for name, value in (("handle", handle), ("search", search)):
        if type(value) is str and not _encodable(value):
            return f"{name} holds a lone surrogate (U+D800 to U+DFFF), which no tool output holds"
    return None


def recall_question(handle: Any, search: Any) -> Question | str:
    """The question ``handle`` and ``search`` ask, or the tool-error text that answers
    them without a conversation. A handle that names a number wins over the search."""
    problem = arguments_problem(handle, search)
    if problem is not None:
        return problem
    number = None if handle in (None, "") else parse_handle(handle)
    if handle not in (None, "") and number is None:
        return f'malformed handle {_quoted(handle)}: give a number such as "#37"'
    if number is not None:
        return Question(number, None)
    if not search:
        return 'give handle (a number such as "#37") or search (a text the output held)'
    if len(search) < MIN_SEARCH:
        return f"search {search!r} is too short: give at least {MIN_SEARCH} characters"
    if len(search) > MAX_RECALL_SEARCH:  # the daemon's bound: one answer in every path
        return (
            f"search is too long ({len(search)} characters):"
            f" give at most {MAX_RECALL_SEARCH} characters"
        )
    return Question(None, search)


def _encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _quoted(handle: Any) -> str:
    """``handle`` as a malformed-handle text quotes it: its first 40 characters (an
    integer too long for Python to write as text is described, not written)."""
    try:
        return repr(str(handle)[:40])
    except ValueError:  # past sys.get_int_max_str_digits()
        return f"<an integer of {handle.bit_length()} bits>"
