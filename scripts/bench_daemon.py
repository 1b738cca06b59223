"""The daemon of a ``scripts/bench`` phase, its /proc figures, and a relay that counts
the bytes a session round sends and receives."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Sequence

import scoutd
from scoutd import testing
from scoutd.config import DaemonConfig
from scoutd.testing import inotify_usage, proc_status

# Waiting for a daemon to answer its first `status`: interpreter start and imports.
START_TIMEOUT = 30.0


class Daemon(testing.Daemon):
    """One bench phase's daemon (:class:`scoutd.testing.Daemon`): the built-in rescan
    interval, logs at warning, and room for the 10,000 sessions of the memory phase."""

    def __init__(self, directory: str, name: str, roots: Sequence[str]) -> None:
        super().__init__(
            daemon={
                "allowed_roots": list(roots),
                "log_level": "warning",
                "rescan_interval": DaemonConfig().rescan_interval,
                "max_sessions_per_uid": 1_000_000,
            },
            directory=directory,
            name=name,
        )

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> Daemon:
        super().start(wait=wait, timeout=timeout)
        return self

    def log(self) -> str:
        return super().log()[-4000:]

    def client(self, timeout: float = 120.0) -> scoutd.Client:  # type: ignore[override]
        return scoutd.Client(self.socket_path, timeout=timeout)

    # /proc figures of the daemon process

    def rss_kb(self) -> int:
        return proc_status(self.pid, "VmRSS")

    def threads(self) -> int:
        return proc_status(self.pid, "Threads")

    def inotify_watches(self) -> int:
        """Kernel inotify watches the daemon holds (``inotify wd:`` lines in fdinfo)."""
        return inotify_usage(self.pid)[1]


def max_inotify_watches() -> int | None:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


class CountingRelay:
    """A Unix-socket relay to the daemon that counts the bytes each way.

    Used once, outside any timing, to see what a session round really sends:
    the whole conversation or only what was appended.
    """

    def __init__(self, path: str, target: str) -> None:
        self.path, self.target = path, target
        self.sent = 0  # client -> daemon
        self.received = 0  # daemon -> client
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-relay", daemon=True)

    def __enter__(self) -> CountingRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():  # maybe still in accept(): wake it
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as wake:
                wake.connect(self.path)
        self._thread.join(10)
        self._listener.close()

    def _run(self) -> None:
        client, _ = self._listener.accept()
        if self._stop.is_set():
            client.close()
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(self.target)
        with client, upstream, selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, upstream)
            selector.register(upstream, selectors.EVENT_READ, client)
            while not self._stop.is_set():
                for key, _ in selector.select(0.1):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(1 << 20)
                    if not data:
                        return
                    if source is client:
                        self.sent += len(data)
                    else:
                        self.received += len(data)
                    key.data.sendall(data)


# -- the benchmarks --------------------------------------------------------------------
