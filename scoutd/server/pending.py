"""Aborts the watcher claimed, waiting for their chat's next session-less call.

A call without a session has no ``session.aborted`` to learn of an abort the
watcher consumed, so the registry keeps the abort's reason per inbox and the
chat's next session-less ``prepare_prompt`` fails with it, once. The chat's
durable marker (:mod:`scoutd.inbox.aborted`) is what keeps the chat aborted
after that; a reason kept here is reported only while that marker still
exists: an operator's ``scoutd clear`` in between lifts it (the next call is
served, not refused once more with an abort already cleared).
"""

from __future__ import annotations

from collections import OrderedDict
from functools import partial

import anyio

from ..inbox.aborted import held

__all__ = ["MAX_PENDING_ABORTS", "PendingAborts"]

# Aborts claimed for inboxes whose next session-less prepare_prompt has not come yet.
# Bounded so that abandoned save files cannot grow the daemon's memory.
MAX_PENDING_ABORTS = 4096
# Threads that look for a pending abort's marker: never the prepare pool (a refusal
# does not wait for a worker), and only after an abort, so two are plenty.
MARKER_THREADS = 2


class PendingAborts:
    """The reasons of the aborts the watcher consumed, per inbox, at most
    :data:`MAX_PENDING_ABORTS` (the oldest are forgotten first).

    Runs on the event loop; the marker look goes to a thread of its own.
    """

    def __init__(self) -> None:
        self._reasons: OrderedDict[str, str] = OrderedDict()  # inbox -> reason
        self._limiter = anyio.CapacityLimiter(MARKER_THREADS)

    def add(self, inbox: str, reason: str) -> None:
        """Keep ``reason`` for ``inbox``'s next session-less call (the newest wins)."""
        self._reasons[inbox] = reason
        self._reasons.move_to_end(inbox)
        while len(self._reasons) > MAX_PENDING_ABORTS:
            self._reasons.popitem(last=False)

    async def take(self, inbox: str, save_file: str | None) -> str | None:
        """The reason kept for ``inbox``, forgotten now; None if the chat was cleared.

        ``save_file``: the call's resolved save file (``inbox`` is its inbox).
        Costs nothing when no reason is kept, the common case; otherwise one
        thread hop, for :func:`~scoutd.inbox.aborted.held` (one ``lstat`` per
        marker place when the operator cleared the chat).
        """
        reason = self._reasons.pop(inbox, None)
        if reason is None or save_file is None:
            return reason
        found = partial(held, save_file, exact=True)  # the resolved path, exactly (inbox.walk)
        if await anyio.to_thread.run_sync(found, limiter=self._limiter) is None:
            return None  # cleared since the watcher took it: served
        return reason
