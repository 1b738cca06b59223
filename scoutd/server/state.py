"""What the daemon's connections and handlers share, without the :class:`Server` itself.

:class:`Shared` holds the configuration generation (the one snapshot provider:
:meth:`Shared.current`), the limits and the daemon-wide counters that every
connection reads and keeps; the server owns it, the connections change its
counters, all on the event loop. :class:`Daemon` is what a request handler may
ask of the daemon. So ``connection.py`` and ``handlers.py`` import neither
``server.py`` nor each other's caller (docs/ARCHITECTURE.md, "Layers").
"""

from __future__ import annotations

from typing import Protocol

import anyio

from .. import protocol
from ..config import DaemonConfig
from .daemon_config import Snapshot
from .metrics import Metrics
from .quotas import Quotas
from .sessions import SessionRegistry

__all__ = ["Daemon", "Shared"]


class Shared:
    """The configuration generation, the bounds and the daemon-wide counts.

    ``snapshot`` is swapped whole by a reload; a request keeps the one it
    started with. ``in_flight`` and ``pending_request_bytes`` count over all
    connections; ``drained`` is set when the last request in flight ends
    after ``shutting_down``.
    """

    def __init__(self, snapshot: Snapshot, metrics: Metrics, own_uid: int, workers: int) -> None:
        self.snapshot = snapshot
        self.metrics = metrics
        self.own_uid = own_uid
        # what each uid and the daemon hold: prepare slots, unread answers, sessions
        self.quotas = Quotas(self.daemon, workers)
        self.in_flight = 0  # requests being handled or answered, on all connections
        self.pending_request_bytes = 0  # request lines, first byte to answer, all connections
        self.connections_by_uid: dict[int, int] = {}
        # Waits sized by the configuration: reads for bytes (their timeouts) and
        # connections held back by unread answers (their bounds). A reload cancels
        # each, and each reads the new generation's values at once (rule 29).
        self.waits: set[anyio.CancelScope] = set()
        self.shutting_down = False
        self.drained = anyio.Event()

    def current(self) -> Snapshot:
        """The configuration generation now (what the registry and quotas read)."""
        return self.snapshot

    def daemon(self) -> DaemonConfig:
        """The ``[daemon]`` keys now (the bounds the quotas hold to)."""
        return self.snapshot.config.daemon

    def request_ended(self) -> None:
        """One request fewer in flight; the last one during a shutdown sets ``drained``."""
        self.in_flight -= 1
        if self.shutting_down and not self.in_flight:
            self.drained.set()


class Daemon(Protocol):
    """What a request handler may use of the daemon (:class:`~.server.Server` is one)."""

    shared: Shared
    registry: SessionRegistry
    limiter: anyio.CapacityLimiter

    async def reload(self) -> int:
        """Re-read the configuration; the new generation (ConfigError: kept the old)."""
        ...

    def status(self) -> protocol.StatusResult:
        """The ``status`` answer."""
        ...

    def metrics_text(self) -> str:
        """The ``metrics`` answer: Prometheus text."""
        ...
