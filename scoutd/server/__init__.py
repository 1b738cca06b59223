"""The daemon (docs/ARCHITECTURE.md): ``scoutd serve`` runs :func:`run`.

- :mod:`.listener`: binding and probing the socket, systemd socket activation
- :mod:`.connection`: one connection's read loop, limits and timeouts
- :mod:`.handlers`: the method table and the dispatch of one request line
- :mod:`.workers`: what runs in worker threads (path checks, decoding, preparing)
- :mod:`.sessions`: sessions, inbox watches and the abort push
- :mod:`.daemon_config`: the configuration generations and what a reload may change
- :mod:`.metrics`: counters and latencies, rendered as Prometheus text
- :mod:`.server`: the lifecycle, startup -> main loop -> shutdown
"""

from __future__ import annotations

from .daemon_config import load_daemon_config, missing_roots
from .listener import Listener, StartupError, open_listener
from .server import Server, run, serve

__all__ = [
    "Listener",
    "Server",
    "StartupError",
    "load_daemon_config",
    "missing_roots",
    "open_listener",
    "run",
    "serve",
]
