"""The stable prefix of a prepared prompt and the Anthropic cache breakpoint.

Inside an epoch the epoch strategies only append to the prompt (docs/STRATEGIES.md),
so every message of their prompt stays byte-identical until the next epoch
boundary, except what the ``inbox`` strategy appended (delivered once) and,
when a repeated call keeps an older pair whole, whatever follows that pair. For
any other strategy only the messages before the first tool traffic are known
to stay. ``stable_prefix`` counts those leading messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .detect import first_signal

if TYPE_CHECKING:
    from .adapter import Adapter

__all__ = [
    "hinted",
    "reported",
    "stable_prefix",
    "with_cache_control",
]

_THINKING = frozenset(("thinking", "redacted_thinking"))


def _before_tool_traffic(messages: Sequence[Any], prompt: Sequence[Any]) -> int:
    """Leading prompt messages that are the input's own and precede any tool traffic."""
    first_tool = first_signal(prompt)
    count = 0
    for given, sent in zip(messages, prompt[:first_tool], strict=False):
        if given is not sent:
            break
        count += 1
    return count


def stable_prefix(
    keeps: bool,
    messages: Sequence[Any],
    prompt: Sequence[Any],
    delivered: int,
    protected: int,
    joined: bool,
) -> int:
    """How many leading messages of ``prompt`` stay byte-identical until the next epoch.

    ``keeps``: every strategy run declares that it keeps the prefix
    (``Strategy.keeps_prefix``; not a callable), ``delivered`` the
    inbox notices appended, ``protected`` the tool messages kept whole because
    of a repeat, ``joined``: the format's notices join the last user turn
    (``Adapter.notices_join_turn``) instead of one message each.
    """
    if not keeps or protected:
        return _before_tool_traffic(messages, prompt)
    if delivered:
        return max(len(prompt) - (1 if joined else delivered), 0)
    return len(prompt)


def hinted(
    keeps: bool,
    messages: Sequence[Any],
    prompt: list[Any],
    reports: Sequence[Any],
    chosen: Adapter | None,
    hint: bool,
) -> tuple[list[Any], int]:
    """``prompt`` with the cache hint when ``hint`` asks for it and the format
    ``chosen`` (None: scout) carries one, and its :func:`stable_prefix` from what
    the strategies' ``reports`` say they did."""
    joined = chosen is not None and chosen.notices_join_turn
    stable = stable_prefix(keeps, messages, prompt, *reported(reports), joined)
    if hint and chosen is not None and chosen.cache_hint:
        prompt = with_cache_control(prompt, stable)
    return prompt, stable


def reported(reports: Sequence[Any]) -> tuple[int, int]:
    """The notices delivered and the tools protected, as the strategies' reports say."""
    delivered = sum(r.inbox_delivered for r in reports)
    return delivered, sum(r.calls_protected + r.outputs_protected for r in reports)


def _marked(prompt: Sequence[Any]) -> bool:
    """Whether a block of the prompt's messages, or of a tool result's content in them,
    already carries a ``cache_control`` (a walk, not a recursion: any depth)."""
    pending = [m.get("content") for m in prompt if isinstance(m, Mapping)]
    while pending:
        value = pending.pop()
        if type(value) is not list:
            continue
        for block in value:
            if isinstance(block, Mapping):
                if "cache_control" in block:
                    return True
                pending.append(block.get("content"))
    return False


def with_cache_control(prompt: list[Any], prefix: int) -> list[Any]:
    """``prompt`` with ``cache_control: {"type": "ephemeral"}`` on the last block of
    its first ``prefix`` messages (thinking blocks skipped: they cannot carry it;
    so are malformed blocks, whose ``type`` is not a string).

    Only the message that gets the hint is copied. A prompt whose messages carry
    a mark of the agent's own gets none: Anthropic refuses a fifth mark (system
    and tools, which scoutd does not see, count too) and a shorter-lived mark
    before a longer one, so an agent that places its own marks places them all.
    """
    if _marked(prompt):
        return prompt
    for position in range(min(prefix, len(prompt)) - 1, -1, -1):
        message = prompt[position]
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if type(content) is str and content:
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif type(content) is list:
            blocks = list(content)
        else:
            continue
        for slot in range(len(blocks) - 1, -1, -1):
            block = blocks[slot]
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if type(kind) is not str or kind in _THINKING:
                continue  # malformed (no string type: never hashed, never marked), or thinking
            text = block.get("text", "")
            if kind == "text" and type(text) is str and not text.strip():
                continue  # an empty text block cannot be cached
            marked = dict(block)
            marked["cache_control"] = {"type": "ephemeral"}
            blocks[slot] = marked
            changed = dict(message)
            changed["content"] = blocks
            result = list(prompt)
            result[position] = changed
            return result
    return prompt
