"""The fleet harness: a real ``redis-server`` on a Unix socket, and daemons that read it.

Shared by tests/fleet/ and ``scripts/bench --fleet``. The server is started
with persistence on (``appendonly``, fsync always), so a server
killed and started again comes back with its streams and consumer groups,
as a production Redis with AOF would. Every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

from .daemon import Daemon
from .wire import toml_text, wait_for

__all__ = ["REDIS_SERVER", "RedisServer", "fleet_daemon"]

REDIS_SERVER = shutil.which("redis-server")
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class RedisServer:
    """One redis-server process; ``url`` is its ``unix://`` address. Stop it with :meth:`stop`."""

    def __init__(
        self, directory: str | None = None, *, fsync: str = "always", args: Sequence[str] = ()
    ) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.dir = directory or tempfile.mkdtemp(prefix="rd", dir="/tmp")
        self._own_dir = directory is None
        self.socket_path = os.path.join(self.dir, "redis.sock")
        self.log_path = os.path.join(self.dir, "redis.log")
        self.fsync = fsync  # appendfsync: "always" (tests), "everysec" (Redis' default)
        self.args = list(args)  # more options (a TLS port, ...)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def start(self) -> Self:
        command = [
            str(REDIS_SERVER),
            "--port", "0",
            "--unixsocket", self.socket_path,
            "--unixsocketperm", "700",
            "--dir", self.dir,
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", self.fsync,
            "--logfile", self.log_path,
            *self.args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, cwd=self.dir)
        wait_for(self.answers, START_TIMEOUT, "redis-server to answer PING")
        return self

    def answers(self) -> bool:
        """A PING over the socket gets ``+PONG`` or ``-NOAUTH`` (the server is up)."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1.0)
                sock.connect(self.socket_path)
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash would; the appended log keeps what was written."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(STOP_TIMEOUT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


def fleet_daemon(url: str, host: str, **fleet: Any) -> Daemon:
    """A daemon (not started) serving its own temp dir, reading the fleet at ``url`` as ``host``.

    Its ``[fleet]`` table has short intervals suited to tests; ``fleet`` keys
    override them. Its journal lives in the daemon's temp dir.
    """
    daemon = Daemon(name=host)
    table = {
        "url": url,
        "host": host,
        "state_dir": os.path.join(daemon.dir, "state"),
        "heartbeat_interval": 0.2,
        "startup_timeout": 5.0,
        "connect_timeout": 1.0,
        "reconnect_max": 0.5,
        **fleet,
    }
    daemon.write_config(toml_text({"daemon": daemon.daemon, "fleet": table}))
    return daemon
