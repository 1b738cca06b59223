"""Provider message formats in and out of the strategies (docs/FORMATS.md).

Pure code. Each provider format has an adapter with two functions:
``view(messages)`` gives the scout view the strategies work on (a
:class:`~scoutd.formats.view.View`), and ``rebuild(messages, view, outcome)``
turns what the strategies made of that view back into provider messages. A
message the strategies did not change comes back as the very same object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import anthropic, openai_chat, openai_responses
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


@dataclass(frozen=True, slots=True)
class Adapter:
    """The two directions of one provider format."""

    name: str
    view: Callable[[Sequence[Any], bool], View]
    rebuild: Callable[[Sequence[Any], View, Outcome], Rebuilt]

    def restore(self, messages: Sequence[Any], shape: View, result: Sequence[Any]) -> Rebuilt:
        """The provider messages for the strategies' ``result`` over ``shape``, the
        view of ``messages``: ``messages`` themselves when nothing changed."""
        read = outcome(shape, result)
        if read.unchanged:
            return Rebuilt(list(messages))
        return self.rebuild(messages, shape, read)


_ADAPTERS = {
    OPENAI_CHAT: Adapter(OPENAI_CHAT, openai_chat.view, openai_chat.rebuild),
    OPENAI_RESPONSES: Adapter(OPENAI_RESPONSES, openai_responses.view, openai_responses.rebuild),
    ANTHROPIC: Adapter(ANTHROPIC, anthropic.view, anthropic.rebuild),
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
    return chosen.view(messages, False).messages
