"""The daemon's lifecycle: startup, main loop, shutdown (docs/OPERATIONS.md).

:class:`Server` holds the daemon's state (the configuration generation, the
session registry, the watcher, the counters) and runs it: :meth:`Server.serve`
starts the background tasks and the accept loop, waits for a stop, drains the
requests in flight and closes everything. :func:`run` is ``scoutd serve``:
configuration, listening socket, then the event loop. :func:`serve` runs a
whole daemon inside an existing event loop (tests, embedding).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from .. import protocol
from .._version import __version__
from ..config import Config
from ..config_watch import ConfigFileWatch
from ..daemon_log import configure_logging, set_level
from ..errors import ConfigError
from ..protocol.messages import ERROR_NAMES
from ..security import resolve_roots
from ..systemd import Notifier, under_journald, watchdog_interval
from ..watcher import FsWatcher
from . import handlers
from .connection import serve_client
from .daemon_config import (
    Snapshot,
    check_not_partial,
    load_daemon_config,
    restart_changes,
    warn_missing_roots,
)
from .listener import Listener, StartupError, bind_listener, open_listener
from .metrics import Gauges, Metrics
from .sessions import SessionRegistry, parse_signal
from .stack import ensure_stack
from .state import Shared

if TYPE_CHECKING:
    from ..fleet.agent import FleetAgent
    from .connection import PeerConnection

__all__ = ["Server", "run", "serve"]

log = logging.getLogger("scoutd.server")

# accept() errors that mean "overloaded right now", not "broken": log, pause, retry.
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# accept() errors about one failed incoming connection: skip it.
ACCEPT_SKIP_ERRNOS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR})
ACCEPT_RETRY_DELAY = 0.1  # seconds; long enough for a finishing request to free an fd
RELOAD_DEBOUNCE = 0.1  # seconds of quiet after a config file event before reloading
IDLE_SWEEP_MAX = 60.0  # seconds between looks for idle sessions, at most


class Server:
    """The daemon's state and its tasks; :meth:`serve` runs until :meth:`stop`.

    Construct it inside the running event loop (it creates anyio primitives).
    ``handle_signals`` False leaves SIGTERM/SIGINT/SIGHUP to the embedding
    program (an in-process server must not take a test runner's signals).
    """

    def __init__(
        self,
        config: Config,
        listener: Listener,
        *,
        config_arg: str | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.listener = listener
        self.config_arg = config_arg if config_arg is not None else config.path
        self.config_file = os.path.abspath(self.config_arg) if self.config_arg else None
        self.own_uid = os.getuid()
        self.limiter = anyio.CapacityLimiter(max(4, os.cpu_count() or 1))
        first = Snapshot(
            config=config,
            generation=1,
            roots=resolve_roots(config.daemon.allowed_roots),
            abort_signal=parse_signal(config.daemon.abort_signal),
        )
        # the generation, bounds and counts the connections share (not this object)
        self.shared = Shared(
            first, Metrics(protocol.METHOD_PARAMS), self.own_uid, int(self.limiter.total_tokens)
        )
        self.metrics = self.shared.metrics
        self.quotas = self.shared.quotas
        self.started_with = config  # its restart-only [daemon] keys and [fleet] are in use
        self.handle_signals = handle_signals
        self.last_reload_error: str | None = None
        self.started = time.monotonic()
        self.notifier = Notifier()
        self.watcher = FsWatcher(config.daemon.watch_mode)
        # a session's bytes are released where its conversation is dropped, nowhere else
        self.registry = SessionRegistry(
            self.watcher,
            self.shared.current,
            released=self.quotas.release_session,
        )
        self.config_watch = ConfigFileWatch(self.watcher, self.config_file)
        self.fleet: FleetAgent | None = None  # with a [fleet] table (docs/OPERATIONS.md)
        self.abandoned = False
        self._dispatch = self._dispatch_admitted
        self._stop = anyio.Event()
        self._config_event = anyio.Event()
        self._reload_lock = anyio.Lock()
        self._drain_scope = anyio.CancelScope()

    @property
    def snapshot(self) -> Snapshot:
        """The configuration generation now (swapped whole by :meth:`reload`)."""
        return self.shared.snapshot

    def stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._stop.set()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until :meth:`stop` (or SIGTERM/SIGINT), then shut down gracefully.

        Resource handling: the listening socket is closed here; the socket file
        is removed by whoever bound it (:func:`run`, :func:`serve`).
        """
        async with self.watcher, anyio.create_task_group() as background:
            await self._startup(background)
            async with anyio.create_task_group() as connections:
                accept_scope = anyio.CancelScope()
                connections.start_soon(self._accept_loop, connections, accept_scope)
                where = self.listener.path or "the socket passed by systemd"
                log.info("scoutd %s serving on %s", __version__, where)
                self.notifier.ready(f"serving on {where}")
                task_status.started()
                await self._stop.wait()
                accept_scope.cancel()
                await self._drain()
                connections.cancel_scope.cancel()
            self.listener.sock.close()
            background.cancel_scope.cancel()

    async def _startup(self, background: anyio.abc.TaskGroup) -> None:
        """Start the registry, the watcher's consumers and the housekeeping loops."""
        await background.start(self.registry.run)
        background.start_soon(self._watch_loop)
        background.start_soon(self._config_reload_loop)
        if self.handle_signals:
            background.start_soon(self._signal_loop)
        background.start_soon(self._idle_session_loop)
        await self.config_watch.start()
        fleet = self.snapshot.config.fleet
        if fleet is not None:  # its pending commands are applied before the first accept
            from ..fleet.agent import FleetAgent

            sessions, roots = self.registry.sessions.values, lambda: self.snapshot.roots
            self.fleet = FleetAgent(fleet, sessions, roots, version=__version__)
            await background.start(self.fleet.run)
        interval = watchdog_interval()
        if interval is not None:
            background.start_soon(self._watchdog_loop, interval)

    async def _drain(self) -> None:
        """Refuse new requests; wait up to ``shutdown_timeout`` for those in flight."""
        shared = self.shared
        log.info("shutting down (%d request(s) in flight)", shared.in_flight)
        self.notifier.stopping()
        shared.shutting_down = True
        if not shared.in_flight:
            return
        timeout = self.snapshot.config.daemon.shutdown_timeout
        with self._drain_scope:
            self._drain_scope.deadline = anyio.current_time() + timeout
            await shared.drained.wait()
        if shared.in_flight:
            self.abandoned = True
            log.warning(
                "%d request(s) still running after %gs: abandoned", shared.in_flight, timeout
            )

    async def _signal_loop(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    log.info("SIGHUP: reloading the configuration")
                    await self._reload_logged()
                elif self._stop.is_set():
                    log.warning(
                        "second %s: not waiting for requests in flight", signal.Signals(signum).name
                    )
                    self._drain_scope.cancel()
                else:
                    log.info("%s: graceful shutdown", signal.Signals(signum).name)
                    self.stop()

    async def _idle_session_loop(self) -> None:
        while True:
            snap = self.snapshot  # a reload wakes it: a shorter timeout applies at once
            await snap.sleep(min(snap.config.daemon.session_idle_timeout / 4, IDLE_SWEEP_MAX))
            timeout = self.snapshot.config.daemon.session_idle_timeout
            self.registry.forget_idle(timeout)  # releases what it drops (never a round's)

    async def _watchdog_loop(self, interval: float) -> None:
        while True:
            self.notifier.watchdog()
            await anyio.sleep(interval)

    async def _accept_loop(self, tg: anyio.abc.TaskGroup, scope: anyio.CancelScope) -> None:
        """Accept until cancelled; fd exhaustion pauses and retries, never ends it."""
        sock = self.listener.sock
        last_logged = 0.0
        with scope:
            while True:
                await anyio.wait_readable(sock)
                try:
                    client, _ = sock.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:
                    if exc.errno in ACCEPT_SKIP_ERRNOS:
                        continue
                    if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                        raise
                    now = time.monotonic()
                    if now - last_logged > 5:  # at most one line per 5 s under pressure
                        log.error("accept failed (%s); retrying", exc.strerror)
                        last_logged = now
                    await anyio.sleep(ACCEPT_RETRY_DELAY)
                    continue
                tg.start_soon(serve_client, self.shared, self.registry, self._dispatch, client)

    async def _watch_loop(self) -> None:
        while True:
            batch = await self.watcher.next_batch()
            try:
                if await self.config_watch.concerns(batch):
                    self._config_event.set()
                await self.registry.handle_batch(batch)
            except Exception:
                log.exception("handling file events failed")

    async def _config_reload_loop(self) -> None:
        while True:
            await self._config_event.wait()
            while True:  # debounce: reload once the writes have settled
                self._config_event = anyio.Event()
                await anyio.sleep(RELOAD_DEBOUNCE)
                if not self._config_event.is_set():
                    break
            log.info("configuration file changed: reloading")
            await self._reload_logged()

    async def _reload_logged(self) -> None:
        """Reload for a file change or SIGHUP: a failure is logged, never raised, and the
        last good configuration stays. None while stopping: the daemon told systemd so."""
        if self._stop.is_set():
            log.info("shutting down: the reload is skipped")
            return
        try:
            await self.reload()
        except ConfigError:
            pass  # logged by reload()
        except Exception:  # a defect: never the end of the daemon, nor of its reloads
            log.exception("reload failed, keeping generation %d", self.snapshot.generation)

    async def reload(self) -> int:
        """Re-read the configuration; swap it in if valid, else keep the old one.

        Raises:
            ConfigError: the new configuration is invalid (also remembered in
                ``last_reload_error`` and logged).
        """
        async with self._reload_lock:
            self.notifier.reloading()
            failed = None  # what systemd shows while the last reload has failed
            try:
                config, roots, signum = await anyio.to_thread.run_sync(
                    load_daemon_config, self.config_arg
                )
                check_not_partial(self.snapshot.config, config)
            except ConfigError as exc:
                # once per error: an editor's burst of writes, or a file left broken
                # while it is fixed, must not fill the log with the same line
                again = str(exc) == self.last_reload_error
                self.last_reload_error = str(exc)
                log.log(
                    logging.DEBUG if again else logging.ERROR,
                    "reload failed, keeping generation %d: %s",
                    self.snapshot.generation,
                    exc,
                )
                failed = f"reload failed, keeping generation {self.snapshot.generation}: {exc}"
                raise
            finally:
                self.notifier.ready(trouble=failed)
            # Said once, at the reload that brings it: a file read again (a watched write
            # and a config.reload at once) holds no news.
            previous = self.snapshot.config
            for key in restart_changes(self.started_with.daemon, config.daemon):
                if getattr(previous.daemon, key) != getattr(config.daemon, key):
                    log.warning("[daemon] %s changed: takes effect after a restart", key)
            if config.fleet not in (self.started_with.fleet, previous.fleet):
                log.warning("[fleet] changed: takes effect after a restart")
            warn_missing_roots(config)
            running = self.snapshot
            self.shared.snapshot = Snapshot(
                config=config,
                generation=running.generation + 1,
                roots=roots,
                abort_signal=signum,
            )
            running.superseded.set()  # the loops paced by its durations read the new ones
            self.quotas.reloaded()  # and the prepares waiting for a slot, its bound
            for waiting in list(self.shared.waits):
                waiting.cancel()
            self.last_reload_error = None
            set_level(config.daemon.log_level)
            log.info("configuration reloaded (generation %d)", self.snapshot.generation)
            await self._close_refused_sessions()
            return self.snapshot.generation

    async def _close_refused_sessions(self) -> None:
        """Close the sessions the generation in force refuses (peer or chat): nothing a
        reload took away works on through them; their watches and memory go at once."""
        snap = self.snapshot
        for session in list(self.registry.sessions.values()):
            why = snap.refusal(session.owner.peer, self.own_uid, session.resolved)
            if why is not None and await self.registry.close(session.id):
                log.warning("session %s closed by the reload: %s", session.id, why)

    async def _dispatch_admitted(
        self, conn: PeerConnection, line: bytes, late: bool
    ) -> bytes | None:
        """Answer a request line while its peer is let in. A reload may have removed the
        rule that admitted the connection: then the request gets the refusal a new
        connection gets (an error line without id) and the connection ends, with its sessions."""
        why = self.snapshot.refusal(conn.peer, self.own_uid)
        if why is None:
            return await handlers.dispatch(self, conn, line, late)
        log.warning("closing a connection of pid %d: %s", conn.peer.pid, why)
        self.metrics.count_error(protocol.FORBIDDEN)
        refusal = protocol.ForbiddenData(reason=why)
        await conn.send(
            protocol.encode_error(None, protocol.FORBIDDEN, f"forbidden: {why}", refusal)
        )
        conn.close()
        return None

    # --- requests and reports --------------------------------------------------------

    def status(self) -> protocol.StatusResult:
        snap = self.snapshot
        count, p50, p99, worst = self.metrics.latency()
        return protocol.StatusResult(
            version=__version__,
            uptime=round(time.monotonic() - self.started, 3),
            config=protocol.ConfigStatus(
                path=snap.config.path,
                generation=snap.generation,
                last_reload_error=self.last_reload_error,
            ),
            counts=protocol.Counts(
                connections=self.metrics.connections,
                sessions=len(self.registry.sessions),
                watches=len(self.registry.by_inbox),
                requests=self.metrics.requests,
                errors=self.metrics.errors,
                notices_delivered=self.metrics.notices_delivered,
                aborts=self.registry.aborts,
                pending_request_bytes=self.shared.pending_request_bytes,
                rescans=self.registry.rescans,
                queued_response_bytes=self.quotas.queued,
                session_bytes=self.quotas.held,
            ),
            latency=protocol.Latency(count=count, p50_ms=p50, p99_ms=p99, max_ms=worst),
            daemon=protocol.DaemonIdentity(
                uid=self.own_uid,
                gid=os.getgid(),
                groups=sorted(set(os.getgroups()) - {os.getgid()}),
                allowed_roots=list(snap.roots),
            ),
            fleet=None if self.fleet is None else self.fleet.status(),
        )

    def metrics_text(self) -> str:
        """The Prometheus text exposition of the counters and gauges."""
        gauges = Gauges(
            uptime=round(time.monotonic() - self.started, 3),
            connections=self.metrics.connections,
            sessions=len(self.registry.sessions),
            watches=len(self.registry.by_inbox),
            pending_request_bytes=self.shared.pending_request_bytes,
            config_generation=self.snapshot.generation,
            version=__version__,
            aborts=self.registry.aborts,
        )
        text = self.metrics.render(gauges, ERROR_NAMES)
        if self.fleet is not None:
            from ..fleet.metrics import metrics_text

            text += metrics_text(self.fleet.status())
        return text


async def serve(
    config: Config,
    *,
    socket_path: str | None = None,
    config_arg: str | None = None,
    task_status: anyio.abc.TaskStatus[Server] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run a whole daemon inside the current event loop until its :meth:`Server.stop`.

    For tests and programs that embed the daemon: ``server = await
    tg.start(serve, config)`` returns once it answers on ``socket_path``
    (default: the config's). Signals are left to the caller; the socket file is
    removed on return. Raises :class:`StartupError` when it cannot be bound.
    """
    daemon = config.daemon
    listener = open_listener(
        socket_path or daemon.socket_path, daemon.socket_mode, daemon.socket_group
    )
    try:
        server = Server(config, listener, config_arg=config_arg, handle_signals=False)
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(server.serve)
                task_status.started(server)
        finally:
            server.notifier.close()
    finally:
        listener.close()


def run(config_path: str | None = None, socket_path: str | None = None) -> int:
    """``scoutd serve``: run the daemon until SIGTERM/SIGINT; return the exit code.

    ``socket_path`` overrides ``[daemon] socket_path``; under systemd socket
    activation the passed socket is used instead of either. A startup failure
    (invalid configuration, a live daemon on the socket, a missing directory)
    prints one line to stderr and returns 1.
    """
    try:
        config, _, _ = load_daemon_config(config_path, settle=True)
    except ConfigError as exc:
        print(f"scoutd: {exc}", file=sys.stderr)
        return 1
    configure_logging(config.daemon.log_level, journal=under_journald())
    warn_missing_roots(config)
    short = ensure_stack()
    if short is not None:
        log.warning("%s", short)
    try:
        listener = bind_listener(config, socket_path)
    except StartupError as exc:
        print(f"scoutd: {exc}", file=sys.stderr)
        return 1
    servers: list[Server] = []

    async def main_loop() -> None:
        # anyio primitives need a running event loop: build the server inside it.
        servers.append(Server(config, listener, config_arg=config_path))
        await servers[0].serve()

    try:
        anyio.run(main_loop, backend="asyncio")
    except KeyboardInterrupt:
        pass
    finally:
        listener.close()
        for server in servers:
            server.notifier.close()
    log.info("stopped")
    if any(server.abandoned for server in servers):
        # Worker threads cannot be cancelled and would hold the interpreter open.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
