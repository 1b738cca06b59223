"""What an image, a document, a file or audio in a message counts for in the estimate.

A provider bills media by what they hold, not by the characters of their
base64 data: an image by its pixels, a PDF by its pages (each page's text and
an image of it), a text document by its text, audio by its seconds. Counted as
the text of its data, one 750 KB image weighed 250,000 tokens and the default
dropped every tool output of a short chat; counted at one fixed image cost, a
200-page PDF or a 500 KB text document weighed 1,500 tokens and the prompt
overflowed the window. Each media block now counts as an upper bound of what
its provider documents (:func:`block_tokens`), in tokens, whatever the
tokenizer or ``chars_per_token``:

- an image at least :data:`IMAGE_TOKENS` (1,500, the former fixed cost, above
  OpenAI's most by tiles: 85 + 170 x 8 = 1,445); an Anthropic one read from its
  PNG, GIF, JPEG or WebP header as ``width x height / 750`` after the 1,568 px
  downscale, at most :data:`ANTHROPIC_IMAGE_MOST`, which one whose size cannot
  be read (a URL, a file id) counts;
- a PDF at :data:`PAGE_TOKENS` a page (3,000 of text and 1,600 of its image),
  its pages counted in its data (:func:`~.media_data.pdf_pages`); one whose pages cannot be
  counted as the text of its data, at least one page;
- a text document (Anthropic ``source.type`` ``text`` or ``content``, a
  ``text/*`` file) as its text;
- audio at :data:`AUDIO_TOKENS_PER_SECOND`, its seconds read from a WAV
  header, else from its size at 6 kbit/s (below the 8 kbit/s an MP3 goes
  down to: more seconds than it holds);
- a file known only by an id or a URL, whose size cannot be known, as one page
  (:data:`UNKNOWN_FILE_TOKENS`).

Media are looked for in a content list and below a block's ``content`` (a
``tool_result`` passed through, a web fetch's document: :func:`split_media`).
A tool output shows its media as placeholders in the view (``[image]``); the
adapter puts its media blocks under :data:`MEDIA_KEY` of its view message, and
the estimate adds what they count while the output is sent whole. An assistant
turn's thinking or reasoning, sent back with it, goes there too, and counts as
its JSON text (:func:`sent_tokens`). A shortened
output is counted as its shortened text; one whose text is too short to
shorten is left as it was, and sent with its media: counted whole
(:func:`~.cost_aware.sent_with_media`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import contains
from typing import Any

import msgspec

from .media_data import audio_seconds, data_of, decoded, image_size, pdf_pages
from .text import ENCODE_ERRORS, json_text

__all__ = [
    "ANTHROPIC_IMAGE_MOST",
    "AUDIO_TOKENS_PER_SECOND",
    "IMAGE_TOKENS",
    "MEDIA_CHARS",
    "MEDIA_KEY",
    "PAGE_TOKENS",
    "UNKNOWN_FILE_TOKENS",
    "billed_content",
    "block_tokens",
    "counted_content",
    "is_media",
    "media_blocks",
    "media_count",
    "media_tokens",
    "sent_tokens",
    "split_media",
]

# The least an image counts, in tokens: the former fixed cost (6,000 characters at 4 a
# token), above OpenAI's most by tiles (high detail: 85 + 170 x 8 tiles = 1,445).
IMAGE_TOKENS = 1_500
MEDIA_CHARS = 6_000  # the same, in characters at 4 a token (what the simulator bills)
# Anthropic: width x height / 750, an image above about 1,600 tokens scaled down to it.
ANTHROPIC_IMAGE_MOST = 1_600
_ANTHROPIC_EDGE = 1_568  # the long edge an Anthropic image is scaled down to
_PIXELS_PER_TOKEN = 750
# A PDF page: its text (Anthropic documents 1,500 to 3,000 tokens a page) and an image.
PAGE_TOKENS = 3_000 + ANTHROPIC_IMAGE_MOST
# Audio: OpenAI bills about 10 tokens a second (1 per 100 ms), 1,000 a minute by
# other accounts: twice the first, to stay above both.
AUDIO_TOKENS_PER_SECOND = 20
# A file known by an id or a URL alone: its size cannot be known, one page is assumed.
UNKNOWN_FILE_TOKENS = PAGE_TOKENS
# The key of a view message that holds what it sends but does not show: a tool
# output's media blocks, an assistant turn's thinking (:func:`sent_tokens`).
MEDIA_KEY = "scoutd.media"
_STAND_IN = "m" * MEDIA_CHARS  # what one image counted for before (a legacy count mark)
_PLACEHOLDER = ""  # what a media block is in the text counted: its cost is added apart
_MEDIA_TYPES = frozenset(("document", "audio", "input_audio"))
_OPENAI_LOW = 85  # an OpenAI image at ``detail: low``


def is_media(block: Any) -> bool:
    """Whether a content block is an image, a file, a document or audio in any
    provider format (``image``, ``image_url``, ``input_image``, ``file``,
    ``input_file``, ``document``, ``input_audio``)."""
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    return type(kind) is str and ("image" in kind or kind.endswith("file") or kind in _MEDIA_TYPES)


def counted_content(content: Any) -> Any:
    """``content`` as the estimate counts its text: each media block of a list replaced
    by an empty text, whose cost :func:`block_tokens` gives apart; anything else as it
    is (the same object when it holds no media, so that its count is unchanged)."""
    return split_media(content)[0]


def split_media(content: Any) -> tuple[Any, list[Mapping[str, Any]]]:
    """``content`` with each media block replaced by an empty text, and those blocks:
    in a list, and below a block's ``content`` (a ``tool_result`` the adapter passes
    through, a web fetch's result), :data:`_DEPTH` levels down at most. ``content``
    itself when it holds none."""
    found: list[Mapping[str, Any]] = []

    def take(block: Mapping[str, Any]) -> Any:
        found.append(block)
        return _PLACEHOLDER

    if type(content) is not list:
        return content, found
    return _replaced(content, take, _DEPTH), found


# How deep media are looked for: a list, its block, the block's ``content`` (a list or a
# result object), and the object's ``content`` (a web fetch's document).
_DEPTH = 4


def _replaced(value: Any, replace: Callable[[Mapping[str, Any]], Any], depth: int) -> Any:
    """``value`` with each media block ``replace``'d, through lists and ``content`` keys
    ``depth`` levels down; ``value`` itself when nothing was replaced."""
    if isinstance(value, Mapping):
        if is_media(value):
            return replace(value)
        inner = value.get("content")
        if depth <= 0 or not (type(inner) is list or isinstance(inner, Mapping)):
            return value
        changed = _replaced(inner, replace, depth - 1)
        return value if changed is inner else {**value, "content": changed}
    if type(value) is not list or depth <= 0:
        return value
    out: list[Any] | None = None
    for at, item in enumerate(value):
        if type(item) is str:
            continue
        changed = _replaced(item, replace, depth - 1)
        if changed is not item:
            if out is None:
                out = list(value)
            out[at] = changed
    return value if out is None else out


def media_blocks(content: Any) -> list[Any]:
    """The media blocks of a tool output's content (none for a text)."""
    return [block for block in content if is_media(block)] if type(content) is list else []


