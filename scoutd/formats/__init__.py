"""Provider message formats in and out of the strategies (docs/FORMATS.md).

Pure code. Each provider format has an adapter (:class:`.adapter.Adapter`)
with two functions: ``view(messages)`` gives the scout view the strategies
work on (a :class:`~scoutd.formats.view.View`), and ``rebuild(messages, view,
outcome)`` turns what the strategies made of that view back into provider
messages. A message the strategies did not change comes back as the very same
object. The adapter also declares what the engine needs to know of the format
besides, so that nothing outside the format's module branches on its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import anthropic, openai_chat, openai_responses
from .adapter import Adapter
from .detect import (
    ANTHROPIC,
    AUTO,
    FORMATS,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    SCOUT,
    FormatError,
    check_format_name,
    detect_format,
    format_of,
    signals,
)
from .view import Outcome, Rebuilt, View, outcome

__all__ = [
    "ANTHROPIC",
    "AUTO",
    "FORMATS",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "SCOUT",
    "Adapter",
    "FormatError",
    "Outcome",
    "Rebuilt",
    "View",
    "adapter",
    "check_format_name",
    "detect_format",
    "foreign_warning",
    "format_of",
    "outcome",
    "resolve_format",
    "scout_view",
    "signals",
]


_ADAPTERS = {
    OPENAI_CHAT: openai_chat.ADAPTER,
    OPENAI_RESPONSES: openai_responses.ADAPTER,
    ANTHROPIC: anthropic.ADAPTER,
}


def adapter(name: str) -> Adapter | None:
    """The adapter of a provider format; None for ``scout`` (no conversion)."""
    return _ADAPTERS.get(name)


def foreign_warning(messages: Sequence[Any], name: str) -> str | None:
    """A warning when ``messages`` carry tool traffic of a format other than ``name``."""
    found = {fmt: where for fmt, where in signals(messages).items() if fmt != name}
    if not found:
        return None
    fmt, (index, why) = min(found.items(), key=lambda f: f[1][0])
    return (
        f"format {name!r} requested but message {index} carries {fmt} tool traffic ({why}):"
        f" that traffic is passed through unchanged; send format={fmt!r} or 'auto'"
    )


def resolve_format(messages: Sequence[Any], requested: str = AUTO) -> tuple[str, str | None]:
    """The format to use for ``messages`` and a warning if they do not fit it.

    Raises:
        ValueError: an unknown format name, or ``auto`` over a list that mixes formats.
    """
    requested = check_format_name(requested)
    if requested == AUTO:
        return detect_format(messages), None
    return requested, foreign_warning(messages, requested)


def scout_view(messages: Sequence[Any], format: str = AUTO) -> list[Any]:
    """The conversation as the strategies see it: scout tool messages.

    For the simulator and for inspection; the messages it makes are new, the
    others are the input's own objects.
    """
    name, _ = resolve_format(messages, format)
    chosen = adapter(name)
    if chosen is None:
        return list(messages)
    return chosen.view(messages, False, None).messages
