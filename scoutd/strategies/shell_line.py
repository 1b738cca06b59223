"""How a shell line reads, as far as telling what it does needs: its commands, their
words and programs, its comment lines.

:mod:`.tool_kinds` classifies a shell call from these. A line is split into
commands at ``&&``, ``||``, ``;``, ``|``, ``|&`` and line ends wherever they
stand (:func:`line_commands`; :func:`unquoted_commands` only outside quotes), a
command into words as a POSIX shell splits them. Pure code, linear in the
text: a client writes it (docs/RELIABILITY.md).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator

__all__ = [
    "SPLIT",
    "line_commands",
    "program_name",
    "program_words",
    "split_words",
    "unquoted_commands",
    "without_comments",
]

# `|&` pipes standard error too: a pipe, not `|` followed by a command `&`.
SPLIT = re.compile(r"&&|\|\||;|\|&|\||\n")

# A shell word: unquoted characters, '...', "..." (with backslash escapes) and
# backslash-escaped characters, side by side. Possessive: linear in the text.
_WORD = re.compile(r"""(?:[^\s'"\\]++|'[^']*+'|"(?:[^"\\]++|\\.)*+"|\\.)++""", re.S)
# The quoting inside a word, replaced by what it quotes.
_QUOTING = re.compile(r"""'([^']*+)'|"((?:[^"\\]++|\\.)*+)"|\\(.)""", re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)


def _unquoted(match: re.Match[str]) -> str:
    single, double, escaped = match.groups()
    if single is not None:
        return single
    if double is not None:
        return _ESCAPE.sub(r"\1", double)
    return escaped  # a backslash's character: the third group matched when the others did not


def split_words(segment: str) -> list[str]:
    """The words of a command as a POSIX shell splits them, quotes removed (a quote left
    open is dropped: the rest still reads as words)."""
    if "'" not in segment and '"' not in segment and "\\" not in segment:
        return segment.split()  # no quoting: the same words (both split at str.isspace)
    return [_QUOTING.sub(_unquoted, word) for word in _WORD.findall(segment)]


def program_name(word: str) -> str:
    """A program's name without its directory: ``sed`` for ``/usr/bin/sed``."""
    return word.rpartition("/")[2]


# The shell's own words around a command (``if grep -q x f; then cat f; fi``, ``do``,
# a subshell's ``(``): none is a program. A ``for`` line runs nothing itself (``for
# f in a.py b.py``): its body, on the next commands, decides.
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "while", "until", "do", "done", "!", "{", "}"}
)
# What may come before a command's program: the keywords, a ``for`` line, wrappers.
_BEFORE = _KEYWORDS | {"for", "timeout", "sudo", "env"}


def program_words(segment: str) -> list[str]:
    """The words of one command, past variable assignments, ``timeout``/``sudo``/``env``
    and the shell's keywords (none for a ``for`` line)."""
    words = split_words(segment)
    if not words or not (words[0] in _BEFORE or "=" in words[0] or words[0].startswith("(")):
        return words  # the common case, at once: the program comes first
    while words:
        first = words[0]
        if first.startswith("("):  # a subshell: (cd x && cat f)
            words = [first.lstrip("("), *words[1:]] if first.strip("(") else words[1:]
        elif first == "for":
            return []
        elif first in _KEYWORDS or "=" in first or first in ("sudo", "env"):
            words = words[1:]
        elif first == "timeout":
            words = words[2:]
        else:
            break
    return words


def line_commands(command: str) -> Iterator[tuple[str, bool]]:
    """The commands of a shell line (``SPLIT.split``), one at a time, each with
    whether a pipe feeds it: the first that decides is often the first of many
    (a heredoc's lines)."""
    start = 0  # pragma: no mutate (a slice from None starts at 0 too)
    piped = False
    for separator in SPLIT.finditer(command):
        yield command[start : separator.start()], piped
        start = separator.end()
        piped = separator.group() in ("|", "|&")
    yield command[start:], piped


def unquoted_commands(command: str) -> Iterator[str]:
    """The commands of a shell line split at its separators outside quotes only
    (``grep -E "a|b" f`` is one command; an escaped ``\\|`` splits nothing)."""
    quoted = [match.span() for match in _QUOTING.finditer(command)]
    starts = [start for start, _ in quoted]
    start = 0  # pragma: no mutate (a slice from None starts at 0 too)
    looked = 0
    while (separator := SPLIT.search(command, looked)) is not None:
        at = bisect_right(starts, separator.start()) - 1
        if at >= 0 and separator.start() < quoted[at][1]:
            looked = quoted[at][1]  # inside quotes (or escaped): look on after them,
            continue  # where a separator may start (``\\||``: an escaped ``|``, then a pipe)
        yield command[start : separator.start()]
        start = looked = separator.end()
    yield command[start:]


# A line that is a comment (``# Let me look at the file first``): no command, and no
# separator in it ends one. Found by its newline (a literal the search jumps to),
# the first lines apart.
_COMMENT_LINE = re.compile(r"\n[ \t]*#[^\n]*")


def without_comments(command: str) -> str:
    """``command`` without its comment lines."""
    while command.lstrip(" \t").startswith("#"):
        _, _, command = command.partition("\n")
    return _COMMENT_LINE.sub("", command)
