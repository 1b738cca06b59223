"""How a shell line reads, as far as telling what it does needs: its commands, their
words and programs, its comment lines and here-documents.

:mod:`.tool_kinds` classifies a shell call from these. A line is split into
commands at ``&&``, ``||``, ``;``, ``|``, ``|&`` and line ends outside quotes
(:func:`line_commands`), a command into words as a POSIX shell splits them.
Pure code, linear in the text: a client writes it (docs/RELIABILITY.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = [
    "SHELLS",
    "SPLIT",
    "line_commands",
    "program_name",
    "program_words",
    "split_words",
    "without_comments",
    "without_heredocs",
]

# `|&` pipes standard error too: a pipe, not `|` followed by a command `&`.
SPLIT = re.compile(r"&&|\|\||;|\|&|\||\n")

# A shell word: unquoted characters, '...', "..." (with backslash escapes) and
# backslash-escaped characters, side by side. Possessive: linear in the text.
_WORD = re.compile(r"""(?:[^\s'"\\]++|'[^']*+'|"(?:[^"\\]++|\\.)*+"|\\.)++""", re.S)
# The quoting inside a word, replaced by what it quotes.
_QUOTING = re.compile(r"""'([^']*+)'|"((?:[^"\\]++|\\.)*+)"|\\(.)""", re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)
# One command, up to the first separator outside quotes, and that separator
# (none at the end of the line): past quoted runs and escaped characters (a quote
# left open, or a backslash at the end, is a character like any other, as is a
# lone ``&``). Possessive: linear in the text.
_COMMAND = re.compile(
    r"""((?:[^'"\\&|;\n]++|'[^']*+'|"(?:[^"\\]++|\\.)*+"|\\.|&(?!&)|['"\\])*+)"""
    f"({SPLIT.pattern})?",
    re.S,
)


def _unquoted(match: re.Match[str]) -> str:
    single, double, escaped = match.groups()
    if single is not None:
        return single
    if double is not None:
        return _ESCAPE.sub(r"\1", double)
    return escaped  # a backslash's character: the third group matched when the others did not