def media_count(content: Any) -> int:
    """How many media blocks a tool output's content holds (0 for a text)."""
    return sum(map(is_media, content)) if type(content) is list else 0


def content_tokens(content: Any, count: Callable[[str], int]) -> int:
    """What the media blocks of ``content`` (a list, and below, :func:`split_media`)
    count, in tokens."""
    return sum(block_tokens(block, count) for block in split_media(content)[1])


def sent_tokens(blocks: list[Any], count: Callable[[str], int]) -> int:
    """What the blocks a view message carries under :data:`MEDIA_KEY` count: its media
    by the rules above, and any other block (the thinking or reasoning a turn sends
    back, which the view does not show) as its JSON text."""
    tokens = content_tokens(blocks, count)
    rest = [block for block in blocks if not is_media(block)]
    if rest:
        try:
            text = msgspec.json.encode(rest).decode()
        except ENCODE_ERRORS:  # a lone surrogate, a key that is not a string
            text = json_text(rest)
        tokens += count(text)
    return tokens


def block_tokens(block: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """What one media block counts for, in tokens: an upper bound of what its provider
    bills (the module's rules); ``count`` counts a text document's text."""
    kind = block.get("type")
    if type(kind) is not str:
        return IMAGE_TOKENS
    if kind == "document":
        return _document_tokens(block, count)
    if "image" in kind:
        return _image_tokens(block, kind)
    if kind.endswith("file"):
        found = block.get("file") if kind == "file" else block
        return _file_tokens(found if isinstance(found, Mapping) else {}, count)
    if kind in ("audio", "input_audio"):
        audio = block.get("input_audio", block.get("audio"))
        return _audio_tokens(audio if isinstance(audio, Mapping) else {})
    return IMAGE_TOKENS


def _image_tokens(block: Mapping[str, Any], kind: str) -> int:
    """An image: Anthropic's by its size when read (at most the cap, else the cap);
    any other at the floor, above OpenAI's most."""
    if kind != "image":
        return IMAGE_TOKENS
    source = block.get("source")
    data = source.get("data") if isinstance(source, Mapping) else None
    size = image_size(data) if type(data) is str else None
    if size is None:
        return ANTHROPIC_IMAGE_MOST
    width, height = size
    scale = min(1.0, _ANTHROPIC_EDGE / max(width, height, 1))
    pixels = math.ceil(width * scale) * math.ceil(height * scale)
    tokens = min(ANTHROPIC_IMAGE_MOST, math.ceil(pixels / _PIXELS_PER_TOKEN))
    return max(IMAGE_TOKENS, tokens)


def _document_tokens(block: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """An Anthropic document: a text one as its text, a PDF by its pages, one by URL
    or file id as one page."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        return UNKNOWN_FILE_TOKENS
    kind, data = source.get("type"), source.get("data")
    if kind == "text" and type(data) is str:
        return count(data)
    if kind == "content":
        inner = source.get("content")
        if type(inner) is str:
            return count(inner)
        if type(inner) is list:  # text and image blocks (read one level deep, no further)
            texts = [b.get("text") for b in inner if isinstance(b, Mapping)]
            words = "\n".join(t for t in texts if type(t) is str)
            images = [b for b in inner if is_media(b)]
            return count(words) + sum(_image_tokens(b, b["type"]) for b in images)
        return UNKNOWN_FILE_TOKENS
    if kind == "base64" and type(data) is str:
        return _pdf_tokens(data, count)
    return UNKNOWN_FILE_TOKENS


def _pdf_tokens(data: str, count: Callable[[str], int]) -> int:
    """A PDF's base64 ``data``: its pages at :data:`PAGE_TOKENS`, or, when they cannot be
    counted, the text of its data (at least one page)."""
    pages = pdf_pages(data)
    if pages:
        return pages * PAGE_TOKENS
    return max(PAGE_TOKENS, count(data))


def _file_tokens(file: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """An OpenAI file part (Chat ``file.file_data``, Responses ``input_file``): a PDF by
    its pages, a text by its text, another by the text of its data; by id or URL one page."""
    data = file.get("file_data")
    if type(data) is not str:
        return UNKNOWN_FILE_TOKENS
    media_type, raw = data_of(data)
    if media_type.startswith("text/") or media_type in ("application/json", "application/xml"):
        return count(decoded(raw).decode("utf-8", "replace"))
    if media_type in ("", "application/pdf"):
        return _pdf_tokens(raw, count)
    return max(PAGE_TOKENS, count(raw))


def _audio_tokens(audio: Mapping[str, Any]) -> int:
    """Audio: its seconds (a WAV header's, else its size at the lowest bit rate)."""
    data = audio.get("data")
    if type(data) is not str:
        return UNKNOWN_FILE_TOKENS
    return max(1, math.ceil(audio_seconds(data) * AUDIO_TOKENS_PER_SECOND))


def media_tokens(messages: Sequence[Any], count: Callable[[str], int]) -> list[tuple[int, int]]:
    """``(position, tokens)`` of each message marked with :data:`MEDIA_KEY`: what its
    media add to its count (a list of the blocks; a positive count of images at the
    former fixed cost)."""
    try:  # most conversations hold none: looked for without a Python loop first
        unmarked = not any(map(contains, messages, repeat(MEDIA_KEY)))
    except TypeError:  # a message that holds nothing (a number): looked at one by one
        unmarked = False
    if unmarked:
        return []
    marked = [i for i, m in enumerate(messages) if type(m) is dict and MEDIA_KEY in m]
    found = []
    for i in marked:
        blocks = messages[i][MEDIA_KEY]
        if type(blocks) is list and blocks:
            found.append((i, sent_tokens(blocks, count)))
        elif type(blocks) is int and blocks > 0:
            found.append((i, blocks * count(_STAND_IN)))
    return found


def billed_content(content: Any, chars_per_token: float) -> Any:
    """``content`` as the simulator bills it: each media block (as :func:`split_media`
    finds them) replaced by a text of as many characters as its tokens take at
    ``chars_per_token``, so that a replay bills media by the estimate's rules."""

    def count(text: str) -> int:
        return math.ceil(len(text) / chars_per_token)

    def stand_in(block: Mapping[str, Any]) -> str:
        return "m" * math.ceil(block_tokens(block, count) * chars_per_token)

    return _replaced(content, stand_in, _DEPTH) if type(content) is list else content
