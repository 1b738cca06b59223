"""How the client bounds the daemon's lines as they arrive (``max_answer_bytes``).

The reader hands :func:`unfinished_line` each chunk it reads and the length of
the line left unfinished by the chunks before; it must refuse any line, whole
or not yet ended, longer than the limit, and say how much of the last one is
still open. The oracle is the plain reading: join what came, split it at the
newlines, measure.
"""

from __future__ import annotations

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from scoutd.client._common import LineTooLong, unfinished_line

# short lines mostly, newlines often: most runs stay under the limit a while
chunks = st.lists(st.text("ab\n\n\n", max_size=24).map(str.encode), max_size=6)


def oracle(received: bytes, limit: int) -> int | None:
    """The open line's length after ``received``, or None if a line passes ``limit``."""
    lines = received.split(b"\n")
    return None if max(map(len, lines)) > limit else len(lines[-1])


@given(chunks, st.integers(min_value=0, max_value=6))
def test_every_line_is_counted_whatever_the_chunks(parts: list[bytes], limit: int) -> None:
    received = b""
    held = 0
    for data in parts:
        received += data
        expected = oracle(received, limit)
        if data.count(b"\n") > 1 and len(data) - data.find(b"\n") - 1 > limit:
            event("a chunk holds whole lines past the first and more than the limit after it")
        if expected is None:
            with pytest.raises(LineTooLong, match=f"longer than {limit} bytes"):
                unfinished_line(held, data, limit)
            event("refused")
            return
        held = unfinished_line(held, data, limit)
        assert held == expected


@pytest.mark.parametrize(
    ("held", "data", "limit", "expected"),
    [
        (0, b"", 0, 0),
        (3, b"", 3, 3),
        (3, b"a", 3, None),  # the open line grows past the limit
        (3, b"\n", 3, 0),  # it ends at the limit: allowed
        (4, b"\n", 3, None),  # held too long already
        (0, b"abc\nde", 3, 2),
        (0, b"a\nabcd\nb", 3, None),  # a whole line in the middle
        (0, b"a\nb\nc\nabcd\n", 3, None),  # the last whole line, past the first
        (0, b"a\nabc\nab\nabc\n", 3, 0),
        (0, b"ab\n\n\nabcd", 3, None),  # the open line after several whole ones
        (2, b"c\nabc", 3, 3),
    ],
)
def test_lines_at_the_limit(held: int, data: bytes, limit: int, expected: int | None) -> None:
    assert expected == oracle(b"x" * held + data, limit)  # the cases agree with the oracle
    if expected is None:
        with pytest.raises(LineTooLong):
            unfinished_line(held, data, limit)
    else:
        assert unfinished_line(held, data, limit) == expected
