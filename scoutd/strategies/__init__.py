"""The built-in prompt strategies: pure functions over plain message lists.

Each built-in takes ``(messages, prompt_config, save_file, detail, format)``
and returns ``(new_messages, report)``. ``format`` names the conversation's
provider format (docs/FORMATS.md); only the cost-aware default reads it, to
price a rewrite as that provider bills it. Only ``inbox`` touches the
filesystem.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..config import PromptConfig
from .cost_aware import shorten_tools_cost_aware
from .epoch import shorten_tools_epoch, shorten_tools_epoch_increment
from .inbox import inbox
from .report import StrategyReport, plain_report
from .shorten_tools import shorten_tools

__all__ = ["BUILTINS", "Builtin"]

Builtin = Callable[
    [Sequence[Any], PromptConfig, str | None, bool, str], tuple[list[Any], StrategyReport]
]


def _none(
    messages: Sequence[Any], config: PromptConfig, save_file: str | None, detail: bool, fmt: str
) -> tuple[list[Any], StrategyReport]:
    return list(messages), plain_report("none", messages, messages)


BUILTINS: dict[str, Builtin] = {
    "shorten_tools": lambda m, c, s, d, f: shorten_tools(m, c, detail=d),
    "shorten_tools_epoch": lambda m, c, s, d, f: shorten_tools_epoch(m, c, detail=d),
    "shorten_tools_epoch_increment": lambda m, c, s, d, f: shorten_tools_epoch_increment(
        m, c, detail=d
    ),
    "shorten_tools_cost_aware": lambda m, c, s, d, f: shorten_tools_cost_aware(
        m, c, detail=d, format_name=f
    ),
    "inbox": lambda m, c, s, d, f: inbox(m, c, save_file=s),
    "none": _none,
}