def split_words(segment: str) -> list[str]:
    """The words of a command as a POSIX shell splits them, quotes and line
    continuations removed (a quote left open is dropped: the rest still reads as
    words)."""
    if "'" not in segment and '"' not in segment and "\\" not in segment:
        return segment.split()  # no quoting: the same words (both split at str.isspace)
    # a backslash before a line end continues the line: the shell removes both (not
    # inside single quotes, where it keeps them: a rare case, where no program starts)
    segment = segment.replace("\\\n", "")
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
    and the shell's keywords (none for a ``for`` line), without the ``)`` that
    closes a subshell after its last word."""
    words = split_words(segment)
    if words and (words[0] in _BEFORE or "=" in words[0] or words[0].startswith("(")):
        words = _past_prefix(words)
    if words and words[-1].endswith(")"):
        words = _unclosed(words)
    return words  # the common case at once: the program comes first, no `)` after


def _past_prefix(words: list[str]) -> list[str]:
    """``words`` from the program on: past keywords, assignments, wrappers, a ``(``."""
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


def _unclosed(words: list[str]) -> list[str]:
    """``words`` whose last word loses the ``)`` it does not open (``(cd x && cat
    a.py)``: ``a.py``); one it opens stays (``f(x)``, ``$(pwd)``)."""
    last = words[-1]
    closing = len(last) - len(last.rstrip(")"))
    extra = min(closing, last.count(")") - last.count("("))
    if extra <= 0:
        return words
    return [*words[:-1], last[:-extra]] if extra < len(last) else words[:-1]


def line_commands(command: str) -> Iterator[tuple[str, bool]]:
    """The commands of a shell line, split at its separators outside quotes (``grep
    -E "a|b" f`` is one command; an escaped ``\\|`` splits nothing), one at a time,
    each with whether a pipe feeds it: the first that decides is often the first of
    many (a heredoc's lines)."""
    at, piped = 0, False
    while True:
        found = _COMMAND.match(command, at)
        assert found is not None  # it matches an empty command too
        segment, separator = found.groups()
        yield segment, piped
        if separator is None:  # the end of the line
            return
        piped = separator in ("|", "|&")
        at = found.end()


# A line that is a comment (``# Let me look at the file first``): no command, and no
# separator in it ends one. Found by its newline (a literal the search jumps to),
# the first lines apart.
_COMMENT_LINE = re.compile(r"\n[ \t]*#[^\n]*")


def without_comments(command: str) -> str:
    """``command`` without its comment lines."""
    while command.lstrip(" \t").startswith("#"):
        _, _, command = command.partition("\n")
    return _COMMENT_LINE.sub("", command)


# What a here-document scan stops at: a quoted run (one left open runs to the end),
# an escaped character, a comment (a ``#`` that starts a word, to the line's end),
# a line end, a separator, an arithmetic ``((`` or ``))``, or
# an unquoted ``<<`` with its delimiter word, quoted or not (``<<-`` strips leading
# tabs; ``<<<``, a here-string, is told apart by the ``<`` before the match), and
# the CR that ends it on a CR-LF line (the shell's word holds it: so does the
# delimiter line, ``EOF\r``).
_HEREDOC_SCAN = re.compile(
    r"""'[^']*+'?|"(?:[^"\\]++|\\.)*+"?|\\.|(?<!\S)\#[^\n]*+|\n|&&|\|&|[|;]|\(\(|\)\)"""
    r"""|<<(-?)[ \t]*(?:'([^'\n]*+)'|"([^"\n]*+)"|\\?([\w.+-]++))(\r?)""",
    re.S,
)
_SEPARATORS = frozenset({"&&", "|&", "|", ";"})  # `||` is read as two `|`
# The shells: one that reads a here-document as its script runs its lines as
# commands; one given ``-c`` runs that script (tool_kinds).
SHELLS = frozenset({"bash", "sh", "zsh", "dash"})


def without_heredocs(command: str) -> str:
    """``command`` without the bodies of its here-documents (``cat > f.py <<'EOF'``,
    then the lines up to ``EOF``): they are data the command reads, not commands,
    and a runner or a separator in them runs nothing. A shell reading one
    (``bash <<EOF``) keeps it: its lines are commands (here-documents inside it
    are kept too). A shift (``$((1 << 2))``) is none. One pass over the text:
    each command's program is read once, however many ``<<`` it holds."""
    if "<<" not in command:
        return command
    kept: list[str] = []
    start = at = 0
    # the current line's, in order: the word, `<<-`, and whether a shell reads the body
    delimiters: list[tuple[str, bool, bool]] = []
    command_start, shell, arithmetic = 0, None, 0  # the current command's; shell: not read yet
    while (found := _HEREDOC_SCAN.search(command, at)) is not None:
        at = found.end()
        token = found.group()
        if token == "\n":
            for delimiter, tabs, commands in delimiters:
                end = _after_body(command, at, delimiter, tabs)
                kept.append(command[start : end if commands else at])
                start = at = end
            delimiters = []
            command_start, shell, arithmetic = at, None, 0
        elif token in ("((", "))"):
            arithmetic = arithmetic + 1 if token == "((" else max(0, arithmetic - 1)
        elif token in _SEPARATORS:  # the next command's program is read anew
            command_start, shell = at, None
        elif not token.startswith("<<"):
            continue  # a quoted run, an escaped character or a comment
        elif command[found.start() - 1 : found.start()] != "<" and not arithmetic:
            if shell is None:
                words = program_words(command[command_start : found.start()])
                shell = bool(words) and program_name(words[0]) in SHELLS
            dash, single, double, bare, carriage_return = found.groups()
            word = single if single is not None else double if double is not None else bare
            word += carriage_return  # a CR-LF line's word ends in CR, as its delimiter line does
            delimiters.append((word, bool(dash), shell))
    kept.append(command[start:])
    return "".join(kept)


def _after_body(command: str, at: int, delimiter: str, tabs: bool) -> int:
    """Where the text after a here-document's body starting at ``at`` (just past a
    line end) resumes: past its delimiter's line, or at the end when none ends it."""
    if tabs:  # rare: line by line (a pattern for each delimiter would be compiled)
        while at < len(command):
            end = command.find("\n", at)
            end = len(command) if end == -1 else end
            if command[at:end].lstrip("\t") == delimiter:
                return min(end + 1, len(command))
            at = end + 1
        return len(command)
    # Found by a plain search, from the line end before `at`. Not mutated (the lines so
    # marked): a line holding a `<<` and a word never ends in a line end, and a match
    # that is not a whole line is followed by none, so looking one further changes nothing.
    needle = "\n" + delimiter
    found = command.find(needle, at - 1)  # pragma: no mutate
    while found != -1:
        end = found + len(needle)
        if end == len(command) or command[end] == "\n":
            return min(end + 1, len(command))
        found = command.find(needle, found + 1)  # pragma: no mutate
    return len(command)
