"""The one line framing both ends use (scoutd/protocol/framing.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scoutd.protocol import OVERSIZED, LineReader

LIMIT = 50


@given(
    st.integers(min_value=LIMIT + 2, max_value=400),
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=12),
)
def test_an_oversize_line_is_cut_off_at_the_first_chunk_past_the_limit(
    size: int, cuts: list[int]
) -> None:
    """Fed in any chunks, a line longer than the limit (and its "\\r") is reported
    by the very chunk that passes the limit, not when its newline comes."""
    data = b"x" * size + b"\n" + b"ok\n"
    reader = LineReader(LIMIT)
    fed = 0
    reported_at: int | None = None  # bytes fed when OVERSIZED came out
    out: list[bytes | None] = []
    i = 0
    while fed < len(data):
        chunk = data[fed : fed + cuts[i % len(cuts)]]
        lines = reader.feed(chunk, now=float(i))
        fed += len(chunk)
        if OVERSIZED in lines and reported_at is None:
            reported_at = fed
        out += lines
        i += 1
    assert out == [OVERSIZED, b"ok"]
    assert reported_at is not None
    # the first chunk that brought the held bytes past LIMIT + 1 reported it
    assert reported_at - len(chunk_ending_at(data, cuts, reported_at)) <= LIMIT + 1 < reported_at


def chunk_ending_at(data: bytes, cuts: list[int], end: int) -> bytes:
    """The chunk (as cut above) whose last byte is at ``end``."""
    start, i = 0, 0
    while start < end:
        size = cuts[i % len(cuts)]
        if start + size >= end:
            return data[start:end]
        start += size
        i += 1
    raise AssertionError("no chunk ends there")


def test_a_client_reader_has_no_limit() -> None:
    """The clients read answers as long as the prompt they carry."""
    reader = LineReader(None)
    big = b"y" * 3_000_000
    assert reader.feed(big[:1_000_000], now=0.0) == []
    assert reader.feed(big[1_000_000:] + b"\r\nnext", now=1.0) == [big]
    assert reader.pending == 4 and reader.partial
