"""``shorten_tools`` (docs/STRATEGIES.md): recomputed on every turn.

Walks newest-first. The newest tool messages, those of the newest user turn,
and those that fit the character budget stay whole; older ones are truncated,
and the oldest dropped, a pair always sharing one fate for dropping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import PromptConfig
from .base import Builtin, PrepareContext
from .columns import Columns
from .reasons import limits_reason
from .report import Changes, StrategyReport, apply_changes
from .rewrites import RewriteCache, shortened
from .tool_messages import Handed, index_tools

__all__ = ["SHORTEN_TOOLS", "shorten_tools"]


def shorten_tools(
    messages: Sequence[Any],
    config: PromptConfig,
    *,
    detail: bool = False,
    columns: Columns | None = None,
    given: Handed | None = None,
    cache: RewriteCache | None = None,
) -> tuple[list[Any], StrategyReport]:
    """Apply ``shorten_tools`` to ``messages``; return the new list and a report."""
    index = index_tools(messages, columns, given)
    dropped: set[int] = set()
    rewrites: dict[int, str] = {}
    limits = {
        True: (config.full_tool_calls, config.max_tool_calls),
        False: (config.full_tool_outputs, config.effective_max_tool_outputs),
    }
    budget = config.max_tool_chars
    tool_chars = 0
    # not mutated: zip over a list and the range of its length (strict= changes nothing)
    slot_at = dict(zip(index.indices, range(len(index.indices)), strict=True))  # pragma: no mutate
    # Walk newest-first over what matters: user messages and usable tool messages.
    walk = sorted(
        [*slot_at, *(i for i, role in enumerate(index.roles) if role == "user")], reverse=True
    )
    user_turns = 0
    for position in walk:
        slot = slot_at.get(position)
        if slot is None:
            # not mutated: only compared with 0 (a step of 2 or -1, or setting 1, is the same)
            user_turns += 1  # pragma: no mutate
            continue
        is_call = index.is_call[slot]
        full, most = limits[is_call]
        rank = index.positions[slot]
        content = messages[position]["content"]
        if rank < full or user_turns == 0 or tool_chars < budget:
            tool_chars += len(content)
        elif rank > most:
            dropped.add(slot)
        else:
            new = shortened(index, messages, slot, cache, config.recall)
            if new is not None:  # the budget is spent here: what is cut need not count
                rewrites[slot] = new
    partners = {index.partners[slot] for slot in dropped} - {-1}
    dropped |= partners
    for slot in dropped:
        rewrites.pop(slot, None)
    changes = Changes(dropped=sorted(dropped), rewrites=rewrites)
    reason = None if dropped or rewrites else limits_reason(config)
    return apply_changes(
        "shorten_tools", messages, index, changes, detail=detail, columns=columns, reason=reason
    )


def _run(messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
    return shorten_tools(
        messages,
        ctx.config,
        detail=ctx.detail,
        columns=ctx.columns,
        given=ctx.given,
        cache=ctx.rewrites,
    )


SHORTEN_TOOLS = Builtin("shorten_tools", _run)
