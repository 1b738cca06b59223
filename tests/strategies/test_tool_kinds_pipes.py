"""A read piped into a search over a line's end (scoutd.strategies.tool_kinds).

A POSIX shell reads on past a line that ends with ``|`` (or with a backslash):
``cat f |`` then ``grep x`` on the next line is the one pipeline ``cat f | grep x``,
and prints what the search finds. Split at ``|`` and at the newline, the line
between them holds no command: the pipe feeds the first command after it. A
newline after ``&&`` or after a command feeds nothing.
"""

from __future__ import annotations

import pytest

from scoutd.strategies.retention import retention_key
from scoutd.strategies.tool_kinds import READ, SEARCH, CallKind, call_kind


def _search(command: str) -> tuple[str, CallKind]:
    return command, CallKind(SEARCH, key=command)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # the pipe at a line's end feeds the next line's command
        _search("cat a.py |\ngrep -n foo"),
        _search("cat a.py | \\\n  grep -n foo"),
        _search("cat a.py |\n\n  grep foo"),
        _search("cd /r && cat a.py |\n  rg -n def"),
        _search("cat a.py |\nsort |\ngrep foo"),
        # the pipe still feeds only the command after it, and what narrows comes first
        ("cat a.py |\nhead -5 |\ngrep foo", CallKind(READ, "a.py", (1, 5))),
        ("cat a.py |\n  echo x\ngrep foo a.py", CallKind(READ, "a.py")),
        # no pipe before the line's end: the read of the whole file
        ("cat a.py &&\n  grep foo b.py", CallKind(READ, "a.py")),
        ("cat a.py\n\ngrep foo a.py", CallKind(READ, "a.py")),
        ("cat a.py ||\ngrep foo a.py", CallKind(READ, "a.py")),
        ("cat a.py;\n\ngrep foo a.py", CallKind(READ, "a.py")),
    ],
)
def test_a_pipe_at_a_lines_end_feeds_the_next_lines_command(
    command: str, expected: CallKind
) -> None:
    """Before the fix the four first were a read of the whole of ``a.py``: a later
    whole read of it would supersede their search, and they a whole read."""
    found = call_kind("bash", {"command": command})
    assert found == expected
    assert (retention_key(found) == (READ, "a.py")) is (expected == CallKind(READ, "a.py"))
