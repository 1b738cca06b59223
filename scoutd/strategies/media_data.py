"""What media data holds: an image's size, a PDF's pages, audio's seconds.

Read from the base64 data a client sends (:mod:`.media` turns them into token
counts). The data is hostile: each reader looks at a bounded part of it, or at
the whole once, in time linear in its size (docs/RELIABILITY.md: linear in the
request), and gives None (or 0) when unsure.
"""

from __future__ import annotations

import binascii
import re
import zlib
from collections.abc import Iterator

__all__ = ["audio_seconds", "data_of", "decoded", "image_size", "pdf_pages"]

_HEAD_BYTES = 64
_JPEG_BYTES = 1 << 18  # a JPEG's frame header comes after its metadata (a thumbnail)
_JPEG_FRAMES = frozenset(
    (*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC), 0xCD, 0xCE, 0xCF)
)
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z0-9])")
_TREE_NODE = re.compile(rb"/Type\s*/Pages")
_COUNT = re.compile(rb"/Count\s+(\d{1,6})")
_NODE_REACH = 400  # a page tree node's /Count is this near its /Type /Pages, in its dictionary
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm")
_MOST_PAGES = 10_000  # a count read past it is held to it (the sums stay small)
_INFLATED_BYTES = 1 << 22  # what the object streams of one PDF may inflate to, at most
_LEAST_BYTES_PER_SECOND = 6_000 / 8  # 6 kbit/s: below the least an MP3 is sent at
_MOST_BYTES_PER_SECOND = 1_536_000  # 192 kHz, 2 channels, 32 bits: a WAV header past it lies


def data_of(data: str) -> tuple[str, str]:
    """``(media type, base64)`` of a data URL, or ``("", data)`` of plain base64."""
    if not data.startswith("data:"):
        return "", data
    head, _, raw = data.partition(",")
    return head[5:].split(";", 1)[0].strip().lower(), raw


def decoded(raw: str, limit: int | None = None) -> bytes:
    """The bytes of base64 ``raw`` (its first ``limit`` or so when given), whatever it
    holds: characters out of the alphabet (line breaks) are skipped, and so is a last
    quantum its padding was cut from."""
    if limit is not None:
        raw = raw[: 4 * (limit // 3 + 2) + 64]
    try:  # the whole at once when it is plain base64 (the decoder skips line breaks)
        return binascii.a2b_base64(raw)
    except (binascii.Error, ValueError):  # its padding cut, or characters out of ASCII
        pass
    text = re.sub(r"[^A-Za-z0-9+/]", "", raw)
    return binascii.a2b_base64(text[: len(text) - len(text) % 4])  # whole quanta: valid


def image_size(data: str) -> tuple[int, int] | None:
    """``(width, height)`` from the header of a base64 PNG, GIF, WebP or JPEG image."""
    head = decoded(data_of(data)[1], _HEAD_BYTES)
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:4] == b"GIF8" and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        return _webp_size(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(decoded(data_of(data)[1], _JPEG_BYTES))
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    if chunk == b"VP8 ":
        width = int.from_bytes(head[26:28], "little") & 0x3FFF
        return width, int.from_bytes(head[28:30], "little") & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """A JPEG's size from its first frame header, segment by segment."""
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # a fill byte
            at += 1
            continue
        if marker in _JPEG_FRAMES:
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            return int.from_bytes(data[at + 7 : at + 9], "big"), height
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


def pdf_pages(data: str) -> int:
    """How many pages a base64 PDF holds (0 when none can be found): its page objects,
    those inside compressed object streams too, or its page tree's count, whichever
    is more, at most :data:`_MOST_PAGES`.

    What it finds is counted as it is found, never gathered in a list: a PDF made of
    markers holds millions of them.
    """
    raw = decoded(data_of(data)[1])
    if b"%PDF" not in raw[:1024]:
        return 0
    texts = [raw, *_object_streams(raw)]
    leaves = sum(1 for text in texts for _ in _PAGE.finditer(text))
    counted = max((count for text in texts for count in _tree_counts(text)), default=0)
    return min(_MOST_PAGES, max(leaves, counted))


def _tree_counts(text: bytes) -> Iterator[int]:
    """The ``/Count`` of each page tree node in ``text``: a count with a ``/Type /Pages``
    at most :data:`_NODE_REACH` bytes before or after it and no ``>`` between.

    One walk over the counts and the nodes together, in order: each count looks
    only at the nearest node on either side (a farther one is as far, with as many
    ``>`` between), and at most :data:`_NODE_REACH` bytes on each side. (One pattern
    that looked up to 400 bytes on from every ``/Count`` and every ``/Type /Pages``
    cost 0.36 s for a megabyte of them.)
    """
    nodes = _TREE_NODE.finditer(text)
    previous, upcoming = None, next(nodes, None)
    for count in _COUNT.finditer(text):
        start, end = count.span()
        # a node and a count never overlap: each node is before the count or after it
        while upcoming is not None and upcoming.start() < start:
            previous, upcoming = upcoming, next(nodes, None)
        if (
            previous is not None
            and start - previous.end() <= _NODE_REACH
            and text.find(b">", previous.end(), start) < 0
        ) or (
            upcoming is not None
            and upcoming.start() - end <= _NODE_REACH
            and text.find(b">", end, upcoming.start()) < 0
        ):
            yield int(count.group(1))


def _object_streams(raw: bytes) -> list[bytes]:
    """The inflated object streams of a PDF (where compressed page objects are), at most
    :data:`_INFLATED_BYTES` in all.

    One pass, in time linear in the data: a stream's end is looked for from its
    start, and a marker inside a stream already looked at is its data, not an
    object. (Each marker looked for its end to the data's end: a PDF made of 2 MB
    of markers took 30 s, the time growing with the square.)
    """
    found = []
    budget = _INFLATED_BYTES
    after = 0  # where the last stream looked at ends: markers before it are its data
    for match in _OBJECT_STREAM.finditer(raw):
        if match.start() < after:
            continue
        start = raw.find(b"stream", match.end(), match.end() + 2_048)
        if start < 0 or raw.find(b"/FlateDecode", max(0, match.start() - 2_048), start) < 0:
            continue
        start += 6  # past ``stream`` and its end of line
        start += 2 if raw[start : start + 2] == b"\r\n" else raw[start : start + 1] == b"\n"
        end = raw.find(b"endstream", start)
        if end < 0 or budget <= 0:
            break  # no stream ends past this one's start, or nothing more may be inflated
        after = end
        try:
            inflated = zlib.decompressobj().decompress(raw[start:end], budget)
        except zlib.error:
            continue
        budget -= len(inflated)
        found.append(inflated)
    return found


def audio_seconds(data: str) -> float:
    """The seconds of base64 audio: a WAV header's byte rate, else its size at the
    lowest bit rate audio is sent at (more seconds than it holds)."""
    raw = data_of(data)[1]
    size = len(raw) * 3 / 4
    head = decoded(raw, _HEAD_BYTES)
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE" and head[12:16] == b"fmt ":
        rate = int.from_bytes(head[28:32], "little")
        if 0 < rate <= _MOST_BYTES_PER_SECOND:
            return size / rate
    return size / _LEAST_BYTES_PER_SECOND
