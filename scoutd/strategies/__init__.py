"""The built-in prompt strategies: pure objects over plain message lists.

Each is a :class:`~.base.Strategy`: a name, what it declares of its prompts
(appends only, keeps a stable prefix, a round-by-round form) and ``run(messages,
ctx)`` returning ``(new_messages, report)``; the
:class:`~.base.PrepareContext` carries the configuration, the provider
format (only the cost-aware default reads it, to price a rewrite as that
provider bills it), the save file and the roles and contents read once. Only
``inbox`` touches the filesystem.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import Builtin, PrepareContext, Strategy
from .cost_aware import COST_AWARE
from .epoch import EPOCH, EPOCH_INCREMENT
from .inbox import INBOX
from .reasons import NEVER
from .report import StrategyReport, plain_report
from .shorten_tools import SHORTEN_TOOLS

__all__ = ["BUILTINS", "NONE"]


def _none(messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
    report = plain_report("none", messages, messages)
    report.reason = NEVER
    return list(messages), report


NONE = Builtin("none", _none, appends_only=True, keeps_prefix=True)

BUILTINS: dict[str, Strategy] = {
    strategy.name: strategy
    for strategy in (SHORTEN_TOOLS, EPOCH, EPOCH_INCREMENT, COST_AWARE, INBOX, NONE)
}
