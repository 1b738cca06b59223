"""The call classifier's corners that its mutants showed untested (scoutd.strategies.tool_kinds).

Each case is a call an agent writes and what it does, written by hand from the
module's docstrings: the words a shell command is split into past assignments
and wrappers, a program named by its path, the lines ``sed``, ``head`` and
``tail`` print, a pipeline whose file and lines come from different commands,
and the search key a named search tool's arguments give.
"""

from __future__ import annotations

from typing import Any

import pytest

from scoutd.strategies.tool_kinds import (
    BUILD,
    EDIT,
    GIT,
    OTHER,
    READ,
    SCRIPT,
    SEARCH,
    TASKS,
    TEST,
    WEB,
    CallKind,
    _files,
    call_kind,
)


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        # a named search's key: its string values, one a line; nothing else is text
        ("grep", {"pattern": "foo", "path": "src", "n": 3}, CallKind(SEARCH, key="foo\nsrc")),
        ("grep", "foo src", CallKind(SEARCH, key="foo src")),
        ("grep", None, CallKind(SEARCH)),
        ("grep", ["foo"], CallKind(SEARCH)),
        # assignments and wrappers before the program
        ("bash", {"command": "env FOO=1 sudo timeout 30 cat a.py"}, CallKind(READ, "a.py")),
        ("bash", {"command": "timeout 30 pytest -q"}, CallKind(TEST)),
        ("bash", {"command": "timeout 30 cat a.py"}, CallKind(READ, "a.py")),
        ("bash", {"command": "sudo cat a.py"}, CallKind(READ, "a.py")),
        ("bash", {"command": "env cat a.py"}, CallKind(READ, "a.py")),
        # what a command does, by its program
        ("bash", {"command": "echo x > out.txt"}, CallKind(EDIT, "out.txt")),
        ("bash", {"command": "echo x && cat a.py"}, CallKind(READ, "a.py")),
        ("bash", {"command": "perl -i -pe 's/a/b/' a.py"}, CallKind(EDIT, "a.py")),
        ("bash", {"command": "sed -i 's/a/b/'"}, CallKind(EDIT)),
        ("bash", {"command": "patch -p1 -i fix.diff"}, CallKind(EDIT)),
        ("bash", {"command": "tee out.txt"}, CallKind(EDIT, "out.txt")),
        ("bash", {"command": "printf 'x' > a.txt"}, CallKind(EDIT, "a.txt")),
        ("bash", {"command": "cat a.py 2>&1"}, CallKind(READ, "a.py")),
        ("bash", {"command": "cat a.py >/dev/null"}, CallKind(READ, "a.py")),
        ("bash", {"command": "go build ./..."}, CallKind(BUILD)),
        ("bash", {"command": "git ls-files src"}, CallKind(SEARCH, key="git ls-files src")),
        ("bash", {"command": "git grep foo"}, CallKind(SEARCH, key="git grep foo")),
        ("bash", {"command": "git diff"}, CallKind(GIT)),
        ("bash", {"command": "gh issue view 5"}, CallKind(WEB)),
        ("bash", {"command": "wget https://example.org/a"}, CallKind(WEB)),
        ("bash", {"command": "curl -s https://example.org/a"}, CallKind(WEB)),
        ("bash", {"command": "node x.js"}, CallKind(SCRIPT)),
        ("bash", {"command": "python3.11 x.py"}, CallKind(SCRIPT)),
        ("bash", {"command": "./run.sh"}, CallKind(SCRIPT)),
        ("bash", {"command": "docker ps"}, CallKind(OTHER)),
        # a program named by its path
        ("bash", {"command": "/usr/bin/sed -n 5,9p a.py"}, CallKind(READ, "a.py", (5, 9))),
        ("bash", {"command": "/bin/cat a.py"}, CallKind(READ, "a.py")),
        # the range may come before the option
        ("bash", {"command": "sed '5,9p' -n a.py"}, CallKind(READ, "a.py", (5, 9))),
        # head and tail: 10 lines unless told, the count after -n, tail -n +N from line N
        ("bash", {"command": "head a.py"}, CallKind(READ, "a.py", (1, 10))),
        ("bash", {"command": "cat a.py | head -n 40"}, CallKind(READ, "a.py", (1, 40))),
        ("bash", {"command": "tail -n 5 a.py"}, CallKind(READ, "a.py", (-5, None))),
        ("bash", {"command": "tail -n +5 a.py"}, CallKind(READ, "a.py", (5, None))),
        ("bash", {"command": "tail -n x a.py"}, CallKind(READ, "a.py", (-10, None))),
        # a read of no file; the file from a later command, past quiet and empty ones
        ("bash", {"command": "echo start | head -n 3"}, CallKind(READ, None, (1, 3))),
        ("bash", {"command": "echo start | head -n 3 | wc -l"}, CallKind(READ, None, (1, 3))),
        (
            "bash",
            {"command": "echo start | head -n 3\n\ncd /r && nl -ba src/a.py"},
            CallKind(READ, "src/a.py", (1, 3)),
        ),
        # an argv: a shell's -c script alone, any other program's words joined
        ("shell", {"command": ["/bin/bash", "-c", "cat a.py"]}, CallKind(READ, "a.py")),
        ("shell", {"command": ["python3", "-c", "print(1)"]}, CallKind(SCRIPT)),
        ("shell", {"command": ["ls"]}, CallKind(SEARCH, key="ls")),
        # the command field alone when there is one; a shell call's commands one a line
        ("bash", {"command": "ls src", "description": "List"}, CallKind(SEARCH, key="ls src")),
        ("shell", {"commands": ["rg -n x src", "ls"]}, CallKind(SEARCH, key="rg -n x src\nls")),
        # tools known by their name's start, and no name at all
        ("mcp__github__get_issue", {"number": 5}, CallKind(WEB)),
        ("WebFetch", {"url": "https://example.org"}, CallKind(WEB)),
        ("Task", {"prompt": "look"}, CallKind(TASKS)),
        (None, {"command": "cat a.py"}, CallKind(OTHER)),
        # a read tool's lines from its limit alone
        ("Read", {"file_path": "a.py", "limit": 20}, CallKind(READ, "a.py", (1, 20))),
        ("read_file", {"path": "a.py", "end": 9}, CallKind(READ, "a.py", (1, 9))),
        ("read_file", {"path": "a.py", "start": 3, "end": "9"}, CallKind(READ, "a.py", (3, None))),
        ("Read", {"file_path": 5}, CallKind(READ)),
        ("Edit", {"path": "b.py"}, CallKind(EDIT, "b.py")),
        ("Edit", {"file_path": 7}, CallKind(EDIT)),
        ("apply_patch", {"input": "no patch here"}, CallKind(EDIT)),
    ],
)
def test_what_a_call_does(tool: str, arguments: Any, expected: CallKind) -> None:
    assert call_kind(tool, arguments) == expected


def test_an_option_is_no_file_even_when_it_looks_like_one() -> None:
    assert _files(["sed", "-i.bak", "s/a/b/", "a.py"]) == ["a.py"]
