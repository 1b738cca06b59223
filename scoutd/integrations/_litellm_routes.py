"""Which conversation of a chat a LiteLLM proxy request continues (docs/INTEGRATIONS.md).

Agents that share one ``x-scoutd-chat`` header (an agent and its sub-agents)
send the proxy conversations that interleave. Kept as one session, each turn of
one agent after another's made the session start over (its plan, its stable
prefix, its work lost). Each conversation under a header is kept as a session
of its own instead: a request goes to the one whose latest request its messages
begin with (the longest such), or to a new one. What is remembered of each is a
digest of that latest request and its length, never the messages.

Bounded: at most :data:`MAX_CONVERSATIONS` a chat (past it, the least recently
used one's session is taken over and starts over, as one session did before),
and the chats remembered are those the proxy keeps at most. Each conversation
is a chat of the proxy's bounded cache (:mod:`._chat_cache`), so the count and
memory bounds hold them all. The chat's inbox is one: a notice goes to the
request that prepares first, an abort stops every conversation of the chat.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = ["MAX_CONVERSATIONS", "Routes", "format_of"]

# Conversations kept apart under one chat header.
MAX_CONVERSATIONS = 8
# What the cache's format of a chat's second and later conversations carries.
_MARK = "#"
_DIGEST = 16


def format_of(name: str) -> str:
    """The message format of a kept conversation's name (its format, perhaps marked)."""
    return name.split(_MARK, 1)[0]


@dataclass
class _Conversation:
    """A conversation under a chat header: its cache name and its latest request's
    length and digest."""

    name: str
    length: int = 0
    digest: bytes = b""
    used: int = 0


def prefix_digests(messages: Sequence[Any]) -> list[bytes] | None:
    """The digest of each leading run of ``messages`` (entry ``i``: the first ``i + 1``),
    or None when one cannot be encoded as JSON (then nothing is told apart)."""
    running = hashlib.blake2b(digest_size=_DIGEST)
    found: list[bytes] = []
    encoder = msgspec.json.Encoder()
    for message in messages:
        try:
            encoded = encoder.encode(message)
        except (TypeError, ValueError, OverflowError, RecursionError):
            return None
        running.update(len(encoded).to_bytes(8, "little"))
        running.update(encoded)
        found.append(running.copy().digest())
    return found


class Routes:
    """The conversations of each chat header, the chats least recently used first,
    at most ``max_chats`` of them. Thread-safe."""

    def __init__(self, max_chats: int) -> None:
        self.max_chats = max_chats
        self._lock = threading.Lock()
        self._chats: OrderedDict[tuple[str, str], list[_Conversation]] = OrderedDict()
        self._clock = 0

    def route(self, save_file: str, format: str, messages: Sequence[Any]) -> str:
        """The name (a format, marked past the first) of the conversation of chat
        ``(save_file, format)`` that ``messages`` continue, now their latest request."""
        digests = prefix_digests(messages)
        if digests is None or not digests:
            return format  # nothing to tell apart by: the chat's first conversation
        key = (save_file, format)
        with self._lock:
            kept = self._chats.pop(key, None) or []
            self._chats[key] = kept
            while len(self._chats) > self.max_chats:
                self._chats.popitem(last=False)
            found = [
                c
                for c in kept
                if 0 < c.length <= len(digests) and digests[c.length - 1] == c.digest
            ]
            chosen = max(found, key=lambda c: (c.length, c.used), default=None)
            if chosen is None:
                chosen = self._new(kept, format)
            self._clock += 1
            chosen.length, chosen.digest, chosen.used = len(digests), digests[-1], self._clock
            return chosen.name

    def _new(self, kept: list[_Conversation], format: str) -> _Conversation:
        """A conversation for a request that continues none (under the lock): a new
        name, or, past the bound, the least recently used one taken over."""
        if len(kept) >= MAX_CONVERSATIONS:
            return min(kept, key=lambda c: c.used)
        names = {c.name for c in kept}
        number = next(n for n in range(MAX_CONVERSATIONS) if _name(format, n) not in names)
        conversation = _Conversation(_name(format, number))
        kept.append(conversation)
        return conversation


def _name(format: str, number: int) -> str:
    return format if number == 0 else f"{format}{_MARK}{number}"
