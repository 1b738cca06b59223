"""The chats a LiteLLM proxy keeps between requests: a bounded LRU of run preparers.

Each chat (save file and format) keeps one :class:`~scoutd.integrations._run.RunPreparer`,
whose in-process session holds the chat's conversation, so that the chat's
next request prepares only what is new. Two bounds, the least recently used
chat's session ending first: the number of chats, and the memory their
conversations hold, counted as the daemon counts its sessions
(:func:`~scoutd.engine.held.held_bytes`) after each round. A chat that alone
holds more than the memory bound is not kept: each of its requests is
prepared whole, which costs time, never memory. Through the daemon a chat
holds nothing here to count: the daemon bounds its sessions itself.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..paths import display_path
from ._run import RunPreparer

__all__ = ["ChatCache", "Chat", "detached"]

log = logging.getLogger("scoutd.integrations.litellm")

# A chat: its save file and the format of its requests.
Chat = tuple[str, str]


class ChatCache:
    """The kept chats, least recently used first, within ``max_chats`` and ``max_bytes``.

    ``new`` makes the preparer of a chat not kept. Thread-safe: the proxy's
    requests run their rounds in worker threads. Preparers evicted are closed
    outside the lock.
    """

    def __init__(self, max_chats: int, max_bytes: int, new: Callable[[Chat], RunPreparer]) -> None:
        self.max_chats = max_chats
        self.max_bytes = max_bytes
        self._new = new
        self._lock = threading.Lock()
        self._chats: OrderedDict[Chat, tuple[RunPreparer, int]] = OrderedDict()
        self._held = 0  # the sum of the held bytes counted for the kept chats

    @property
    def chats(self) -> list[Chat]:
        """The chats kept, least recently used first."""
        with self._lock:
            return list(self._chats)

    @property
    def held(self) -> int:
        """The memory the kept chats held at their last round, in bytes."""
        with self._lock:
            return self._held

    def get(self, chat: Chat) -> RunPreparer:
        """The chat's preparer, most recently used now (made if not kept); the oldest
        beyond ``max_chats`` closed."""
        evicted: list[RunPreparer] = []
        with self._lock:
            found = self._chats.pop(chat, None)
            if found is None:
                found = (self._new(chat), 0)
            self._chats[chat] = found
            while len(self._chats) > self.max_chats:
                evicted.append(self._drop_oldest())
        _close(evicted)
        return found[0]

    def weigh(self, chat: Chat, preparer: RunPreparer) -> None:
        """Count what ``preparer`` holds after a round of ``chat``; close the least
        recently used chats while the kept ones hold more than ``max_bytes`` (this one
        alone over it: this one only)."""
        held = preparer.held_bytes()  # outside the lock: it waits for a round of the chat
        evicted: list[RunPreparer] = []
        with self._lock:
            found = self._chats.get(chat)
            if found is None or found[0] is not preparer:
                return  # evicted meanwhile: closed, nothing of it is held any longer
            self._held -= found[1]
            if held > self.max_bytes:  # alone over the bound: not kept, the others stay
                del self._chats[chat]
                evicted.append(preparer)
                log.warning(
                    "scoutd: the chat %r holds %d bytes, more than SCOUTD_LITELLM_MAX_BYTES"
                    " (%d): it is not kept, each of its requests is prepared whole",
                    display_path(chat[0]),
                    held,
                    self.max_bytes,
                )
            else:
                self._held += held
                self._chats[chat] = (preparer, held)
                while self._held > self.max_bytes:
                    evicted.append(self._drop_oldest())
        _close(evicted)

    def forget(self, chat: Chat, preparer: RunPreparer) -> None:
        """Close ``preparer`` and stop keeping it for ``chat`` (if it is still the one kept)."""
        with self._lock:
            found = self._chats.get(chat)
            if found is not None and found[0] is preparer:
                del self._chats[chat]
                self._held -= found[1]
        preparer.close()

    def clear(self) -> None:
        """Close every kept chat's preparer."""
        with self._lock:
            kept = [preparer for preparer, _ in self._chats.values()]
            self._chats.clear()
            self._held = 0
        _close(kept)

    def _drop_oldest(self) -> RunPreparer:
        """Stop keeping the least recently used chat (under the lock); its preparer."""
        preparer, held = self._chats.popitem(last=False)[1]
        self._held -= held
        return preparer


def _close(preparers: list[RunPreparer]) -> None:
    for preparer in preparers:
        preparer.close()


def detached(messages: list[Any]) -> list[Any]:
    """``messages`` with every list and dict in them new; strings and numbers shared.

    A prepared prompt's messages are its session's: through the daemon, the kept
    chat's last prompt, on which the next answer's delta is applied
    (docs/PROTOCOL.md, "change copies, never them in place"). The proxy hands the
    prompt on to LiteLLM, which changes messages in place (it gives a message
    without a role the role ``assistant``), as may the callbacks after this one:
    handed on as they are, such changes would reach every later request of the
    chat. Iterative, so that no nesting depth is too deep for it.
    """
    top: list[Any] = []
    pending: list[tuple[Any, Any]] = [(messages, top)]
    while pending:
        source, target = pending.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, value in items:
            if isinstance(value, dict | list):
                value, original = ({} if isinstance(value, dict) else []), value
                pending.append((original, value))
            if isinstance(target, dict):
                target[key] = value
            else:
                target.append(value)
    return top
