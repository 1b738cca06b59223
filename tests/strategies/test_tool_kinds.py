"""The call classifier: what a shell call does, and its bound on what it reads.

How a line splits into commands and words is tested in ``test_shell_line.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.strategies.retention import retention_key
from scoutd.strategies.tool_kinds import (
    _TEST,
    EDIT,
    GIT,
    KINDS,
    MAX_COMMAND_CHARS,
    OTHER,
    READ,
    SCRIPT,
    SEARCH,
    TEST,
    WEB,
    CallKind,
    _runs_tests,
    call_kind,
)

# Pieces of a command line around test runners: whole runner names, their parts and
# hints glued to word characters (a word boundary or not), separators, blanks.
_RUNNER_PIECES = st.sampled_from(
    [
        "pytest", "py.test", "unittest", "tox", "nox", "jest", "vitest", "runtests",
        "go test", "cargo test", "mvn test", "npm test", "pnpm run test", "yarn run test",
        "mise run test", "task test", "make test", "test", "tests", "run", "pnpm run ",
        "x", "_", "9", ".", "-", "/", " ", "  ", "\n", "&&", "|", ";", "'", "t", "es",
    ]
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(_RUNNER_PIECES, max_size=12))
def test_a_runner_is_found_as_the_whole_search_finds_it(pieces: list[str]) -> None:
    """The windowed look (``_runs_tests``) answers as one search of the whole line."""
    command = "".join(pieces)
    assert _runs_tests(command) == (_TEST.search(command) is not None)


def test_the_windowed_look_meets_both_answers() -> None:
    """The property above reaches both answers, and the edges of a window."""
    assert _runs_tests("cd /r && pnpm run test") and _runs_tests("xx; runtests.py")
    assert _runs_tests("a" * 5000 + " pytest")  # far from the line's start
    assert not _runs_tests("latest attest contest")  # hints inside other words
    assert not _runs_tests("mypytest") and _runs_tests("my pytest")
    assert not _runs_tests("")


def test_only_the_head_of_a_long_command_is_read() -> None:
    """A hostile command of a megabyte is classified from its first characters alone."""
    head = "cat src/app.py | sed -n 10,20p "
    for tail in ("x" * 1_000_000, '"' + "y" * 1_000_000, ";" * 1_000_000):
        command = head + tail
        whole = call_kind("bash", {"command": command})
        assert whole == call_kind("bash", {"command": command[:MAX_COMMAND_CHARS]})
        assert (whole.kind, whole.target, whole.lines) == ("file read", "src/app.py", (10, 20))
    listed = call_kind("bash", {"cmd": ["grep", "-rn", "x"] + ["y"] * 100_000})
    assert listed.kind == "search/listing"
    assert len(listed.key) <= MAX_COMMAND_CHARS


def test_codex_shapes_are_read_as_what_they_do() -> None:
    """Codex CLI runs a command as an argv, ``["bash", "-lc", "cat a.py"]``, a built-in
    shell call lists ``commands``, and a freeform patch names its files in ``*** Update
    File:`` lines: a read, a search and an edit of that file (a script run, other and
    an edit of nothing before)."""
    read = call_kind("shell", {"command": ["bash", "-lc", "cat src/a.py"]})
    assert (read.kind, read.target) == (READ, "src/a.py")
    assert call_kind("shell", {"commands": ["rg -n needle src"]}).kind == SEARCH
    assert call_kind("shell", {"command": ["ls", "-la"]}).kind == call_kind("shell", "ls -la").kind
    patch = "*** Begin Patch\n*** Update File: src/b.py\n@@\n-x\n+y\n*** End Patch"
    edit = call_kind("apply_patch", {"input": patch})
    assert (edit.kind, edit.target) == (EDIT, "src/b.py")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # a read piped into a search before anything narrows it: that search
        ("cat a.py | grep -n foo -A 30", CallKind(SEARCH, key="cat a.py | grep -n foo -A 30")),
        ("cat a.py | grep foo | head -5", CallKind(SEARCH, key="cat a.py | grep foo | head -5")),
        ("cd /r && cat a.py | grep x", CallKind(SEARCH, key="cd /r && cat a.py | grep x")),
        ("nl -ba a.py | rg def", CallKind(SEARCH, key="nl -ba a.py | rg def")),
        ("cat a.py | wc -l", CallKind(SEARCH, key="cat a.py | wc -l")),
        ("cat a.py |& grep foo", CallKind(SEARCH, key="cat a.py |& grep foo")),
        # narrowed first: a read of those lines, whatever searches them after
        ("cat a.py | head -20 | grep foo", CallKind(READ, "a.py", (1, 20))),
        ("sed -n 5,9p a.py | grep foo", CallKind(READ, "a.py", (5, 9))),
        ("cat a.py |& head -20", CallKind(READ, "a.py", (1, 20))),
        ("head -n 3 | grep foo", CallKind(READ, None, (1, 3))),
        # not a pipe: the read prints the whole file, the search its own text
        ("cat a.py && grep foo b.py", CallKind(READ, "a.py")),
        ("cat a.py; grep foo a.py", CallKind(READ, "a.py")),
        ("cat a.py\ngrep foo a.py", CallKind(READ, "a.py")),
        # piped into what keeps its lines: still the read
        ("cat a.py | sort", CallKind(READ, "a.py")),
        ("cat a.py | sort | uniq -c | less", CallKind(READ, "a.py")),
        ("cat a.py | tee b.py", CallKind(READ, "a.py")),
        # piped into a program that prints text of its own: what that program does
        ("cat a.json | jq .x", CallKind(OTHER)),
        ("cat a.py | python3 check.py", CallKind(SCRIPT)),
        ("cat names.txt | xargs grep -l foo", CallKind(OTHER)),
        ("cat a.py | sort | jq .x", CallKind(OTHER)),
        ("cat a.py | git apply", CallKind(GIT)),
        ("cat names | git grep -f -", CallKind(SEARCH, key="cat names | git grep -f -")),
        ("cat a.py | head -3 | jq .x", CallKind(READ, "a.py", (1, 3))),
    ],
)
def test_a_read_piped_into_a_search_is_that_search(command: str, expected: CallKind) -> None:
    """``cat f | grep x`` prints what ``grep x f`` prints: a later whole read of ``f``
    must not supersede it, nor it a whole read (docs/ECONOMY.md, "The default's
    retention")."""
    found = call_kind("bash", {"command": command})
    assert found == expected
    assert (retention_key(found) == (READ, "a.py")) is (expected == CallKind(READ, "a.py"))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # patch changes its first operand; the patch it reads names the files inside
        ("patch -p1 -i fix.diff", CallKind(EDIT)),
        ("patch -p1 --input fix.diff", CallKind(EDIT)),
        ("patch -p1 < fix.diff", CallKind(EDIT)),
        ("patch -p1 <fix.diff", CallKind(EDIT)),
        ("patch src/a.py fix.diff", CallKind(EDIT, "src/a.py")),
        ("patch -i fix.diff src/a.py", CallKind(EDIT, "src/a.py")),
        # a redirection that writes no file is no edit, echo's included
        ("echo x >/dev/null", CallKind(OTHER)),
        ("echo done > /dev/null && cat a.py", CallKind(READ, "a.py")),
        ("echo oops >&2; cat a.py", CallKind(READ, "a.py")),
        ("printf x >&2", CallKind(OTHER)),
        ("cat a.py 2> /dev/null", CallKind(READ, "a.py")),
        ("echo x > out.txt", CallKind(EDIT, "out.txt")),
        ("echo x 2>&1 > out.txt", CallKind(EDIT, "out.txt")),
        # the file written is the last one named, not the one read
        ("cat a.py > b.py", CallKind(EDIT, "b.py")),
    ],
)
def test_what_is_written_and_what_is_read(command: str, expected: CallKind) -> None:
    assert call_kind("bash", {"command": command}) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # a runner that a read, a search, an edit, git or a download only names
        ('grep -n "@pytest.fixture" t.py', CallKind(SEARCH, key='grep -n "@pytest.fixture" t.py')),
        ("cd /r && cat tests/unittest_nodes.py", CallKind(READ, "tests/unittest_nodes.py")),
        ("sed -n 5,9p tests/unittest_a.py", CallKind(READ, "tests/unittest_a.py", (5, 9))),
        ("find . -name 'runtests*'", CallKind(SEARCH, key="find . -name 'runtests*'")),
        ("sed -i s/unittest/pytest/ a.py", CallKind(EDIT, "a.py")),
        ("git log --grep pytest", CallKind(GIT)),
        ("curl -sL https://x.org/pytest", CallKind(WEB)),
        ("echo pytest", CallKind(OTHER)),
        (
            "grep -rn pytest . && python x.py",
            CallKind(SEARCH, key="grep -rn pytest . && python x.py"),
        ),
        # a separator inside quotes, or escaped, ends no command
        ('grep -E "pytest|tox" setup.cfg', CallKind(SEARCH, key='grep -E "pytest|tox" setup.cfg')),
        ("grep 'a;pytest' f", CallKind(SEARCH, key="grep 'a;pytest' f")),
        ("grep a\\|pytest f", CallKind(SEARCH, key="grep a\\|pytest f")),
        # a runner that a command runs, wherever it stands in the line
        ("cd /r && python -m pytest -q", CallKind(TEST)),
        ("pytest -q 2>&1 | tail -5", CallKind(TEST)),
        ("cat a.py && pytest", CallKind(TEST)),
        ("grep -l x tests/*.py | xargs pytest", CallKind(TEST)),
        ("timeout 30 tox -e py", CallKind(TEST)),
        ("npm test", CallKind(TEST)),
        ('bash -c "cd r; pytest -q"', CallKind(TEST)),
        ("python -c 'import pytest; pytest.main()'", CallKind(TEST)),
        ('echo "a|b" | pytest', CallKind(TEST)),
        ('echo "a"|pytest', CallKind(TEST)),
    ],
)
def test_a_runner_counts_where_a_command_runs_it(command: str, expected: CallKind) -> None:
    """A test run is a command that runs a test runner, not one whose file name or
    pattern holds a runner's name (``tests/unittest_nodes.py``): such a read or
    search is kept as one (docs/STRATEGIES.md)."""
    assert call_kind("bash", {"command": command}) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("# look first\nsed -n 5,9p a.py", CallKind(READ, "a.py", (5, 9))),
        ("  # a; b | c\ncat a.py", CallKind(READ, "a.py")),
        ("# check\ncd /r && find . -name x", CallKind(SEARCH, key="cd /r && find . -name x")),
        ("cat a.py\n# then pytest", CallKind(READ, "a.py")),
        ("cat a.py\n  # then pytest", CallKind(READ, "a.py")),
        ("# one\n# two; three\ncat a.py", CallKind(READ, "a.py")),
        ("# then run pytest\ncat > t.py <<'EOF'\nx\nEOF", CallKind(EDIT, "t.py")),
        # a # inside a line is no comment line: the words around it are read as before
        ('grep -rn "# TODO" .', CallKind(SEARCH, key='grep -rn "# TODO" .')),
    ],
)
def test_a_comment_line_is_no_command(command: str, expected: CallKind) -> None:
    """Agents open a command with a comment (``# Let me look first``): it runs
    nothing, so the command after it decides, and a separator in it splits nothing."""
    assert call_kind("bash", {"command": command}) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat > t.py <<'EOF'\nimport pytest\nx = 1; y = 2\nEOF", CallKind(EDIT, "t.py")),
        ("cat > t.py <<'EOF'\nx\nEOF\npytest -q t.py", CallKind(TEST)),
        ("python - <<'EOF'\nimport pytest\npytest.main()\nEOF", CallKind(SCRIPT)),
        ("cd r && cat <<EOF > t.py\nit's\nEOF\npython -m pytest", CallKind(TEST)),
        ("bash <<'EOF'\ncd r\npytest -q\nEOF", CallKind(TEST)),  # a shell runs its lines
    ],
)
def test_a_heredocs_body_runs_nothing(command: str, expected: CallKind) -> None:
    """A here-document's body is what its command reads (a script written to a file,
    fed to ``python -``): a runner it names runs nothing, as in a quoted text; the
    lines after its delimiter are commands again (until 6 December 2026 the body's
    lines were read as commands: 15 recorded calls writing a script were test runs)."""
    assert call_kind("bash", {"command": command}) == expected


