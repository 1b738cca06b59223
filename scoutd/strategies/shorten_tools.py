"""``shorten_tools`` (SPEC section 4): recomputed on every turn.

Walks newest-first. The newest tool messages, those of the newest user turn,
and those that fit the character budget stay whole; older ones are truncated,
and the oldest dropped, a pair always sharing one fate for dropping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import PromptConfig
from .report import Fate, StrategyReport, apply_fates
from .tool_messages import index_tools, role_of, shortened_call, shortened_output

__all__ = ["shorten_tools"]


def shorten_tools(
    messages: Sequence[Any], config: PromptConfig, *, detail: bool = False
) -> tuple[list[Any], StrategyReport]:
    """Apply ``shorten_tools`` to ``messages``; return the new list and a report."""
    index = index_tools(messages)
    tools = index.tools
    fates = [Fate.KEPT] * len(tools)
    rewrites: list[str | None] = [None] * len(tools)
    limits = {
        True: (config.full_tool_calls, config.max_tool_calls),
        False: (config.full_tool_outputs, config.effective_max_tool_outputs),
    }
    budget = config.max_tool_chars
    tool_chars = 0
    user_turns = 0
    slot = len(tools) - 1
    for position in range(len(messages) - 1, -1, -1):
        if slot >= 0 and tools[slot].index == position:
            tool = tools[slot]
            full, most = limits[tool.is_call]
            if tool.position < full or user_turns == 0 or tool_chars < budget:
                tool_chars += len(messages[position]["content"])
            elif tool.position > most:
                fates[slot] = Fate.DROPPED
            else:
                new = shortened_call(tool.data) if tool.is_call else shortened_output(tool.data)
                if new is not None:
                    fates[slot] = Fate.TRUNCATED
                    rewrites[slot] = new
                    tool_chars += len(new)
            slot -= 1
        elif role_of(messages[position]) == "user":
            user_turns += 1
    for slot, tool in enumerate(tools):
        if tool.partner >= 0 and fates[tool.partner] is Fate.DROPPED:
            fates[slot] = Fate.DROPPED
    return apply_fates("shorten_tools", messages, index, fates, rewrites, detail=detail)
