"""How a shell line splits into commands and words (``scoutd.strategies.shell_line``).

``shlex`` is the plain oracle for the words of a command with balanced quotes:
the classifier splits words with one linear regular expression instead (shlex
costs about three times as much per call, and grows faster than the text). A
character-by-character walk is the oracle for where a line splits outside
quotes; a line built around a here-document, its body known, for what is left
of it once the body goes.
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from scoutd.strategies import shell_line
from scoutd.strategies.shell_line import (
    SPLIT,
    line_commands,
    program_words,
    split_words,
    without_heredocs,
)

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


def test_a_continued_line_is_one_command_of_the_words_around_it() -> None:
    """A backslash before a line end joins the lines, as the shell does: the
    command after it is the one its program starts (``\\⏎sed -i ... f``)."""
    line = "\\\nsed -i 's/a/b/' \\\n  src/a.py && \\\ngit diff"
    assert [program_words(s) for s, _ in line_commands(line)] == [
        ["sed", "-i", "s/a/b/", "src/a.py"],
        ["git", "diff"],
    ]
    assert split_words("ca\\\nt a.py") == ["cat", "a.py"]


def test_a_pipe_inside_quotes_feeds_nothing() -> None:
    line = "sed -n '1p;2p' a.py | grep -E \"x|y\" || echo 'a | b'"
    assert list(line_commands(line)) == [
        ("sed -n '1p;2p' a.py ", False),
        (' grep -E "x|y" ', True),
        (" echo 'a | b'", False),
    ]


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
    found = [segment for segment, _ in line_commands(line)]
    event("some separator quoted" if len(found) < len(SPLIT.split(line)) else "none quoted")
    assert found == _split_outside_quotes(line)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat > t.py <<'EOF'\nimport pytest\nEOF\npython t.py", "cat > t.py <<'EOF'\npython t.py"),
        ('cat > t.py << "EOF"\nx; y | z\nEOF', 'cat > t.py << "EOF"\n'),
        ("cat > t.py <<\\EOF\nx\nEOF\nls", "cat > t.py <<\\EOF\nls"),
        ("cat <<-END > t.py\n\tx\n\t\tEND\nls", "cat <<-END > t.py\nls"),
        ("cat <<END > t.py\nx\n\tEND\nEND", "cat <<END > t.py\n"),  # no `-`: tabs end nothing
        ("cat <<-END > t.py\n\tx", "cat <<-END > t.py\n"),  # never ended
        ("END\ncat <<-END > t.py\n\tx\n\tEND\nls", "END\ncat <<-END > t.py\nls"),
        ("cat <<A <<B\na\nA\nb\nB\nls", "cat <<A <<B\nls"),  # two bodies, in order
        ("cat > t.py <<EOF\nx\nEOF \nls", "cat > t.py <<EOF\n"),  # `EOF ` is no delimiter
        ("cat > t.py <<EOF\nx\nls", "cat > t.py <<EOF\n"),  # never ended: the rest is body
        # CR-LF lines: the word and its delimiter line both end in CR, as the shell reads them
        ("cat > t.py <<EOF\r\nx\r\nEOF\r\nls\r\n", "cat > t.py <<EOF\r\nls\r\n"),
        ("cat > t.py <<'EOF'\r\nx\r\nEOF\r\nls", "cat > t.py <<'EOF'\r\nls"),
        ("cat > t.py <<EOF\r\nx\nEOF\nls", "cat > t.py <<EOF\r\n"),  # `EOF` is not `EOF\r`
        ("cat > t.py <<EOF | tail\nx\nEOF", "cat > t.py <<EOF | tail\n"),
        ("cat > t.py <<EOF\nit's\nEOF\npytest", "cat > t.py <<EOF\npytest"),
        ("cat > t.py <<''\nx\n\nls", "cat > t.py <<''\nls"),  # an empty delimiter
        ("echo $((1 << 2)); cat > t.py <<E\nx\nE\nls", "echo $((1 << 2)); cat > t.py <<E\nls"),
        ("bash -c x; cat > t.py <<E\nx\nE\nls", "bash -c x; cat > t.py <<E\nls"),
        ("bash -c x\ncat > t.py <<E\nx\nE\nls", "bash -c x\ncat > t.py <<E\nls"),
        ("bash -c x | cat > t.py <<E\nx\nE", "bash -c x | cat > t.py <<E\n"),
        ("bash -c x && cat > t.py <<E\nx\nE", "bash -c x && cat > t.py <<E\n"),
        ("echo $((1\ncat > t.py <<E\nx\nE\nls", "echo $((1\ncat > t.py <<E\nls"),
        # a shell's body stays, and the next body is found after it
        ("bash <<A; cat > t.py <<B\nls\nA\nx\nB\npwd", "bash <<A; cat > t.py <<B\nls\nA\npwd"),
        # not here-documents: a shell reads the lines, a here-string, quoted, a shift
        ("bash <<EOF\npytest -q\nEOF", None),
        ("cd r && sudo bash -s <<EOF\npytest\nEOF", None),
        ("/bin/sh <<EOF\npytest\nEOF", None),
        ("cat x |& bash <<EOF\npytest\nEOF", None),
        ("grep x <<< EOF\nls", None),
        ("grep x <<< 'a\nb'\nls", None),
        ('python -c "x = 1 << 2\nprint(x)"\nls', None),
        ("echo $((1 << 2))\nls", None),
        ("echo $(( ((1)) << 2 ))\nls", None),  # nested
        ("cat a.py", None),
        ("cd r  # go <<here\ncat a.py", None),  # a comment: no here-document
        ("cd r; echo a#b <<E\nx\nE\nls", "cd r; echo a#b <<E\nls"),  # no comment
    ],
)
def test_a_heredocs_body_is_left_out(command: str, expected: str | None) -> None:
    """A here-document's body is data its command reads: its lines run nothing.
    ``None``: the line is left as it is."""
    assert without_heredocs(command) == (command if expected is None else expected)


def _count(n: int) -> str:
    return str(n) if n < 2 else "2+"


# Lines of a here-document's body: quotes left open, runners, separators, another
# ``<<``, the delimiter inside a line or with blanks around it.
_BODY_LINE = st.lists(
    st.sampled_from(
        ["import pytest", "it's", '"', "a; b", "x | y", "<<", "EOF", " EOF", "EOF ", "\\", "#"]
    ),
    max_size=4,
).map("".join)
# Lines after it, with what is left of each: another here-document loses its body.
_AFTER = st.sampled_from(
    [("", ""), ("ls", "ls"), ("pytest -q", "pytest -q"), ("cat <<X\na\nX\nls", "cat <<X\nls")]
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["cat > t.py ", "python - ", "cd r && tee t.txt ", "sed -f - a.py "]),
    st.sampled_from(["<<", "<< ", "<<-"]),
    st.sampled_from(["EOF", "'EOF'", '"EOF"', "\\EOF"]),
    st.sampled_from(["", " | tail -5", " && pytest -q", " > out.txt"]),
    st.lists(_BODY_LINE, max_size=5),
    st.booleans(),
    st.lists(_AFTER, max_size=3),
)
def test_what_is_left_of_a_heredoc_line(
    program: str,
    operator: str,
    delimiter: str,
    rest: str,
    body: list[str],
    indented: bool,
    after: list[tuple[str, str]],
) -> None:
    """Built from its parts, a line with a here-document loses exactly its body and
    its delimiter's line (with ``<<-``, a delimiter indented by tabs)."""
    body = [line for line in body if line != "EOF"]
    tabs = "\t" if indented and operator == "<<-" else ""
    head = program + operator + delimiter + rest
    lines = [head, *(tabs + line for line in body), tabs + "EOF", *(line for line, _ in after)]
    event(f"body lines: {_count(len(body))}; lines after: {_count(len(after))}")
    left = "\n".join(left for _, left in after)
    assert without_heredocs("\n".join(lines)) == head + "\n" + left


def test_a_commands_program_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many ``<<`` in one command read its program once: reading the text before
    each of them again made a hostile line cost its length squared."""
    calls: list[str] = []
    real = shell_line.program_words

    def counted(segment: str) -> list[str]:
        calls.append(segment)
        return real(segment)

    monkeypatch.setattr(shell_line, "program_words", counted)
    assert without_heredocs("cat " + "<<a " * 500) == "cat " + "<<a " * 500
    assert calls == ["cat "]


def _without_closing(word: str) -> str:
    """The oracle: drop a last ``)`` while the word has more ``)`` than ``(``."""
    while word.endswith(")") and word.count(")") > word.count("("):
        word = word[:-1]
    return word


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="a.()$", min_size=1, max_size=10))
def test_a_subshells_closing_leaves_the_last_word(word: str) -> None:
    """``(cd x && cat a.py)``: the ``)`` closes the subshell; one the word opens
    (``f(x)``, ``$(pwd)``) is part of it."""
    left = _without_closing(word)
    event("loses a )" if left != word else "kept whole")
    assert program_words("cat " + word) == (["cat", left] if left else ["cat"])
