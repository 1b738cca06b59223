"""What a media block's data holds, read from hand-built headers: an image's size in
each format, audio's seconds, the parts of a data URL, base64 as clients write it.

The sizes are those written into each header (the oracle is the builder). Token
counts clamp an image between 1,500 and 1,600 tokens, so tests of counts could not
see a size read wrong; mutation testing of ``scoutd/strategies/media_data.py``
showed these readers untested (docs/TESTING.md).
"""

from __future__ import annotations

import base64
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd.strategies import media_data
from scoutd.strategies.media_data import (
    audio_seconds,
    data_of,
    decoded,
    image_size,
    pdf_pages,
)
from tests.strategies.test_media_costs import png as png_data
from tests.strategies.test_media_costs import wav

WIDTH, HEIGHT = 1234, 567  # neither a power of two nor alike, so no swap or mask passes


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def png(width: int, height: int) -> bytes:
    return base64.b64decode(png_data(width, height, padding=0))


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\xf7" + b"\x00" * 40  # flags next


def riff_webp(chunk: bytes, payload: bytes) -> bytes:
    body = chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body + b"\xff" * 40


def webp_extended(width: int, height: int) -> bytes:
    sizes = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return riff_webp(b"VP8X", b"\x10\x00\x00\x00" + sizes)


def webp_lossy(width: int, height: int) -> bytes:
    # a frame tag, the start code, then 14 bits of size and 2 of scale each (scale set)
    frame = b"\x10\x02\x00\x9d\x01\x2a" + struct.pack("<HH", width | 1 << 14, height | 2 << 14)
    return riff_webp(b"VP8 ", frame)


def webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | (height - 1) << 14 | 1 << 28  # the alpha bit set, version 0
    return riff_webp(b"VP8L", b"\x2f" + struct.pack("<I", bits))


def segment(marker: int, body: bytes) -> bytes:
    return bytes((0xFF, marker)) + struct.pack(">H", len(body) + 2) + body


def jpeg(width: int, height: int, frame: int = 0xC2) -> bytes:
    """An app segment, fill bytes, a table (0xC4, no frame) and an arithmetic-coding
    extension (0xC8, no frame either) before the frame header ``frame``."""
    sof = b"\x08" + struct.pack(">HH", height, width) + b"\x03" + b"\x00" * 9
    return (
        b"\xff\xd8"
        + segment(0xE0, b"JFIF\x00" + b"\x00" * 9)
        + b"\xff"  # one fill byte before the next marker
        + segment(0xC4, b"\x00" * 20)
        + segment(0xC8, b"\x00" * 4)
        + segment(frame, sof)
        + b"\x00" * 40
    )


IMAGES = {
    "png": png,
    "gif": gif,
    "webp VP8X": webp_extended,
    "webp VP8": webp_lossy,
    "webp VP8L": webp_lossless,
    "jpeg": jpeg,
}


@pytest.mark.parametrize("kind", IMAGES)
def test_an_images_size_is_read_from_its_header(kind: str) -> None:
    raw = IMAGES[kind](WIDTH, HEIGHT)
    assert image_size(b64(raw)) == (WIDTH, HEIGHT)
    assert image_size(f"data:image/x;base64,{b64(raw)}") == (WIDTH, HEIGHT)
    lines = "\n".join(b64(raw)[i : i + 76] for i in range(0, len(b64(raw)), 76))
    assert image_size(lines) == (WIDTH, HEIGHT)  # base64 as MIME writes it


@pytest.mark.parametrize("kind", ["png", "gif", "webp VP8X", "webp VP8", "webp VP8L"])
def test_a_header_cut_short_tells_no_size(kind: str) -> None:
    raw = IMAGES[kind](WIDTH, HEIGHT)
    short = {"png": 23, "gif": 9}.get(kind, 29)  # one byte less than its size needs
    assert image_size(b64(raw[:short])) is None


def test_a_jpeg_is_read_segment_by_segment_to_its_first_frame() -> None:
    for frame in (0xC0, 0xC1, 0xC3, 0xC5, 0xCB, 0xCF):
        assert image_size(b64(jpeg(WIDTH, HEIGHT, frame))) == (WIDTH, HEIGHT)
    # the frame header after a large thumbnail is still reached
    thumbnail = segment(0xE1, b"Exif\x00\x00" + b"\x00" * 60_000)
    raw = jpeg(WIDTH, HEIGHT)
    assert image_size(b64(raw[:2] + thumbnail + raw[2:])) == (WIDTH, HEIGHT)
    assert image_size(b64(b"\xff\xd8\x00" + raw[3:])) is None  # no marker where one must be
    frame = raw.index(b"\xff\xc2")
    assert image_size(b64(raw[: frame + 9])) == (WIDTH, HEIGHT)  # cut right after its size
    assert image_size(b64(raw[: frame + 8])) is None  # cut inside it
    assert image_size(b64(b"\xff\xd8" + segment(0xE0, b"\x00" * 20))) is None  # no frame


