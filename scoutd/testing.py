"""Run the real daemon for tests, scripts and programs that embed scoutd.

Two harnesses with one surface (``dir``, ``socket_path``, ``config_path``,
``connect()``, ``status()``, ``log()``, ``write_config()``, ``stop()``):

- :class:`Daemon`: ``python -m scoutd serve`` as a subprocess, for what needs a
  process of its own (signals, restarts, systemd, crashes, memory figures);
- :class:`InProcessDaemon`: the same daemon on an event loop in a thread of
  this process (:func:`scoutd.server.serve`): no interpreter start, no
  imports, so a test's daemon is up in milliseconds.

Usage::

    with Daemon(daemon={"read_timeout": 1.0}) as d:      # starts, waits until it answers
        with d.connect() as c:                            # a raw JSON-lines client
            assert c.call("status")["result"]["config"]["generation"] == 1
    # leaving the block sends SIGTERM and waits (SIGKILL after the timeout)

Every daemon lives in its own short temp dir under /tmp (``d.dir``; socket
paths must stay under 108 bytes) holding the socket ``d.socket_path``, the
config file ``d.config_path`` (``allowed_roots`` = the temp dir, fast rescans)
and the daemon's log ``d.log_path``. Every wait is bounded.

Also here, shared by the test suite and ``scripts/``: :func:`percentile` (the
one nearest-rank percentile, ``q`` in 0..1), :func:`conversation` (the one
synthetic tool-heavy conversation) and the ``/proc`` figures of a process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

from .config import PromptConfig
from .server.metrics import percentile

__all__ = [
    "Daemon",
    "InProcessDaemon",
    "LineClient",
    "conversation",
    "cpu_seconds",
    "inotify_usage",
    "open_fds",
    "percentile",
    "proc_status",
    "summary_ms",
    "toml_text",
    "wait_for",
]

START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout
# Never inherited by a harness daemon unless asked for: the runner's own systemd
# context, and the environment variables that would change its configuration.
_SYSTEMD_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS")
_PROMPT_ENV = tuple(
    "PROMPT_STRATEGY" if key == "prompt_strategies" else key.upper()
    for key in PromptConfig.__struct_fields__
)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/max of durations given in seconds, in milliseconds."""
    return {
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        "p99_ms": round(percentile(seconds, 0.99) * 1000, 3),
        "max_ms": round(max(seconds, default=0.0) * 1000, 3),
    }


def conversation(
    pairs: int = 120, *, output_size: int = 700, tag: str = ""
) -> list[dict[str, Any]]:
    """A system prompt, a task, then ``pairs`` tool call/output pairs with user turns.

    The calls carry non-ASCII arguments long enough to be shortened and a key
    of their own (``extra``) that every strategy must pass through; a user turn
    comes after every 25 pairs.
    """
    task = f"Fix the failing test {tag}." if tag else "Fix the failing test."
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": task},
    ]
    for n in range(pairs):
        args = {"path": f"/src/{n % 37}.py", "pattern": "é/" * 130 + str(n)}
        call = {"name": "grep", "arguments": args, "id": f"c{n}"}
        out = {"name": "grep", "content": f"{n}:" + "line\n" * (output_size // 5), "id": f"c{n}"}
        messages.append({"role": "function_call", "content": json.dumps(call), "extra": n})
        messages.append({"role": "function_call_output", "content": json.dumps(out)})
        if n % 25 == 24:
            messages.append({"role": "user", "content": f"progress check {n}"})
    return messages


# --- /proc figures of a process --------------------------------------------------------


def proc_status(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM, Threads...); 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (from /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def inotify_usage(pid: int) -> tuple[int, int]:
    """``(instances, watches)``: the inotify instances ``pid`` holds and their watches."""
    instances = watches = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                    continue
                instances += 1
                with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
                    watches += sum(1 for line in info if line.startswith("inotify wd:"))
    return instances, watches


def open_fds(pid: int) -> int:
    """File descriptors ``pid`` holds open; 0 if unreadable."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.01) -> Any:
    """Poll ``predicate()`` until it returns a truthy value; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def toml_text(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """A TOML document of flat tables (enough for scoutd's config file)."""
    lines: list[str] = []
    for table, keys in tables.items():
        lines.append(f"[{table}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in keys.items())
        lines.append("")
    return "\n".join(lines)


class LineClient:
    """A blocking JSON-lines client on a raw socket, for tests.

    Responses are matched by ``id``; notifications received meanwhile are kept
    in ``notifications``.
    """

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except BaseException:
            self.sock.close()
            raise
        self.timeout = timeout
        self._buffer = b""
        self._next_id = 0
        self.notifications: list[dict[str, Any]] = []
        self.responses: dict[Any, dict[str, Any]] = {}

    def __enter__(self) -> LineClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: Mapping[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: Any = None, id: Any = None) -> Any:
        """Send a request without waiting; return its id."""
        if id is None:
            self._next_id += 1
            id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return id

    def read_line(self, timeout: float | None = None) -> bytes:
        """The next raw line; b"" when the daemon closed the connection."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no complete line from the daemon")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError:
                raise TimeoutError("no complete line from the daemon") from None
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message (response or notification)."""
        line = self.read_line(timeout)
        if not line:
            raise EOFError("the daemon closed the connection")
        message: dict[str, Any] = json.loads(line)
        return message

    def response(self, id: Any, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the response with ``id`` (other messages are kept aside)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while id not in self.responses:
            message = self.recv(max(0.0, deadline - time.monotonic()))
            if "id" in message:
                self.responses[message["id"]] = message
            else:
                self.notifications.append(message)
        return self.responses.pop(id)

    def call(self, method: str, params: Any = None, timeout: float | None = None) -> dict[str, Any]:
        """Send a request and return its whole response object."""
        return self.response(self.request(method, params), timeout)

    def notification(self, method: str, timeout: float) -> dict[str, Any]:
        """Wait for a notification named ``method``."""
        deadline = time.monotonic() + timeout
        while True:
            for i, message in enumerate(self.notifications):
                if message.get("method") == method:
                    return self.notifications.pop(i)
            message = self.recv(max(0.0, deadline - time.monotonic()))
            if "id" in message:
                self.responses[message["id"]] = message
            else:
                self.notifications.append(message)


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

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> Daemon:
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
        """Stop the daemon and remove its temp dir (unless ``keep``)."""
        self.stop()
        if self._own_dir and not keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""

    def connect(self, timeout: float = 10.0) -> LineClient:
        return LineClient(self.socket_path, timeout)

    @contextlib.contextmanager
    def client(self, timeout: float = 10.0) -> Iterator[LineClient]:
        with self.connect(timeout) as client:
            yield client

    def __enter__(self) -> Daemon:
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

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> Daemon:
        from anyio.from_thread import start_blocking_portal

        from .daemon_log import set_level
        from .server import serve
        from .server.daemon_config import load_daemon_config

        config, _, _ = load_daemon_config(self.config_path, environ={})
        self._handler = logging.FileHandler(self.log_path, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("scoutd")
        logger.addHandler(self._handler)
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
            logging.getLogger("scoutd").removeHandler(self._handler)
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
