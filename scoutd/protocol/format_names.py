"""The names of the message formats (docs/FORMATS.md), and the check of one.

Here, with the wire types, so that a client refuses an unknown format before
sending it without loading the format adapters; :mod:`scoutd.formats` uses the
same names.
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError

__all__ = [
    "ANTHROPIC",
    "AUTO",
    "FORMATS",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "SCOUT",
    "check_format_name",
]

SCOUT = "scout"
OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC = "anthropic"
AUTO = "auto"
FORMATS = (SCOUT, OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC)


def check_format_name(name: Any) -> str:
    """``name`` itself when it names a format or ``auto``; FormatError otherwise."""
    if name == AUTO or name in FORMATS:
        return str(name)
    known = ", ".join((AUTO, *FORMATS))
    raise FormatError(f"unknown message format {name!r}; known formats: {known}")
