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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MEDIA_CHARS", "counted_content", "is_media"]

# About 1,500 tokens at the default 4 characters a token.
MEDIA_CHARS = 6_000
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