def test_a_heredoc_stays_in_a_searchs_key() -> None:
    """What a search reads from a here-document may change what it prints: two
    searches told apart only by their bodies have two keys."""
    first = call_kind("bash", {"command": "grep -f - a.py <<EOF\nfoo\nEOF"})
    second = call_kind("bash", {"command": "grep -f - a.py <<EOF\nbar\nEOF"})
    assert first.kind == second.kind == SEARCH and first.key != second.key


def test_a_comment_does_not_tell_two_searches_apart() -> None:
    """The same search under two comments prints the same text: one key, so the newer
    supersedes the older (docs/STRATEGIES.md)."""
    first = call_kind("bash", {"command": "# where is it?\ngrep -rn foo src"})
    second = call_kind("bash", {"command": "# again\ngrep -rn foo src"})
    assert first == second == CallKind(SEARCH, key="grep -rn foo src")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('for f in a.py b.py; do grep -n x "$f"; done', "search"),
        ("for f in a; do cat a.py; done", "read"),
        ("for f in a; do cd $f; done; cat a.py", "read"),
        ("if cd r; then cd s; fi; cat a.py", "read"),
        ("if cd r; then cd s; else cat a.py; fi", "read"),
        ("if cd r; then cd s; elif cat a.py; then cd t; fi", "read"),
        ("while grep -q x f; do sleep 1; done", "search"),
        ("until grep -q x f; do sleep 1; done", "search"),
        ("! grep -q x f", "search"),
        ("cd r; { cat a.py; }", "read"),
        ("cd r; { cd s; }; cat a.py", "read"),
        ("( ls -la )", "search"),
        ("(cd /t && cat a.py )", "read"),
        ("(cd /t && cat a.py)", "read"),  # the `)` closes the subshell, not the file's name
        ("(cd /t; ls -la)", "search"),
        ("(ls)", "search"),
        ("timeout 5 cat a.py", "read"),
        ("sudo env A=1 cat a.py", "read"),
    ],
)
def test_the_shells_own_words_are_no_program(command: str, expected: str) -> None:
    """``for``, ``if``, ``do``, ``{``, a subshell's ``(``: the command they wrap decides
    (until 6 December 2026 the keyword did, as a program of its own: ``other``)."""
    found = call_kind("bash", {"command": command})
    if expected == "read":
        assert found == CallKind(READ, "a.py")
    else:
        assert found == CallKind(SEARCH, key=command)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("(cd x && sed -n 5,9p a.py)", CallKind(READ, "a.py", (5, 9))),
        ("x=$(cat a.py)", CallKind(OTHER)),  # read into a variable: nothing printed
        ("echo $(cat a.py)", CallKind(OTHER)),
    ],
)
def test_a_subshells_closing_is_no_part_of_a_word(command: str, expected: CallKind) -> None:
    assert call_kind("bash", {"command": command}) == expected


