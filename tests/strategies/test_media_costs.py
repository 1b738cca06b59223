"""Media count at least what their provider documents: the estimate is an upper bound.

Providers bill an image by its pixels (Anthropic about width x height / 750,
capped near 1,600; OpenAI 85 + 170 a 512 px tile, 85 at low detail), a PDF by
its pages (each page's text, 1,500 to 3,000 tokens, and an image of it), a
text document by its text, audio by its seconds (about 1 token per 100 ms).
Each case below is built with its true size (real PNG and JPEG headers, real
PDFs, a WAV header), and the documented cost of what was built is compared
with the estimate. Before, every block counted as 6,000 characters of text: a
200-page PDF weighed 1,505 tokens instead of 600,000, a 500 KB text document
1,505 instead of 128,000, ten minutes of audio 1,505 instead of 6,000, an
image 755 tokens at ``chars_per_token = 8`` and 5 with a tokenizer that counts
words.
"""

from __future__ import annotations

import base64
import json
import math
import struct
import zlib
from typing import Any

import pytest

from scoutd.config import PromptConfig
from scoutd.strategies.tokens import message_tokens, token_counter

# --- media of a size the test decides -------------------------------------------------


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def png(width: int, height: int, padding: int = 20_000) -> str:
    """Base64 of a PNG whose header says ``width`` x ``height`` (its pixel data is not
    decoded by anyone: a private chunk pads it to a realistic size)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
    data += _chunk(b"prVt", bytes(range(256)) * (padding // 256)) + _chunk(b"IEND", b"")
    return base64.b64encode(data).decode()


def jpeg(width: int, height: int) -> str:
    """Base64 of a JPEG whose frame header comes after 30 KB of metadata."""
    app = b"\xff\xe1" + struct.pack(">H", 30_002) + bytes(30_000)
    frame = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return base64.b64encode(b"\xff\xd8" + app + frame + b"\xff\xd9").decode()


def pdf(pages: int, packed: bool = False, words: int = 300) -> str:
    """Base64 of a PDF of ``pages`` pages of text; ``packed``: its page objects inside a
    compressed object stream (PDF 1.5), where no plain text shows them."""
    kids = " ".join(f"{3 + 2 * n} 0 R" for n in range(pages))
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
    }
    text = " ".join(["word"] * words)
    for n in range(pages):
        page = f"<< /Type /Page /Parent 2 0 R /Contents {4 + 2 * n} 0 R >>".encode()
        stream = f"BT /F1 12 Tf ({text} {n}) Tj ET".encode()
        objects[3 + 2 * n] = page
        objects[4 + 2 * n] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    out = b"%PDF-1.5\n"
    if packed:  # the page objects (and the tree) compressed into one object stream
        inside = [number for number, body in objects.items() if b"/Type /Page" in body]
        listed = b" ".join(b"%d 0" % number for number in inside)  # offsets never read here
        body = zlib.compress(listed + b"\n" + b"\n".join(objects.pop(n) for n in inside))
        objects[999] = (
            b"<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\nstream\n"
            % (len(inside), len(listed) + 1, len(body))
            + body
            + b"\nendstream"
        )
    for number, body in objects.items():
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    out += b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
    return base64.b64encode(out).decode()


def wav(seconds: float, rate: int = 16_000, byte_rate: int | None = None) -> str:
    """Base64 of ``seconds`` of 16-bit mono PCM silence in a WAV file; ``byte_rate``: what
    its header says it plays a second (the true one when None)."""
    samples = bytes(int(seconds * rate) * 2)
    per_second = rate * 2 if byte_rate is None else byte_rate
    header = b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt "
    header += struct.pack("<IHHIIHH", 16, 1, 1, rate, per_second, 2, 16)
    return base64.b64encode(header + b"data" + struct.pack("<I", len(samples)) + samples).decode()


# --- the documented costs -------------------------------------------------------------


def anthropic_image(width: int, height: int) -> int:
    """Anthropic: the long edge scaled to 1,568 px, then pixels / 750, at most ~1,600."""
    scale = min(1.0, 1568 / max(width, height))
    return min(1600, math.ceil(width * scale * height * scale / 750))


def openai_image(width: int, height: int, detail: str = "high") -> int:
    """OpenAI: 85 at low detail; else fit in 2,048 px, shortest side to 768 px, 85 + 170
    a 512 px tile."""
    if detail == "low":
        return 85
    fit = min(1.0, 2048 / max(width, height))
    shortest = min(1.0, 768 / (min(width, height) * fit))
    wide, high = width * fit * shortest, height * fit * shortest
    return 85 + 170 * math.ceil(wide / 512) * math.ceil(high / 512)


PAGE = 3_000  # a PDF page's text at the top of Anthropic's documented range
AUDIO_PER_SECOND = 10  # 1 token per 100 ms


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


# --- the blocks, in each format -------------------------------------------------------

TEXT_DOCUMENT = "".join(
    f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(9_000)
)


def cases() -> list[tuple[str, dict[str, Any], int]]:
    """``(name, block, documented tokens)``: every kind of media the formats carry."""
    found: list[tuple[str, dict[str, Any], int]] = []
    for width, height in ((1092, 1092), (1568, 735), (4000, 3000), (200, 100), (584, 362)):
        data = png(width, height)
        found.append(
            (
                f"anthropic png {width}x{height}",
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                },
                anthropic_image(width, height),
            )
        )
        for detail in ("high", "low", "auto"):
            found.append(
                (
                    f"chat png {width}x{height} {detail}",
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:image/png;base64,{data}", "detail": detail},
                    },
                    openai_image(width, height, detail),
                )
            )
        found.append(
            (
                f"responses png {width}x{height}",
                {"type": "input_image", "image_url": f"data:image/png;base64,{data}"},
                openai_image(width, height),
            )
        )
    found.append(
        (
            "anthropic jpeg 1100x1100",
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/jpeg", "data": jpeg(1100, 1100)},
            },
            anthropic_image(1100, 1100),
        )
    )
    found.append(
        (
            "anthropic image by url",
            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            1600,
        )
    )
    found.append(
        ("chat image by url", {"type": "image_url", "image_url": {"url": "https://x/y.png"}}, 1445)
    )
    for pages, packed in ((200, False), (30, True), (1, False)):
        data = pdf(pages, packed)
        label = f"{pages}-page pdf{' packed' if packed else ''}"
        found.append(
            (
                f"anthropic {label}",
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": data},
                },
                pages * PAGE,
            )
        )
        found.append(
            (
                f"chat {label}",
                {
                    "type": "file",
                    "file": {
                        "filename": "a.pdf",
                        "file_data": f"data:application/pdf;base64,{data}",
                    },
                },
                pages * PAGE,
            )
        )
        found.append(
            (
                f"responses {label}",
                {
                    "type": "input_file",
                    "filename": "a.pdf",
                    "file_data": f"data:application/pdf;base64,{data}",
                },
                pages * PAGE,
            )
        )
    found.append(
        (
            "anthropic 500 KB text document",
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": TEXT_DOCUMENT},
            },
            text_tokens(TEXT_DOCUMENT),
        )
    )
    found.append(
        (
            "anthropic content document",
            {
                "type": "document",
                "source": {"type": "content", "content": [{"type": "text", "text": TEXT_DOCUMENT}]},
            },
            text_tokens(TEXT_DOCUMENT),
        )
    )
    encoded = base64.b64encode(TEXT_DOCUMENT.encode()).decode()
    found.append(
        (
            "responses text file",
            {
                "type": "input_file",
                "filename": "a.txt",
                "file_data": f"data:text/plain;base64,{encoded}",
            },
            text_tokens(TEXT_DOCUMENT),
        )
    )
    for seconds in (600, 3):
        for kind in ("chat", "responses"):
            found.append(
                (
                    f"{kind} {seconds} s of wav",
                    {"type": "input_audio", "input_audio": {"data": wav(seconds), "format": "wav"}},
                    seconds * AUDIO_PER_SECOND,
                )
            )
    return found


CASES = cases()


def _estimate(block: dict[str, Any], config: PromptConfig, label: str = "") -> int:
    """What the estimate adds for ``block`` in a user message, beyond the message alone."""
    count = token_counter(config)
    with_block = message_tokens(
        [{"role": "user", "content": [{"type": "text", "text": "a"}, block]}], count
    )
    alone = message_tokens([{"role": "user", "content": [{"type": "text", "text": "a"}]}], count)
    return with_block[0] - alone[0]


@pytest.mark.parametrize(("name", "block", "documented"), CASES, ids=[c[0] for c in CASES])
def test_each_media_block_counts_at_least_its_documented_cost(
    name: str, block: dict[str, Any], documented: int
) -> None:
    estimate = _estimate(block, PromptConfig())
    assert estimate >= documented, (name, estimate, documented)
    # and not wildly more where the size was readable (a page's image and text, at most)
    assert estimate <= max(1_600, 2 * documented + 16), (name, estimate, documented)


def words(text: str) -> int:
    """A tokenizer that counts words: what a text tokenizer makes of base64 runs."""
    return len(text.split())


@pytest.mark.parametrize(
    "config",
    [
        PromptConfig(chars_per_token=8.0),
        PromptConfig(chars_per_token=16.0),
        PromptConfig(tokenizer=f"{__name__}:words"),
    ],
    ids=["8 chars a token", "16 chars a token", "a word tokenizer"],
)
def test_an_image_counts_in_tokens_whatever_the_tokenizer(config: PromptConfig) -> None:
    """Before, an image counted as 6,000 characters run through the token count: 755
    tokens at 8 characters a token, 380 at 16, 5 with a tokenizer that counts words."""
    checked = 0
    for name, block, documented in CASES:
        if "image" in str(block.get("type")):
            estimate = _estimate(block, config, name)
            assert estimate >= documented, (name, estimate, documented)
            checked += 1
    assert checked >= 20


def test_the_real_runs_images_count_as_before() -> None:
    """Small images count at the former fixed cost (6,000 characters, 1,500 tokens), so
    that the recorded runs, whose images are small, prepare byte for byte as they did."""
    count = token_counter(PromptConfig())
    for data in (png(584, 362), png(1484, 216)):  # the sizes of the recorded runs' images
        small = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
        former = [{"type": "text", "text": "a"}, "m" * 6_000]
        expected = math.ceil(len(json.dumps(former, separators=(",", ":"))) / 4) + 4
        message = {"role": "user", "content": [{"type": "text", "text": "a"}, small]}
        assert message_tokens([message], count) == [expected]


HOSTILE: list[dict[str, Any]] = [
    {"type": "image", "source": None},
    {"type": "image", "source": {"type": "base64", "data": 7}},
    {"type": "image", "source": {"type": "base64", "data": "é" * 100}},
    {"type": "image", "source": {"type": "base64", "data": "iVBORw0KGgo"}},  # a PNG cut short
    {
        "type": "image",
        "source": {"type": "base64", "data": base64.b64encode(b"\xff\xd8\xff").decode()},
    },
    {"type": "document", "source": {"type": "base64", "data": "not a pdf"}},
    {"type": "document", "source": {"type": "content", "content": [{"type": "image"}, 3]}},
    {"type": "document", "source": {"type": "text", "data": None}},
    {"type": "document"},
    {"type": "file", "file": "x"},
    {"type": "file", "file": {"file_data": "data:application/pdf;base64,%%%"}},
    {"type": "input_file", "file_data": "data:text/plain;base64,@@@@"},
    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    {"type": "input_audio", "input_audio": None},
    {"type": "input_file", "file_data": "data:application/pdf;base64," + pdf(2)[:-40]},
]


@pytest.mark.parametrize("block", HOSTILE, ids=range(len(HOSTILE)))
def test_a_malformed_block_counts_without_raising(block: dict[str, Any]) -> None:
    """Whatever a media block holds, it is counted, never an error: at least an image's
    floor, but an empty text file or a WAV header without samples (as what they hold)."""
    small = block.get("type") == "input_audio" and isinstance(block.get("input_audio"), dict)
    small = small or "text/plain" in str(block.get("file_data"))
    assert _estimate(block, PromptConfig()) >= (0 if small else 1_500)


def _nested_cases() -> list[tuple[str, dict[str, Any], int]]:
    """Media one or two levels down a message's blocks: a ``tool_result`` the adapter
    passes through (its call is missing), a web fetch's result holding a PDF."""
    data = pdf(200)
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
    }
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png(1092, 1092)},
    }
    fetched = {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {"type": "web_fetch_result", "url": "https://x/r.pdf", "content": document},
    }
    return [
        (
            "a passed-through tool_result's pdf",
            {"type": "tool_result", "tool_use_id": "gone", "content": [document]},
            200 * PAGE,
        ),
        (
            "a passed-through tool_result's image",
            {"type": "tool_result", "tool_use_id": "gone", "content": [image]},
            1590,
        ),
        ("a web fetch's pdf", fetched, 200 * PAGE),
    ]


NESTED = _nested_cases()


@pytest.mark.parametrize(("name", "block", "documented"), NESTED, ids=[c[0] for c in NESTED])
def test_media_inside_a_block_count_as_media(
    name: str, block: dict[str, Any], documented: int
) -> None:
    """Before, media below the top level counted as the text of their data: a 200-page
    PDF fetched by the web fetch tool weighed 110,197 tokens (its base64) instead of
    600,000."""
    estimate = _estimate(block, PromptConfig())
    assert documented <= estimate <= 2 * documented + 64, (name, estimate, documented)
