"""One consumer of an inbox at a time in the daemon: its abort claims and its calls' pickups.

The daemon's watcher claims an inbox's abort for its sessions while a prepare
call of the same chat may pick that inbox up in a worker thread. A claim must
never wait for prepare calls (a call may wait long for a worker of the
prepare pool, and an abort must not), yet an abort that is in the inbox when
a call begins must fail that call. An :class:`InboxGate` gives both:

* a claim and a pickup of one inbox exclude each other (a lock per inbox,
  held for the claim, or for the pickup's listing and takes: bounded work,
  never a sleep); a claim waits at most for one pickup, never for a queue;
* a claim that takes an abort records it (:meth:`InboxGate.record`), with a
  sequence number;
* a prepare call notes the sequence number when it begins
  (:meth:`InboxGate.ticket`, a :class:`Ticket` handed explicitly down to its
  pickup through ``PrepareContext.inbox``); its pickup, holding the lock,
  first asks whether a claim took the abort since (:func:`guarded`), and if
  one did fails with that abort (:class:`~scoutd.errors.StillAborted`: this
  call consumed nothing) and takes nothing else.

Without a ticket (the library in an agent's own process) :func:`guarded`
does nothing: consumers in different processes race by rename, as ever.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from ..errors import StillAborted

__all__ = ["MAX_TAKEN", "InboxGate", "Ticket", "guarded"]

# Takes remembered for calls that began before them: the most recent, per inbox.
MAX_TAKEN = 4096


class InboxGate:
    """The per-inbox locks and the record of aborts claimed, for one daemon. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, list[int]]] = {}  # inbox -> lock, users
        self._taken: OrderedDict[str, tuple[int, str]] = OrderedDict()  # inbox -> (seq, reason)
        # not mutated (here and at each step): only the order of the numbers matters
        self._seq = 0  # pragma: no mutate

    @contextmanager
    def holding(self, inbox: str) -> Iterator[None]:
        """Hold ``inbox``'s lock: no other claim or pickup of it in this daemon meanwhile."""
        with self._lock:
            lock, users = self._locks.setdefault(inbox, (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._lock:
                users[0] -= 1
                if not users[0]:
                    del self._locks[inbox]

    def record(self, inbox: str, reason: str) -> None:
        """A claim (holding ``inbox``'s lock) took its abort with ``reason``."""
        with self._lock:
            self._seq += 1  # pragma: no mutate
            self._taken[inbox] = (self._seq, reason)
            self._taken.move_to_end(inbox)
            while len(self._taken) > MAX_TAKEN:
                self._taken.popitem(last=False)  # pragma: no mutate (None is false too)

    def taken_since(self, inbox: str, seq: int) -> str | None:
        """The reason of an abort of ``inbox`` claimed after sequence number ``seq``."""
        with self._lock:
            found = self._taken.get(inbox)
        return found[1] if found is not None and found[0] > seq else None

    def ticket(self) -> Ticket:
        """A prepare call beginning now: what its pickup needs to hold its inbox."""
        with self._lock:
            return Ticket(self, self._seq)


class Ticket(NamedTuple):
    """One daemon prepare call's hold on the gate: the gate, and its sequence number
    when the call began (an abort claimed after it fails the call)."""

    gate: InboxGate
    seq: int


@contextmanager
def guarded(inbox: str, ticket: Ticket | None) -> Iterator[None]:
    """In a daemon's prepare call (``ticket``), hold ``inbox`` against its claims (see
    the module); without one, nothing.

    Raises:
        StillAborted: a claim took the inbox's abort since the call began.
    """
    if ticket is None:
        yield
        return
    gate, seq = ticket
    with gate.holding(inbox):
        reason = gate.taken_since(inbox, seq)
        if reason is not None:
            raise StillAborted(reason)
        yield