@pytest.mark.parametrize(("kind", "size"), [("png", 24), ("gif", 10), ("webp VP8X", 30)])
def test_a_header_of_exactly_the_bytes_its_size_needs_is_read(kind: str, size: int) -> None:
    assert image_size(b64(IMAGES[kind](WIDTH, HEIGHT)[:size])) == (WIDTH, HEIGHT)


def test_a_png_size_is_read_in_all_its_32_bits() -> None:
    assert image_size(b64(png(2**31 - 1, 2**24 + 5))) == (2**31 - 1, 2**24 + 5)


def test_what_is_not_a_known_image_tells_no_size() -> None:
    assert image_size(b64(b"BM" + b"\x00" * 60)) is None  # a bitmap: not read
    assert image_size(b64(b"RIFF\x00\x00\x00\x00WEBPVP8Z" + b"\x00" * 40)) is None
    assert image_size("") is None


def test_audio_lasts_its_size_over_its_byte_rate_when_its_header_tells_one() -> None:
    data = wav(3.0)
    assert audio_seconds(data) == len(data) * 3 / 4 / 32_000
    for byte_rate in (1, 1_536_000):  # the least and the most a header is believed
        data = wav(0.5, byte_rate=byte_rate)
        assert audio_seconds(data) == len(data) * 3 / 4 / byte_rate


@pytest.mark.parametrize("byte_rate", [0, 1_536_001])
def test_a_byte_rate_no_audio_has_counts_at_the_lowest_bit_rate(byte_rate: int) -> None:
    data = wav(0.5, byte_rate=byte_rate)
    assert audio_seconds(data) == len(data) * 3 / 4 / 750


@pytest.mark.parametrize(
    "header",
    [b"RIFX", b"WAVX", b"fmtX"],
    ids=["not RIFF", "not WAVE", "no fmt chunk first"],
)
def test_audio_that_is_not_a_wav_counts_at_the_lowest_bit_rate(header: bytes) -> None:
    raw = bytearray(base64.b64decode(wav(0.5)))
    at = {b"RIFX": 0, b"WAVX": 8, b"fmtX": 12}[header]
    raw[at : at + 4] = header
    data = b64(bytes(raw))
    assert audio_seconds(data) == len(data) * 3 / 4 / 750
    assert audio_seconds("data:audio/wav;base64," + data) == len(data) * 3 / 4 / 750


def test_a_data_url_gives_its_media_type_and_its_base64() -> None:
    assert data_of("data:Image/PNG ;base64,AAAA") == ("image/png", "AAAA")
    assert data_of("data:text/plain;charset=utf-8;base64,QQ==") == ("text/plain", "QQ==")
    assert data_of("data:;base64,QQ==") == ("", "QQ==")
    assert data_of("QUJD") == ("", "QUJD")  # plain base64
    assert data_of("data:text/csv,a,b") == ("text/csv", "a,b")  # the first comma ends the head


def test_base64_is_read_as_clients_write_it() -> None:
    assert decoded("QUJD") == b"ABC"
    assert decoded("QU\nJD\r\n") == b"ABC"  # line breaks skipped
    assert decoded("QUJDRA") == b"ABC"  # padding cut: the whole quanta
    assert decoded("QU JD*RA") == b"ABC"  # and other characters out of the alphabet
    assert decoded("YW Jj*ZA") == b"abc"  # lower case letters are base64 too
    assert decoded("QUJDREVG", 3) == b"ABCDEF"  # a limit reads at least that much


@given(st.text())
def test_any_text_decodes_to_bytes(text: str) -> None:
    """Whatever a client sends as base64, its bytes are read, never an error."""
    assert isinstance(decoded(text), bytes)
    assert isinstance(decoded(text, 3), bytes)


def test_a_limit_reads_a_bounded_head_of_the_data() -> None:
    raw = bytes(range(256)) * 64
    for limit in (1, 64, 1000):
        head = decoded(b64(raw), limit)
        assert head is not None
        assert raw.startswith(head) and limit <= len(head) <= limit + 64


def packed_pages(pages: int, after_stream: bytes = b"\n") -> bytes:
    body = zlib.compress(b"\n".join(b"<< /Type /Page >>" for _ in range(pages)))
    return (
        b"<< /Type /ObjStm /Filter /FlateDecode >>\nstream" + after_stream + body + b"\nendstream\n"
    )


