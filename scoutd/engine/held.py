"""What a stored conversation holds in memory: one model for every bound on it.

The daemon counts its sessions by it (:mod:`scoutd.server.quotas`), and so does
a process that keeps many in-process sessions (the LiteLLM proxy's chats,
:mod:`scoutd.integrations.litellm`): a bound on memory counts the memory a
conversation really takes, not its messages or characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["HELD_PER_JSON_BYTE", "HELD_PER_VALUE", "held_bytes", "json_values"]

# What a stored conversation holds, measured as the growth of the daemon's
# resident memory (docs/RELIABILITY.md, "CPU and memory"): each byte of its JSON
# three to five times (the decoded strings; the view texts and the bodies parsed
# from them; shortened copies and the last prompt; what the allocator keeps of
# the rounds), and each JSON value (object, array, string, number) up to about
# 300 bytes more (the Python object, and the view message, index and prompt
# entries it leads to). Rounded up: no conversation measured held more.
HELD_PER_JSON_BYTE = 5
HELD_PER_VALUE = 320


def json_values(messages: Sequence[Any]) -> int:
    """How many JSON values ``messages`` hold (objects, arrays and scalars), one pass."""
    count = 0
    stack: list[Any] = [messages]
    while stack:
        items = stack.pop()
        count += len(items)
        for value in items:
            kind = type(value)
            if kind is dict:
                stack.append(value.values())
            elif kind is list:
                stack.append(value)
    return count


def held_bytes(messages: Sequence[Any], json_bytes: int) -> int:
    """The memory a session holds for ``messages`` (``json_bytes`` of JSON)."""
    return HELD_PER_JSON_BYTE * json_bytes + HELD_PER_VALUE * json_values(messages)
