"""What an image, a file or audio in a message counts for in the default's estimate.

A provider bills an image by its size in pixels, not by its bytes: at most
about 1,600 tokens (Anthropic; OpenAI's high detail 765 to 1,105 for common
sizes). Counted as the text of its base64 data, one 750 KB image weighed
250,000 tokens and the default dropped every tool output of a short chat to
fit the window. A media block of a message's content is counted as a text of
:data:`MEDIA_CHARS` characters instead, whatever its data: a fixed cost, like
the ``[image]`` a tool output's image becomes in the view
(:func:`scoutd.formats.view.blocks_text`), only nearer what is billed.
Documents and audio are billed by their pages or seconds: the fixed cost
undercounts a long one.

A tool output shows its media as placeholders in the view (``[image]``); the
adapter marks its view message with how many it holds (:data:`MEDIA_KEY`), and
the estimate adds the fixed cost of each while the output is sent whole. A
shortened output is counted as its shortened text; one whose text is too
short to shorten is left as it was, and sent with its images: counted whole
(:func:`~.cost_aware.sent_with_media`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import contains
from typing import Any

__all__ = ["MEDIA_CHARS", "MEDIA_KEY", "counted_content", "is_media", "media_count", "media_tokens"]

# About 1,500 tokens at the default 4 characters a token.
MEDIA_CHARS = 6_000
# The key of a tool output's view message that says how many media blocks it holds.
MEDIA_KEY = "scoutd.media"
_STAND_IN = "m" * MEDIA_CHARS
_MEDIA_TYPES = frozenset(("document", "audio", "input_audio"))


def is_media(block: Any) -> bool:
    """Whether a content block is an image, a file, a document or audio in any
    provider format (``image``, ``image_url``, ``input_image``, ``file``,
    ``input_file``, ``document``, ``input_audio``)."""
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    return type(kind) is str and ("image" in kind or kind.endswith("file") or kind in _MEDIA_TYPES)


def counted_content(content: Any) -> Any:
    """``content`` as the estimate counts it: each media block of a list replaced by a
    text of :data:`MEDIA_CHARS` characters; anything else as it is (the same object
    when it holds no media, so that its count is unchanged)."""
    if type(content) is not list or not any(map(is_media, content)):
        return content
    return [_STAND_IN if is_media(block) else block for block in content]


def media_count(content: Any) -> int:
    """How many media blocks a tool output's content holds (0 for a text)."""
    return sum(map(is_media, content)) if type(content) is list else 0


def media_tokens(messages: Sequence[Any], count: Callable[[str], int]) -> list[tuple[int, int]]:
    """``(position, tokens)`` of each message marked with :data:`MEDIA_KEY`: what its
    media add to its count, at the fixed cost each."""
    try:  # most conversations hold none: looked for without a Python loop first
        unmarked = not any(map(contains, messages, repeat(MEDIA_KEY)))
    except TypeError:  # a message that holds nothing (a number): looked at one by one
        unmarked = False
    if unmarked:
        return []
    marked = [i for i, m in enumerate(messages) if type(m) is dict and MEDIA_KEY in m]
    each = count(_STAND_IN)
    found = []
    for i in marked:
        blocks = messages[i][MEDIA_KEY]
        if type(blocks) is int and blocks > 0:
            found.append((i, blocks * each))
    return found