@pytest.mark.parametrize("after_stream", [b"\n", b"\r\n", b""], ids=["LF", "CRLF", "none"])
def test_an_object_stream_starts_after_its_keywords_line_end(after_stream: bytes) -> None:
    raw = b"%PDF-1.5\n" + packed_pages(3, after_stream)
    assert pdf_pages(b64(raw)) == 3


def test_an_object_stream_is_read_only_near_its_marker_and_its_filter() -> None:
    body = zlib.compress(b"<< /Type /Page >>")
    head = b"<< /Type /ObjStm /Filter /FlateDecode >>"
    reach = 2_048 - len(b"stream") - len(head[head.index(b"ObjStm") + 6 :])

    def pdf(spaces: int, dictionary: bytes = head) -> str:
        stream = dictionary + b" " * spaces + b"stream\n" + body + b"\nendstream\n"
        return b64(b"%PDF-1.5\n" + stream)

    assert pdf_pages(pdf(reach)) == 1  # "stream" ends right at 2 KB past the marker
    assert pdf_pages(pdf(reach + 1)) == 0  # a byte further: not this marker's stream
    flate = b"/FlateDecode"
    filtered = flate + b" " * (2_048 - len(flate)) + b"/Type /ObjStm"
    assert pdf_pages(pdf(1, filtered)) == 1  # the filter starts 2 KB before the marker
    filtered = flate + b" " * (2_049 - len(flate)) + b"/Type /ObjStm"
    assert pdf_pages(pdf(1, filtered)) == 0  # a byte further back: not its filter


def test_an_object_stream_after_one_that_is_not_read_is_read() -> None:
    plain = b"<< /Type /ObjStm >>\nstream\n<< /Type /Pages >>\nendstream\n"  # no filter
    raw = b"%PDF-1.5\n" + plain + packed_pages(4)
    assert pdf_pages(b64(raw)) == 4
    assert media_data._object_streams(b"<< /Type /ObjStm /FlateDecode >>\nstream\n" + b"x") == []


def test_what_object_streams_inflate_to_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = packed_pages(50), packed_pages(7)
    inflated = len(zlib.decompress(first[first.index(b"stream\n") + 7 : first.index(b"\nend")]))
    monkeypatch.setattr(media_data, "_INFLATED_BYTES", inflated)
    raw = b"%PDF-1.5\n" + first + second
    assert [len(s) for s in media_data._object_streams(raw)] == [inflated]  # then none
    monkeypatch.setattr(media_data, "_INFLATED_BYTES", inflated + 1)
    assert [len(s) for s in media_data._object_streams(raw)] == [inflated, 1]
    monkeypatch.setattr(media_data, "_INFLATED_BYTES", 100)
    assert [len(s) for s in media_data._object_streams(raw)] == [100]  # cut at the bound


def test_a_marker_or_a_filter_at_the_very_start_is_read() -> None:
    raw = packed_pages(2)[3:]  # from "/Type /ObjStm" on
    assert len(media_data._object_streams(raw)) == 1
    raw = b"/FlateDecode " + raw.replace(b"/Filter /FlateDecode", b"")
    assert len(media_data._object_streams(raw)) == 1


def test_the_streams_after_one_holding_a_marker_are_read() -> None:
    holding = b"<< /Type /ObjStm /Filter /FlateDecode >>\nstream\n/Type /ObjStm\nendstream\n"
    assert pdf_pages(b64(b"%PDF-1.5\n" + holding + packed_pages(3))) == 3


def test_only_a_pdf_has_pages() -> None:
    page = b"<< /Type /Page >>\n"
    assert pdf_pages(b64(b"%PDF-1.4\n" + page * 3)) == 3
    assert pdf_pages(b64(b" " * 1020 + b"%PDF" + page)) == 1  # its mark within 1 KB
    assert pdf_pages(b64(b" " * 1021 + b"%PDF" + page)) == 0
    assert pdf_pages(b64(page * 3)) == 0


@pytest.mark.parametrize(("gap", "counted"), [(400, 7), (401, 0)])
def test_a_page_tree_count_belongs_to_a_node_at_most_400_bytes_away(gap: int, counted: int) -> None:
    before = b"%PDF-1.4\n<< /Type /Pages" + b" " * gap + b"/Count 7 >>"
    after = b"%PDF-1.4\n<< /Count 7" + b" " * gap + b"/Type /Pages >>"
    assert pdf_pages(b64(before)) == counted
    assert pdf_pages(b64(after)) == counted


def test_a_page_tree_count_is_not_read_across_a_dictionarys_end() -> None:
    assert pdf_pages(b64(b"%PDF-1.4\n<< /Count 7 >> << /Type /Pages >>")) == 0
    assert pdf_pages(b64(b"%PDF-1.4\n<< /Type /Pages >> << /Count 7 >>")) == 0
