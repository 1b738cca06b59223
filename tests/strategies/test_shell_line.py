"""How a shell line splits into commands and words (``scoutd.strategies.shell_line``).

``shlex`` is the plain oracle for the words of a command with balanced quotes:
the classifier splits words with one linear regular expression instead (shlex
costs about three times as much per call, and grows faster than the text). A
character-by-character walk is the oracle for where a line splits outside
quotes.
"""

from __future__ import annotations

import shlex

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scoutd.strategies.shell_line import SPLIT, line_commands, split_words, unquoted_commands

# Pieces a command is made of: plain words, quoted phrases, escapes, blanks.
_PLAIN = st.text(alphabet="abcxyz019._/-=,:", min_size=1, max_size=6)
_SINGLE = st.text(alphabet='ab c"\\$', max_size=6).map(lambda t: f"'{t}'")
_DOUBLE = st.text(alphabet="ab c'$", max_size=6).map(lambda t: f'"{t}"')
_ESCAPED_QUOTE = st.sampled_from(['"a\\"b"', "\\ ", "\\'", '\\"', "a\\\\b"])
_WORD = st.lists(st.one_of(_PLAIN, _SINGLE, _DOUBLE, _ESCAPED_QUOTE), min_size=1, max_size=3)
_BLANK = st.sampled_from([" ", "  ", "\t", "\n"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_WORD, _BLANK), max_size=8))
def test_the_words_are_the_shells(parts: list[tuple[list[str], str]]) -> None:
    command = "".join("".join(word) + blank for word, blank in parts)
    assert split_words(command) == shlex.split(command, comments=False)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab &|;\n", max_size=30))
def test_the_commands_of_a_line_are_those_of_a_split(line: str) -> None:
    found = list(line_commands(line))
    assert [segment for segment, _ in found] == SPLIT.split(line)
    separators = [match.group() for match in SPLIT.finditer(line)]
    assert [piped for _, piped in found] == [False, *(s in ("|", "|&") for s in separators)]


def test_a_quote_left_open_leaves_the_other_words() -> None:
    assert split_words('cat "src/a.py') == ["cat", "src/a.py"]
    assert split_words("sed -n '1,9p src/a.py") == ["sed", "-n", "1,9p", "src/a.py"]


def _closing(line: str, at: int) -> int:
    """Where the quote opened at ``at`` closes, -1 when it never does (then it is no
    quote): a single quote at the next one, a double one at the next unescaped one."""
    quote, i = line[at], at + 1
    while i < len(line):
        if quote == '"' and line[i] == "\\":
            i += 2
            continue
        if line[i] == quote:
            return i
        i += 1
    return -1


def _split_outside_quotes(line: str) -> list[str]:
    """The oracle: a walk that steps over quoted text and escapes, and splits at each
    separator it meets outside them (two-character ones first)."""
    commands, start, i = [], 0, 0
    while i < len(line):
        char = line[i]
        if char in "'\"" and (end := _closing(line, i)) != -1:
            i = end + 1
        elif char == "\\" and i + 1 < len(line):
            i += 2
        elif line[i : i + 2] in ("&&", "||", "|&"):
            commands.append(line[start:i])
            i = start = i + 2
        elif char in ";|\n":
            commands.append(line[start:i])
            i = start = i + 1
        else:
            i += 1
    return [*commands, line[start:]]


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet="a '\"\\|;&\n", max_size=24))
def test_a_line_splits_outside_quotes_as_a_walk_splits_it(line: str) -> None:
    found = list(unquoted_commands(line))
    event("some separator quoted" if len(found) < len(SPLIT.split(line)) else "none quoted")
    assert found == _split_outside_quotes(line)
