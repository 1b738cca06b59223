"""The daemon harnesses: a subprocess, or the same server in a thread of this process."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, Self

from ..config import PromptConfig
from .figures import proc_status
from .wire import LineClient, toml_text, wait_for

__all__ = ["ROOT", "START_TIMEOUT", "STOP_TIMEOUT", "Daemon", "InProcessDaemon"]

START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
# Never inherited by a harness daemon unless asked for: the runner's own systemd
# context, and the environment variables that would change its configuration.
_SYSTEMD_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS")
_PROMPT_ENV = tuple(
    "PROMPT_STRATEGY" if key == "prompt_strategies" else key.upper()
    for key in PromptConfig.__struct_fields__
)


class Daemon:
    """One ``python -m scoutd serve`` subprocess with its own temp dir and config.

    ``prompt``/``daemon``/``plugins`` are written as the config file's tables;
    defaults suited to tests are added to ``[daemon]`` (socket in the temp dir,
    ``allowed_roots`` = the temp dir, ``rescan_interval`` 0.5 s, debug logs).
    ``env`` adds environment variables; ``argv_prefix`` wraps the command
    (e.g. ``["sh", "-c", '...exec "$0" "$@"']``); ``pass_fds`` is handed to
    Popen. ``name`` prefixes the socket, config and log file names (several
    daemons may share a ``directory``). The temp dir is removed by
    :meth:`cleanup` (called on exit) when the harness made it.
    """

    def __init__(
        self,
        *,
        prompt: Mapping[str, Any] | None = None,
        daemon: Mapping[str, Any] | None = None,
        plugins: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        argv_prefix: Sequence[str] = (),
        pass_fds: Sequence[int] = (),
        directory: str | None = None,
        name: str | None = None,
    ) -> None:
        self.dir = directory or tempfile.mkdtemp(prefix="sd", dir="/tmp")
        self._own_dir = directory is None
        self._final_log = ""  # the log's text when cleanup removed the temp dir
        self.socket_path = os.path.join(self.dir, f"{name or 's'}.sock")
        self.config_path = os.path.join(self.dir, f"{name or 'scoutd'}.toml")
        self.log_path = os.path.join(self.dir, f"{name or 'daemon'}.log")
        self.prompt = dict(prompt or {})
        self.daemon = {
            "socket_path": self.socket_path,
            "allowed_roots": [self.dir],
            "rescan_interval": 0.5,
            "log_level": "debug",
            **(daemon or {}),
        }
        self.plugins = dict(plugins or {})
        self.env = dict(env or {})
        self.argv_prefix = list(argv_prefix)
        self.pass_fds = tuple(pass_fds)
        self.proc: subprocess.Popen[bytes] | None = None
        self.write_config()

    # --- configuration ---------------------------------------------------------------

    def write_config(self, text: str | None = None) -> None:
        """Replace the config file atomically (write a temp file, rename it over)."""
        if text is None:
            tables: dict[str, Mapping[str, Any]] = {"daemon": self.daemon}
            if self.prompt:
                tables["prompt"] = self.prompt
            if self.plugins:
                tables["plugins"] = self.plugins
            text = toml_text(tables)
        temp = self.config_path + ".new"
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, self.config_path)

    # --- process ---------------------------------------------------------------------

    def command(self) -> list[str]:
        return [
            *self.argv_prefix,
            sys.executable,
            "-m",
            "scoutd",
            "serve",
            "--config",
            self.config_path,
            "--socket",
            self.socket_path,
        ]

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> Self:
        env = {**os.environ, **self.env}
        for name in _SYSTEMD_ENV + _PROMPT_ENV:
            if name not in self.env:
                env.pop(name, None)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (ROOT, self.dir, env.get("PYTHONPATH", "")) if p
        )
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed right after Popen dups it
        try:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                pass_fds=self.pass_fds,
                cwd=self.dir,
            )
        finally:
            log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until the daemon answers ``status`` (fail early if it exits)."""

        def answers() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with LineClient(self.socket_path, timeout=2) as client:
                    return "result" in client.call("status")
            except (OSError, ValueError):  # not listening yet, or closed while starting
                return False

        wait_for(answers, timeout, "the daemon to answer")

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the daemon gets no chance to clean up (its socket file stays)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self) -> int:
        """The daemon's resident memory (``VmRSS`` of /proc/PID/status), in KiB."""
        rss = proc_status(self.pid, "VmRSS")
        if not rss:
            raise RuntimeError(f"no VmRSS in /proc/{self.pid}/status")
        return rss

    def status(self, timeout: float = 10.0) -> dict[str, Any]:
        """The result of a ``status`` call on a new connection."""
        with LineClient(self.socket_path, timeout) as client:
            result: dict[str, Any] = client.call("status")["result"]
            return result

    def cleanup(self, keep: bool = False) -> None:
        """Stop the daemon and remove its temp dir (unless ``keep``); its log is kept
        in memory, so that :meth:`log` still reads it after a ``with`` block."""
        self.stop()
        if self._own_dir and not keep:
            self._final_log = self.log()
            shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        """The daemon's log so far (its last text once the temp dir is removed)."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return self._final_log

    def connect(self, timeout: float = 10.0) -> LineClient:
        return LineClient(self.socket_path, timeout)

    @contextlib.contextmanager
    def client(self, timeout: float = 10.0) -> Iterator[LineClient]:
        with self.connect(timeout) as client:
            yield client

    def __enter__(self) -> Self:
        try:
            if self.proc is None:
                self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


class InProcessDaemon(Daemon):
    """The daemon on an event loop in a thread of this process, on a real socket.

    Same configuration file, socket and temp dir as :class:`Daemon`; the log
    (the ``scoutd`` loggers, at the configured level) goes to ``log_path``.
    For what needs no process of its own: no signals, restarts or crashes,
    and :attr:`pid` is this process. Client code runs in the caller's thread
    as it would against a subprocess.
    """

    def __init__(self, **kwargs: Any) -> None:
        for unsupported in ("env", "argv_prefix", "pass_fds"):
            if kwargs.get(unsupported):
                raise TypeError(f"InProcessDaemon takes no {unsupported}: use Daemon")
        super().__init__(**kwargs)
        self._portal_cm: contextlib.AbstractContextManager[Any] | None = None
        self._portal: Any = None
        self._server: Any = None
        self._future: Any = None
        self._handler: logging.Handler | None = None
        self._level = logging.NOTSET  # the ``scoutd`` logger's level before start

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> Self:
        from anyio.from_thread import start_blocking_portal

        from ..daemon_log import set_level
        from ..server import serve
        from ..server.daemon_config import load_daemon_config

        config, _, _ = load_daemon_config(self.config_path, environ={})
        self._handler = logging.FileHandler(self.log_path, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("scoutd")
        logger.addHandler(self._handler)
        self._level = logger.level
        set_level(config.daemon.log_level)
        self._portal_cm = start_blocking_portal(backend="asyncio")
        self._portal = self._portal_cm.__enter__()
        try:
            self._future, self._server = self._portal.start_task(
                partial(serve, config, socket_path=self.socket_path, config_arg=self.config_path),
                name="scoutd in-process daemon",
            )
        except BaseException:
            self._close()
            raise
        return self

    def _close(self) -> None:
        if self._portal_cm is not None:
            portal_cm, self._portal_cm = self._portal_cm, None
            portal_cm.__exit__(None, None, None)
        if self._handler is not None:
            logger = logging.getLogger("scoutd")
            logger.removeHandler(self._handler)
            logger.setLevel(self._level)  # the daemon's log level ends with it
            self._handler.close()
            self._handler = None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Shut the daemon down gracefully and wait for it; 0 once stopped."""
        if self._portal_cm is None:
            return None
        try:
            self._portal.call(self._server.stop)
            self._future.result(timeout)
        finally:
            self._close()
        return 0

    def alive(self) -> bool:
        return self._portal_cm is not None

    @property
    def server(self) -> Any:
        """The running :class:`scoutd.server.Server` (read it only through :meth:`call`)."""
        return self._server

    def call(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run ``func(*args)`` on the daemon's event loop and return its result."""
        return self._portal.call(func, *args)

    @property
    def pid(self) -> int:
        return os.getpid()

    def signal(self, signum: int) -> None:
        raise TypeError("an in-process daemon takes no signals: use Daemon")

    def kill(self) -> None:
        raise TypeError("an in-process daemon cannot be killed: use Daemon")
