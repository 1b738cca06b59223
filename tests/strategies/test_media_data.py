"""How a PDF's pages are read from its data: every rule in time linear in the data.

A client sends the PDF, so its bytes are hostile. Before: each object stream
marker looked for its stream's end up to the data's end, and a PDF made of
2 MB of markers took 30 s (four times the markers, sixteen times the time);
the page tree's counts were matched by a pattern that looked 400 bytes on
from every ``/Count`` (0.36 s a megabyte of them). The work is counted here,
in bytes searched, not timed (docs/RELIABILITY.md, rule 1).
"""

from __future__ import annotations

import base64
import re
import tracemalloc
import zlib
from typing import Any, SupportsIndex

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from scoutd.strategies import media_data
from scoutd.strategies.media_data import pdf_pages


class Scanned(bytes):
    """Bytes that count what each search and slice of them may read."""

    read = 0

    def find(  # type: ignore[override]
        self, sub: bytes, start: SupportsIndex | None = None, end: SupportsIndex | None = None
    ) -> int:
        first = 0 if start is None else int(start)
        last = len(self) if end is None else min(int(end), len(self))
        Scanned.read += max(0, last - first)
        return super().find(sub, start, end)

    def __getitem__(self, key: Any) -> Any:
        part = super().__getitem__(key)
        if isinstance(key, slice):
            Scanned.read += len(part)
        return part


def searched(raw: bytes) -> int:
    """Bytes the object stream reader searched and copied to read ``raw``."""
    Scanned.read = 0
    media_data._object_streams(Scanned(raw))
    return Scanned.read


MARKED = {
    "no stream ends": b"/FlateDecode/Type/ObjStm stream\n",
    "one end, at the end": b"/FlateDecode/Type/ObjStm stream\n",
    "no stream keyword": b"/Type/ObjStm ",
    "not compressed": b"/Type/ObjStm stream\n",
}


@pytest.mark.parametrize("shape", MARKED)
def test_the_object_stream_reader_searches_each_byte_a_bounded_number_of_times(
    shape: str,
) -> None:
    def pdf_of(markers: int) -> bytes:
        end = b"endstream" if shape == "one end, at the end" else b""
        return b"%PDF-1.7\n" + MARKED[shape] * markers + end

    small, large = searched(pdf_of(2_000)), searched(pdf_of(8_000))
    assert large <= 4.5 * small  # four times the markers: about four times the work


def packed(pages: int, first: int) -> bytes:
    """A compressed object stream holding ``pages`` page objects, numbered from ``first``."""
    listed = b" ".join(b"%d 0" % (first + n) for n in range(pages))
    objects = b"\n".join(b"<< /Type /Page /Parent 2 0 R >>" for _ in range(pages))
    body = zlib.compress(listed + b"\n" + objects)
    return (
        b"%d 0 obj\n<< /Type /ObjStm /N %d /Filter /FlateDecode /Length %d >>\nstream\n"
        % (first + 1000, pages, len(body))
        + body
        + b"\nendstream\nendobj\n"
    )


def encoded(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_every_object_stream_is_read_after_the_first() -> None:
    raw = b"%PDF-1.5\n" + packed(3, 10) + packed(4, 20) + b"%%EOF\n"
    assert pdf_pages(encoded(raw)) == 7


def test_a_marker_inside_a_stream_already_read_is_its_data() -> None:
    """Object stream markers in the data of a stream already looked at (here one that
    does not inflate, whose end is the next ``endstream``) are its data: the object
    stream they seem to start is not read."""
    outer = b"1 0 obj\n<< /Type /ObjStm /Filter /FlateDecode >>\nstream\nnot zlib\n"
    inside = b"%PDF-1.5\n" + outer + packed(5, 40) + b"%%EOF\n"
    assert media_data._object_streams(inside) == []
    assert pdf_pages(encoded(inside)) == 0
    beside = b"%PDF-1.5\n" + outer + b"endstream\nendobj\n" + packed(5, 40) + b"%%EOF\n"
    assert pdf_pages(encoded(beside)) == 5  # after the first stream's end, it is read


# --- the page tree's counts, against a plain reading of the rule ----------------------

NODE = re.compile(rb"/Type\s*/Pages")
COUNT = re.compile(rb"/Count\s+(\d{1,6})")


def plain_tree_counts(text: bytes) -> list[int]:
    """Each count with some ``/Type /Pages`` at most 400 bytes before or after it and no
    ``>`` between: every node tried for every count."""
    nodes = [(m.start(), m.end()) for m in NODE.finditer(text)]
    found = []
    for count in COUNT.finditer(text):
        for start, end in nodes:
            before = end <= count.start() and count.start() - end <= 400
            if before and b">" not in text[end : count.start()]:
                found.append(int(count.group(1)))
                break
            after = start >= count.end() and start - count.end() <= 400
            if after and b">" not in text[count.end() : start]:
                found.append(int(count.group(1)))
                break
    return found


PIECES = st.sampled_from(
    [
        *(b"/Type /Pages ", b"/Type/Pages", b"/Count 7 ", b"/Count 123456789", b">", b"<< "),
        *(b"/Type /Page ", b" " * 150, b"x" * 390, b"x" * 5),
    ]
)


@given(st.lists(PIECES, max_size=30))
def test_the_page_tree_counts_are_those_of_the_plain_rule(pieces: list[bytes]) -> None:
    text = b"".join(pieces)
    expected = plain_tree_counts(text)
    assert list(media_data._tree_counts(text)) == expected
    counts = len(COUNT.findall(text))
    if NODE.search(text) and counts:
        event(f"counts beside a node: {'all' if len(expected) == counts else 'some'} taken")


@pytest.mark.parametrize(
    "unit", [b"/Type/Page ", b"/Type/Pages >>>>>>>>>", b"/Type/Pages /Count 1 "], ids=repr
)
def test_what_a_pdf_is_made_of_is_counted_not_gathered(unit: bytes) -> None:
    """Before: every page object found was gathered in a list (a PDF of 4 MB of them held
    21 MB at the peak), as every page tree count was: a reading holds about the decoded
    data, whatever it is made of."""
    raw = b"%PDF-1.7\n" + unit * (4 * 2**20 // len(unit))
    data = base64.b64encode(raw).decode()
    tracemalloc.start()
    try:
        pdf_pages(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 1.25 * len(raw) + 2**20