# Pieces of hostile or odd shell lines: empty quoted words, quotes left open, the
# shell's keywords, parentheses, comments, here-documents, runners, separators.
_ODD_PIECES = st.sampled_from(
    [
        "''", '""', "'", '"', "(", ")", "((", "\\", "#", "<<", "EOF", " ", "\n", ";", "|",
        "&&", "|&", "cat", "grep", "sed", "-n", "5,9p", "a.py", "pytest", "for", "if",
        "do", "done", "{", "}", "!", "timeout", "env", "A=1", "x",
    ]
)  # fmt: skip


@settings(max_examples=800, deadline=None)
@given(st.lists(_ODD_PIECES, max_size=14))
def test_any_shell_line_is_classified(pieces: list[str]) -> None:
    """A client writes the command: whatever it is, the classifier answers (an empty
    quoted word first, ``'' cat a.py``, once raised IndexError)."""
    found = call_kind("bash", {"command": "".join(pieces)})
    assert isinstance(found, CallKind) and found.kind in KINDS


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80), st.sampled_from(["bash", "Read", "grep", "apply_patch", "x"]))
def test_any_text_is_classified(text: str, tool: str) -> None:
    for arguments in (text, {"command": text}, {"cmd": text.split(" ")}, {"path": text}):
        assert call_kind(tool, arguments).kind in KINDS


@pytest.mark.parametrize("command", ["'' cat a.py", 'cd x; "" pytest', 'cat a.py | "" grep x'])
def test_an_empty_quoted_word_is_a_word(command: str) -> None:
    assert isinstance(call_kind("bash", {"command": command}), CallKind)
