"""``scoutd serve``: the daemon (docs/PROTOCOL.md, docs/OPERATIONS.md).

Layout: :func:`run` resolves the configuration, binds (or receives from
systemd) the listening socket and runs :meth:`Server.serve` on anyio's asyncio
backend. The server owns the accept loop, one task per connection, one task
per request, the inbox watcher and session registry, hot reload and the
systemd notifications. The wire format lives in :mod:`scoutd.protocol`, the
checks in :mod:`scoutd.security`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import grp
import logging
import os
import signal
import socket
import stat
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import msgspec

from . import protocol
from ._version import __version__
from .config import Config, resolve_config, with_overrides
from .config_watch import ConfigFileWatch
from .daemon_log import configure_logging, set_level
from .errors import Aborted, ConfigError, UnknownStrategy
from .formats import FormatError
from .incremental import SessionPrompt, json_size
from .prepare import Prepared, prepare
from .security import (
    Forbidden,
    PeerCred,
    check_access,
    check_peer,
    check_save_file,
    peer_credentials,
    resolve_roots,
)
from .sessions import Session, SessionRegistry, parse_signal
from .strategies.inbox import inbox_dir
from .systemd import ActivationError, Notifier, listen_socket, under_journald, watchdog_interval
from .watcher import FsWatcher

__all__ = [
    "Listener",
    "Server",
    "StartupError",
    "load_daemon_config",
    "main",
    "open_listener",
    "run",
]

log = logging.getLogger("scoutd.server")

# accept() errors that mean "overloaded right now", not "broken": log, pause, retry.
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# accept() errors about one failed incoming connection: skip it.
ACCEPT_SKIP_ERRNOS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR})
ACCEPT_RETRY_DELAY = 0.1  # seconds; long enough for a finishing request to free an fd
MAX_IN_FLIGHT = 64  # requests per connection; reading pauses beyond (back-pressure)
# Requests of one connection computing their answers at once: with the queued-answer
# bound, what a connection that never reads can make the daemon hold is at most
# max_queued_response_bytes plus this many answers.
MAX_PRODUCING = 4
RECEIVE_SIZE = 256 * 1024
# Lines above this are decoded in a worker thread: msgspec is fast, but 64 MiB of JSON
# still takes tens of milliseconds that other clients must not wait for.
THREAD_DECODE_BYTES = 256 * 1024
LATENCY_WINDOW = 4096  # recent requests behind p50/p99 in `status`
RELOAD_DEBOUNCE = 0.1  # seconds of quiet after a config file event before reloading
SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
IDLE_SWEEP_MAX = 60.0  # seconds between looks for idle sessions, at most
RESTART_KEYS = ("socket_path", "socket_mode", "socket_group", "watch_mode")
# Keys that decide who may do what: a reload in which one of them, set by the
# running file, falls back to its default is taken for a partly written file.
ACCESS_KEYS = ("allowed_roots", "allowed_uids", "allowed_gids", "max_connections_per_uid")


class StartupError(Exception):
    """The daemon cannot start; the message is the one line shown to the operator."""


@dataclass(slots=True)
class Listener:
    """The listening socket, and its file identity if this process created it."""

    sock: socket.socket
    path: str | None
    created: tuple[int, int] | None  # (st_dev, st_ino) of the file we bound; None: not ours

    def remove_file(self) -> None:
        """Unlink the socket file, only if it is still the one this process created."""
        if self.path is None or self.created is None:
            return
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self.created:
                os.unlink(self.path)
        except OSError:
            pass


def _probe_existing(path: str) -> None:
    """Remove a stale socket file, refuse a live one or anything that is not a socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise StartupError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        log.info("replacing stale socket %s", path)
        os.unlink(path)
        return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StartupError(f"cannot check the existing socket {path}: {exc}") from None
    finally:
        probe.close()
    raise StartupError(f"another scoutd is already serving on {path}; not starting")


def open_listener(path: str, mode: int, group: str | None, backlog: int = 128) -> Listener:
    """Bind and listen on ``path`` with file mode ``mode`` and group ``group``.

    Raises:
        StartupError: the directory is missing, the path is too long, a live
            daemon owns the socket, or binding/chmod/chown failed.
    """
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise StartupError(f"socket path is longer than {SUN_PATH_MAX} bytes: {path}")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise StartupError(f"socket directory {directory} does not exist")
    gid = -1
    if group:
        try:
            gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        except KeyError:
            raise StartupError(f"socket_group {group!r} does not exist") from None
    _probe_existing(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # Bind under a restrictive umask so the file is never wider than wanted, even
        # for the instant before chmod; then set the exact mode.
        old_umask = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old_umask)
        st = os.lstat(path)
        listener = Listener(sock=sock, path=path, created=(st.st_dev, st.st_ino))
        try:
            os.chmod(path, mode)
            if gid >= 0:
                os.chown(path, -1, gid)
            sock.listen(backlog)
        except OSError:
            listener.remove_file()
            raise
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return listener


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One configuration generation and what is derived from it."""

    config: Config
    generation: int
    roots: tuple[str, ...]
    abort_signal: signal.Signals | None


class Stats:
    """Counters and the latency window behind ``status``."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.connections = 0
        self.requests = 0
        self.errors = 0
        self.notices_delivered = 0
        self.latency_count = 0
        self.latency_max = 0.0
        self.recent: deque[float] = deque(maxlen=LATENCY_WINDOW)

    def record(self, seconds: float) -> None:
        ms = seconds * 1000
        self.latency_count += 1
        self.latency_max = max(self.latency_max, ms)
        self.recent.append(ms)

    def latency(self) -> protocol.Latency:
        ordered = sorted(self.recent)

        def pick(q: float) -> float:
            if not ordered:
                return 0.0
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

        return protocol.Latency(
            count=self.latency_count,
            p50_ms=pick(0.50),
            p99_ms=pick(0.99),
            max_ms=round(self.latency_max, 3),
        )


class Connection:
    """One client connection: a reader loop, a task per request, a write lock.

    Resource handling: :meth:`serve` owns the stream and closes it on return,
    together with the sessions the connection opened. Error handling: a
    broken peer ends the connection quietly; a send blocked for longer than
    ``idle_timeout`` (a client that stopped reading) closes it.
    """

    def __init__(self, server: Server, stream: anyio.abc.SocketStream, peer: PeerCred) -> None:
        self.server = server
        self.stream = stream
        self.peer = peer
        self.closed = False
        self.last_activity = time.monotonic()
        self.in_flight = 0
        self.queued = 0  # bytes of answers produced and not yet written to the socket
        self._send_lock = anyio.Lock()
        self._slots = anyio.Semaphore(MAX_IN_FLIGHT)
        self._producing = anyio.Semaphore(MAX_PRODUCING)
        self._drained = anyio.Event()  # set when `queued` falls below the bound
        self._tg: anyio.abc.TaskGroup | None = None

    def push(self, line: bytes) -> None:
        """Queue a notification for this connection (never waits)."""
        if self._tg is not None and not self.closed:
            self._tg.start_soon(self.send, line)

    async def send(self, line: bytes) -> None:
        if self.closed:
            return
        self.queued += len(line)
        try:
            async with self._send_lock:
                with anyio.fail_after(self.server.snapshot.config.daemon.idle_timeout):
                    await self.stream.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, TimeoutError):
            self.close()
        finally:
            self.queued -= len(line)
            if not self._full():
                self._drained.set()

    def _full(self) -> bool:
        return self.queued >= self.server.snapshot.config.daemon.max_queued_response_bytes

    async def _room(self) -> None:
        """Wait while this connection's unread answers fill its bound (back-pressure)."""
        while self._full() and not self.closed:
            if self._drained.is_set():  # waiters share one event until it is set
                self._drained = anyio.Event()
            await self._drained.wait()

    def close(self) -> None:
        """Stop this connection: cancels its reader and request tasks."""
        self.closed = True
        self._drained.set()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    async def serve(self) -> None:
        reader = protocol.LineReader(self.server.snapshot.config.daemon.max_request_bytes)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._read_loop(tg, reader)
                # EOF: requests already received still get their answers.
        finally:
            self._tg = None
            self.closed = True
            self._drained.set()
            self.server.pending_request_bytes -= reader.pending
            with anyio.CancelScope(shield=True):
                await self.server.registry.close_owner(self)
                await self.stream.aclose()

    async def _read_loop(self, tg: anyio.abc.TaskGroup, reader: protocol.LineReader) -> None:
        server = self.server
        while True:
            await self._room()
            daemon = self.server.snapshot.config.daemon
            reader.limit = daemon.max_request_bytes
            now = time.monotonic()
            if reader.started is not None:
                timeout = reader.started + daemon.read_timeout - now
                if timeout <= 0:
                    await self._read_timeout(daemon.read_timeout)
                    return
            else:
                timeout = self.last_activity + daemon.idle_timeout - now
                if timeout <= 0:
                    # Open sessions do not keep a silent connection: only requests do.
                    if self.in_flight:
                        self.last_activity = now
                        continue
                    log.debug("closing idle connection of pid %d", self.peer.pid)
                    return
            data = b""
            with anyio.move_on_after(timeout):
                try:
                    data = await self.stream.receive(RECEIVE_SIZE)
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    return
            if not data:
                continue  # a timeout: the checks at the top of the loop decide
            self.last_activity = time.monotonic()
            before = reader.pending
            lines = reader.feed(data, self.last_activity)
            server.pending_request_bytes += reader.pending - before
            if server.pending_request_bytes > daemon.max_pending_request_bytes:
                await self._too_much_pending(daemon.max_pending_request_bytes)
                return
            for line in lines:
                if line is None:
                    self.server.stats.errors += 1
                    limit = reader.limit
                    tg.start_soon(
                        self.send,
                        protocol.encode_error(
                            None,
                            protocol.TOO_LARGE,
                            f"request line longer than max_request_bytes ({limit})",
                            protocol.TooLargeData(limit=limit),
                        ),
                    )
                    continue
                await self._slots.acquire()
                self.in_flight += 1
                server.pending_request_bytes += len(line)
                tg.start_soon(self._handle, line)

    async def _read_timeout(self, seconds: float) -> None:
        self.server.stats.errors += 1
        await self.send(
            protocol.encode_error(
                None,
                protocol.INVALID_REQUEST,
                f"read timeout: request line not completed within {seconds:g} s; closing",
            )
        )

    async def _too_much_pending(self, limit: int) -> None:
        self.server.stats.errors += 1
        log.warning("closing a connection of pid %d: unfinished requests too large", self.peer.pid)
        await self.send(
            protocol.encode_error(
                None,
                protocol.TOO_LARGE,
                f"too large: requests not yet complete on all connections exceed "
                f"max_pending_request_bytes ({limit}); closing",
                protocol.TooLargeData(limit=limit),
            )
        )

    async def _handle(self, line: bytes) -> None:
        server = self.server
        server.in_flight += 1
        response: bytes | None = None
        held = len(line)  # counted in pending_request_bytes until decoded and answered
        try:
            async with self._producing:
                await self._room()
                try:
                    response = await server.dispatch(self, line)
                finally:
                    server.pending_request_bytes -= held
                    held = 0
                    del line
            if response is not None:
                await self.send(response)
        except Exception:
            # Last resort: whatever went wrong ends this request, never the daemon.
            log.error(
                "request of pid %d failed unexpectedly; closing its connection", self.peer.pid
            )
            server.stats.errors += 1
            self.close()
        finally:
            server.pending_request_bytes -= held  # cancelled before its turn
            server.in_flight -= 1
            if server.shutting_down and not server.in_flight:
                server.drained.set()
            self.in_flight -= 1
            self.last_activity = time.monotonic()
            self._slots.release()


class Server:
    """The daemon's state and its tasks; :meth:`serve` runs until :meth:`stop`.

    Construct it inside the running event loop (it creates anyio primitives).
    """

    def __init__(
        self, config: Config, listener: Listener, *, config_arg: str | None = None
    ) -> None:
        self.listener = listener
        self.config_arg = config_arg if config_arg is not None else config.path
        self.config_file = os.path.abspath(self.config_arg) if self.config_arg else None
        self.snapshot = Snapshot(
            config=config,
            generation=1,
            roots=resolve_roots(config.daemon.allowed_roots),
            abort_signal=parse_signal(config.daemon.abort_signal),
        )
        self.last_reload_error: str | None = None
        self.stats = Stats()
        self.own_uid = os.getuid()
        self.notifier = Notifier()
        self.limiter = anyio.CapacityLimiter(max(4, os.cpu_count() or 1))
        self.watcher = FsWatcher(config.daemon.watch_mode)
        self.registry = SessionRegistry(
            self.watcher,
            inbox_max_bytes=lambda: self.snapshot.config.prompt.inbox_max_bytes,
            abort_signal=lambda: self.snapshot.abort_signal,
            limiter=self.limiter,
            max_sessions_per_uid=lambda: self.snapshot.config.daemon.max_sessions_per_uid,
        )
        self.config_watch = ConfigFileWatch(self.watcher, self.config_file)
        self.shutting_down = False
        self.abandoned = False
        self.in_flight = 0  # requests being handled or answered, on all connections
        self.pending_request_bytes = 0  # unfinished or undecoded request lines, all connections
        self.connections_by_uid: dict[int, int] = {}
        self._stop = anyio.Event()
        self.drained = anyio.Event()
        self._config_event = anyio.Event()
        self._reload_lock = anyio.Lock()
        self._drain_scope = anyio.CancelScope()

    # --- lifecycle -------------------------------------------------------------------

    def stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._stop.set()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until :meth:`stop` (or SIGTERM/SIGINT), then shut down gracefully.

        Resource handling: the listening socket is closed here; the socket file
        is removed by :func:`run` (only if this process created it).
        Error handling: the accept loop survives fd exhaustion (EMFILE, ENFILE,
        ENOBUFS, ENOMEM) by pausing :data:`ACCEPT_RETRY_DELAY` and retrying.
        """
        async with self.watcher, anyio.create_task_group() as tg:
            await tg.start(self.registry.run, lambda: self.snapshot.config.daemon.rescan_interval)
            tg.start_soon(self._watch_loop)
            tg.start_soon(self._config_reload_loop)
            tg.start_soon(self._signal_loop)
            tg.start_soon(self._idle_session_loop)
            await self.config_watch.start()
            interval = watchdog_interval()
            if interval is not None:
                tg.start_soon(self._watchdog_loop, interval)
            async with anyio.create_task_group() as connections:
                accept_scope = anyio.CancelScope()
                connections.start_soon(self._accept_loop, connections, accept_scope)
                where = self.listener.path or "the socket passed by systemd"
                log.info("scoutd %s serving on %s", __version__, where)
                self.notifier.ready(f"serving on {where}")
                task_status.started()
                await self._stop.wait()
                log.info("shutting down (%d request(s) in flight)", self.in_flight)
                self.notifier.stopping()
                accept_scope.cancel()
                self.shutting_down = True
                if self.in_flight:
                    timeout = self.snapshot.config.daemon.shutdown_timeout
                    with self._drain_scope:
                        self._drain_scope.deadline = anyio.current_time() + timeout
                        await self.drained.wait()
                    if self.in_flight:
                        self.abandoned = True
                        log.warning(
                            "%d request(s) still running after %gs: abandoned",
                            self.in_flight,
                            timeout,
                        )
                connections.cancel_scope.cancel()
            self.listener.sock.close()
            tg.cancel_scope.cancel()

    async def _signal_loop(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    log.info("SIGHUP: reloading the configuration")
                    with contextlib.suppress(ConfigError):
                        await self.reload()
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
            timeout = self.snapshot.config.daemon.session_idle_timeout
            await anyio.sleep(min(timeout / 4, IDLE_SWEEP_MAX))
            self.registry.forget_idle(timeout)

    async def _watchdog_loop(self, interval: float) -> None:
        while True:
            self.notifier.watchdog()
            await anyio.sleep(interval)

    async def _accept_loop(self, tg: anyio.abc.TaskGroup, scope: anyio.CancelScope) -> None:
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
                tg.start_soon(self._serve_client, client)

    async def _serve_client(self, client: socket.socket) -> None:
        daemon = self.snapshot.config.daemon
        try:
            client.setblocking(False)
            peer = peer_credentials(client)
        except OSError:
            client.close()
            return
        refusal: bytes | None = None
        if self.stats.connections >= daemon.max_connections:
            refusal = protocol.encode_error(
                None,
                protocol.TOO_LARGE,
                f"too many connections (max_connections = {daemon.max_connections})",
                protocol.TooLargeData(limit=daemon.max_connections),
            )
        elif self.connections_by_uid.get(peer.uid, 0) >= daemon.max_connections_per_uid:
            limit = daemon.max_connections_per_uid
            refusal = protocol.encode_error(
                None,
                protocol.TOO_LARGE,
                f"too many connections of uid {peer.uid} (max_connections_per_uid = {limit})",
                protocol.TooLargeData(limit=limit),
            )
        else:
            try:
                check_peer(peer, daemon, self.own_uid)
            except Forbidden as exc:
                log.warning("refused connection: %s", exc)
                refusal = protocol.encode_error(
                    None,
                    protocol.FORBIDDEN,
                    f"forbidden: {exc}",
                    protocol.ForbiddenData(reason=str(exc)),
                )
        if refusal is not None:
            self.stats.errors += 1
            try:
                client.send(refusal)
                client.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            client.close()
            return
        stream = await anyio.abc.UNIXSocketStream.from_socket(client)
        self.stats.connections += 1
        by_uid = self.connections_by_uid
        by_uid[peer.uid] = by_uid.get(peer.uid, 0) + 1
        try:
            await Connection(self, stream, peer).serve()
        except Exception as exc:
            # Last resort: one connection's failure never ends the daemon.
            log.error(
                "connection of pid %d ended by an unexpected %s", peer.pid, type(exc).__name__
            )
        finally:
            self.stats.connections -= 1
            by_uid[peer.uid] -= 1
            if not by_uid[peer.uid]:
                del by_uid[peer.uid]

    # --- file events and reload ------------------------------------------------------

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
            with contextlib.suppress(ConfigError):
                await self.reload()

    async def reload(self) -> int:
        """Re-read the configuration; swap it in if valid, else keep the old one.

        Raises:
            ConfigError: the new configuration is invalid (also remembered in
                ``last_reload_error`` and logged).
        """
        async with self._reload_lock:
            self.notifier.reloading()
            try:
                config, roots, signum = await anyio.to_thread.run_sync(
                    load_daemon_config, self.config_arg
                )
                _check_not_partial(self.snapshot.config, config)
            except ConfigError as exc:
                self.last_reload_error = str(exc)
                log.error("reload failed, keeping generation %d: %s", self.snapshot.generation, exc)
                raise
            finally:
                self.notifier.ready()
            old = self.snapshot
            for key in RESTART_KEYS:
                if getattr(old.config.daemon, key) != getattr(config.daemon, key):
                    log.warning("[daemon] %s changed: takes effect after a restart", key)
            self.snapshot = Snapshot(
                config=config, generation=old.generation + 1, roots=roots, abort_signal=signum
            )
            self.last_reload_error = None
            set_level(config.daemon.log_level)
            log.info("configuration reloaded (generation %d)", self.snapshot.generation)
            return self.snapshot.generation

    # --- requests --------------------------------------------------------------------

    async def dispatch(self, conn: Connection, line: bytes) -> bytes | None:
        """Answer one request line (None for a client notification)."""
        started = time.perf_counter()
        self.stats.requests += 1
        request: protocol.Request | None = None
        try:
            if len(line) > THREAD_DECODE_BYTES:
                decoded, params = await anyio.to_thread.run_sync(
                    _decode_large, line, limiter=self.limiter
                )
            else:
                decoded, params = protocol.decode_request(line), None
            request = decoded
            if self.shutting_down:
                raise protocol.ProtocolError(
                    protocol.SHUTTING_DOWN, "the daemon is shutting down", id=decoded.id
                )
            response = await self._call(conn, decoded, self.snapshot, params)
        except protocol.ProtocolError as exc:
            self.stats.errors += 1
            response = protocol.encode_error(exc.id, exc.code, exc.message, exc.data)
        except RecursionError:
            # msgspec stops at the interpreter's recursion limit: JSON nested a few
            # thousand levels deep is refused like other bad input, not as a bug.
            self.stats.errors += 1
            log.debug("refused a request nested too deeply (pid %d)", conn.peer.pid)
            response = _too_deep(request)
        except Exception:
            log.exception("internal error")
            self.stats.errors += 1
            rid = request.id if request is not None else None
            response = protocol.encode_error(rid, protocol.INTERNAL_ERROR, "internal error")
        self.stats.record(time.perf_counter() - started)
        if request is not None and request.notification:
            return None
        return response

    async def _call(
        self,
        conn: Connection,
        request: protocol.Request,
        snap: Snapshot,
        params: msgspec.Struct | None = None,
    ) -> bytes:
        kind = protocol.METHOD_PARAMS.get(request.method)
        if kind is None:
            raise protocol.ProtocolError(
                protocol.METHOD_NOT_FOUND, f"method not found: {request.method!r}", id=request.id
            )
        if params is None:  # else it came decoded with the envelope
            if request.params is not None and len(request.params) > THREAD_DECODE_BYTES:
                params = await anyio.to_thread.run_sync(
                    protocol.decode_params, request, kind, limiter=self.limiter
                )
            else:
                params = protocol.decode_params(request, kind)
        if isinstance(params, protocol.PreparePromptParams):
            return await self._prepare_prompt(conn, request.id, params, snap)
        if isinstance(params, protocol.SessionOpenParams):
            resolved = await self._check_path(params.save_file, snap, request.id, conn.peer)
            session = await self.registry.open(
                params.save_file, resolved, params.pid, conn.peer.uid, conn, request_id=request.id
            )
            session.prompt.format = params.format
            if params.messages:
                try:
                    size = _check_session_size(session, params.messages, snap.config, request.id)
                except protocol.ProtocolError:
                    await self.registry.close(session.id)
                    raise
                async with session.lock:
                    await anyio.to_thread.run_sync(
                        session.prompt.extend, params.messages, size, limiter=self.limiter
                    )
            return protocol.encode_result(
                request.id, protocol.SessionOpenResult(session=session.id)
            )
        if isinstance(params, protocol.SessionCloseParams):
            if self.registry.get(params.session, conn.peer.uid, self.own_uid) is None:
                raise self._unknown_session(params.session, request.id)
            await self.registry.close(params.session)
            return protocol.encode_result(request.id, protocol.SessionCloseResult())
        if isinstance(params, protocol.StatusParams):
            return protocol.encode_result(request.id, self.status())
        try:
            generation = await self.reload()
        except ConfigError as exc:
            raise protocol.ProtocolError(
                protocol.CONFIG_INVALID,
                f"invalid configuration: {exc}",
                protocol.ConfigInvalidData(error=str(exc)),
                id=request.id,
            ) from None
        return protocol.encode_result(
            request.id, protocol.ConfigReloadResult(generation=generation)
        )

    @staticmethod
    def _unknown_session(session: str, rid: protocol.RequestId) -> protocol.ProtocolError:
        return protocol.ProtocolError(
            protocol.UNKNOWN_SESSION, f"unknown session {session!r}", id=rid
        )

    async def _check_path(
        self, save_file: str, snap: Snapshot, rid: protocol.RequestId, peer: PeerCred
    ) -> str:
        try:
            return await anyio.to_thread.run_sync(
                _checked_path, save_file, snap.roots, peer, self.own_uid
            )
        except Forbidden as exc:
            raise protocol.ProtocolError(
                protocol.FORBIDDEN,
                f"forbidden: {exc}",
                protocol.ForbiddenData(reason=str(exc)),
                id=rid,
            ) from None

    async def _prepare_prompt(
        self,
        conn: Connection,
        rid: protocol.RequestId,
        params: protocol.PreparePromptParams,
        snap: Snapshot,
    ) -> bytes:
        config = snap.config
        if params.config:
            try:
                config = with_overrides(config, params.config)
            except ConfigError as exc:
                raise protocol.ProtocolError(
                    protocol.INVALID_PARAMS,
                    f"invalid params: {exc}",
                    {"path": "$.params.config", "error": str(exc)},
                    id=rid,
                ) from None
        session = None
        if params.session is not None:
            session = self.registry.get(params.session, conn.peer.uid, self.own_uid)
            if session is None:
                raise self._unknown_session(params.session, rid)
        save_file = params.save_file
        if save_file is None and session is not None:
            save_file = session.save_file
        resolved = inbox = None
        if save_file is not None:
            resolved = await self._check_path(save_file, snap, rid, conn.peer)
            if session is not None and resolved != session.resolved:
                raise protocol.ProtocolError(
                    protocol.INVALID_PARAMS,
                    "invalid params: save_file differs from the session's save file",
                    {"path": "$.params.save_file", "error": "differs from the session's"},
                    id=rid,
                )
            inbox = inbox_dir(resolved)
        reason = self.registry.pending_abort(session, inbox)
        if reason is None:
            try:
                if session is None:
                    line, delivered = await anyio.to_thread.run_sync(
                        _run_prepare, rid, params, resolved, config, limiter=self.limiter
                    )
                else:
                    session.last_used = time.monotonic()
                    async with session.lock:
                        line, delivered = await anyio.to_thread.run_sync(
                            _run_session_prepare,
                            rid,
                            params,
                            session,
                            resolved,
                            config,
                            limiter=self.limiter,
                        )
            except Aborted as exc:
                reason = exc.reason
                if inbox is not None:
                    self.registry.abort(inbox, reason, claimed_by_watcher=False)
                if session is not None:
                    session.aborted = reason
            except UnknownStrategy as exc:
                raise protocol.ProtocolError(
                    protocol.UNKNOWN_STRATEGY,
                    str(exc),
                    protocol.UnknownStrategyData(name=exc.name, available=exc.available),
                    id=rid,
                ) from None
            except ConfigError as exc:
                raise protocol.ProtocolError(
                    protocol.CONFIG_INVALID,
                    str(exc),
                    protocol.ConfigInvalidData(error=str(exc)),
                    id=rid,
                ) from None
            except FormatError as exc:
                raise protocol.ProtocolError(
                    protocol.INVALID_PARAMS,
                    f"invalid params: {exc}",
                    {"path": "$.params.messages", "error": str(exc)},
                    id=rid,
                ) from None
            else:
                self.stats.notices_delivered += delivered
                return line
        raise protocol.ProtocolError(
            protocol.ABORTED,
            f"aborted: {reason}",
            protocol.AbortedData(
                reason=reason, save_file=save_file, session=None if session is None else session.id
            ),
            id=rid,
        )

    def status(self) -> protocol.StatusResult:
        snap = self.snapshot
        return protocol.StatusResult(
            version=__version__,
            uptime=round(time.monotonic() - self.stats.started, 3),
            config=protocol.ConfigStatus(
                path=snap.config.path,
                generation=snap.generation,
                last_reload_error=self.last_reload_error,
            ),
            counts=protocol.Counts(
                connections=self.stats.connections,
                sessions=len(self.registry.sessions),
                watches=len(self.registry.by_inbox),
                requests=self.stats.requests,
                errors=self.stats.errors,
                notices_delivered=self.stats.notices_delivered,
                aborts=self.registry.aborts,
                pending_request_bytes=self.pending_request_bytes,
                rescans=self.registry.rescans,
            ),
            latency=self.stats.latency(),
        )


def _checked_path(save_file: str, roots: tuple[str, ...], peer: PeerCred, own_uid: int) -> str:
    """Worker thread: the resolved save file, inside a root and reachable by the peer."""
    resolved = check_save_file(save_file, roots)
    if peer.uid != own_uid:
        check_access(resolved, peer)
    return resolved


def _log_warnings(prepared: Prepared) -> None:
    """Foreign tool traffic in a request is never silent: the daemon log says so too."""
    for warning in prepared.warnings:
        log.warning("prepare_prompt: %s", warning)


def _run_prepare(
    rid: protocol.RequestId,
    params: protocol.PreparePromptParams,
    save_file: str | None,
    config: Config,
) -> tuple[bytes, int]:
    """Worker thread: run the strategies and encode the response line."""
    assert params.messages is not None  # required without a session
    prepared = prepare(
        params.messages,
        params.strategies,
        save_file=save_file,
        config=config,
        format=params.format or "auto",
        cache_control=params.cache_control,
    )
    delivered = sum(report.inbox_delivered for report in prepared.report)
    _log_warnings(prepared)
    result = protocol.PreparePromptResult(messages=prepared.messages, report=prepared.report)
    return protocol.encode_result(rid, result), delivered


def _too_deep(request: protocol.Request | None) -> bytes:
    """The error for a line whose JSON nests deeper than the decoder allows."""
    if request is None:
        return protocol.encode_error(None, protocol.PARSE_ERROR, "parse error: nested too deeply")
    return protocol.encode_error(
        request.id,
        protocol.INVALID_PARAMS,
        "invalid params: nested too deeply - at `$.params`",
        {"path": "$.params", "error": "nested too deeply"},
    )


def _decode_large(line: bytes) -> tuple[protocol.Request, msgspec.Struct | None]:
    """Worker thread: a large line, in one pass when it is a valid ``prepare_prompt``."""
    fast = protocol.decode_prepare_request(line)
    if fast is not None:
        return fast
    return protocol.decode_request(line), None


def _check_session_size(
    session: Session, new: Sequence[Any], config: Config, rid: protocol.RequestId, *, kept: int = 0
) -> int:
    """Refuse a conversation that would grow past the session limits (TOO_LARGE).

    Returns the JSON size of ``new``: the bytes stored, whatever their shape.
    """
    daemon = config.daemon
    count = kept + len(new)
    if count > daemon.max_session_messages:
        raise protocol.ProtocolError(
            protocol.TOO_LARGE,
            f"too large: the session would hold {count} messages, "
            f"more than max_session_messages = {daemon.max_session_messages}",
            protocol.TooLargeData(limit=daemon.max_session_messages),
            id=rid,
        )
    added = json_size(new)
    size = (session.prompt.size if kept else 0) + added
    if size > daemon.max_session_bytes:
        raise protocol.ProtocolError(
            protocol.TOO_LARGE,
            f"too large: the session's messages would take {size} bytes of JSON, "
            f"more than max_session_bytes = {daemon.max_session_bytes}",
            protocol.TooLargeData(limit=daemon.max_session_bytes),
            id=rid,
        )
    return added


def _run_session_prepare(
    rid: protocol.RequestId,
    params: protocol.PreparePromptParams,
    session: Session,
    save_file: str | None,
    config: Config,
) -> tuple[bytes, int]:
    """Worker thread: update the session's conversation, prepare it, encode the answer.

    Runs under the session's lock: one prepare per session at a time. A call
    that fails leaves the session's conversation exactly as it was.
    """
    state = session.prompt
    if params.messages is not None:
        size = _check_session_size(session, params.messages, config, rid)
        state = SessionPrompt(format=session.prompt.format)
        state.reset(params.messages, size)
    else:
        if params.base is not None and params.base != len(state.messages):
            error = (
                f"the session holds {len(state.messages)} messages, "
                f"not {params.base}: send the whole conversation as `messages`"
            )
            raise protocol.ProtocolError(
                protocol.INVALID_PARAMS,
                f"invalid params: {error} - at `$.params.base`",
                {"path": "$.params.base", "error": error, "messages": len(state.messages)},
                id=rid,
            )
        append = params.append or []
        size = _check_session_size(session, append, config, rid, kept=len(state.messages))
        state.extend(append, size)
    try:
        prepared, stable = state.prepare(
            params.strategies,
            config,
            save_file=save_file,
            format=params.format,
            cache_control=params.cache_control,
        )
    except BaseException:
        if state is session.prompt and params.append:
            state.truncate(len(state.messages) - len(params.append))
        raise
    session.prompt = state
    delivered = sum(report.inbox_delivered for report in prepared.report)
    _log_warnings(prepared)
    if params.delta:
        delta = session.encoder.delta(prepared.messages, stable)
        result = protocol.PreparePromptResult(
            keep=delta.keep, append=delta.append, checksum=delta.checksum, report=prepared.report
        )
    else:
        session.encoder.forget()
        result = protocol.PreparePromptResult(messages=prepared.messages, report=prepared.report)
    return protocol.encode_result(rid, result), delivered


def _check_not_partial(running: Config, new: Config) -> None:
    """Refuse a reload that drops an access key the running file set (ConfigError).

    A file caught in the middle of a write parses as a shorter, valid file; its
    missing keys would fall back to their defaults, the widest. Removing such a
    key on purpose takes a restart.
    """
    for key in ACCESS_KEYS:
        origin = f"daemon.{key}"
        if running.origins.get(origin) == "file" and new.origins.get(origin) != "file":
            raise ConfigError(
                f"[daemon] {key} is no longer set in {new.path}: the file looks partly"
                " written; keeping the running configuration (restart to remove the key)"
            )


def load_daemon_config(
    path: str | None, environ: Mapping[str, str] | None = None
) -> tuple[Config, tuple[str, ...], signal.Signals | None]:
    """Read and fully validate what the daemon runs with (ConfigError otherwise).

    The one validation behind startup, every reload and ``scoutd config check``.
    """
    config = resolve_config(path, environ=environ, allow_empty=False)
    try:
        signum = parse_signal(config.daemon.abort_signal)
    except ValueError as exc:
        raise ConfigError(f"invalid [daemon] abort_signal: {exc}") from None
    return config, resolve_roots(config.daemon.allowed_roots), signum


def run(config_path: str | None = None, socket_path: str | None = None) -> int:
    """Run the daemon until SIGTERM/SIGINT; return the process exit code.

    ``socket_path`` overrides ``[daemon] socket_path``; under systemd socket
    activation the passed socket is used instead of either. A startup failure
    (invalid configuration, a live daemon on the socket, a missing directory)
    prints one line to stderr and returns 1.
    """
    try:
        config, _, _ = load_daemon_config(config_path)
    except ConfigError as exc:
        print(f"scoutd: {exc}", file=sys.stderr)
        return 1
    configure_logging(config.daemon.log_level, journal=under_journald())
    daemon = config.daemon
    try:
        activated = listen_socket()
        if activated is not None:
            activated.setblocking(False)
            listener = Listener(sock=activated, path=None, created=None)
        else:
            listener = open_listener(
                socket_path or daemon.socket_path,
                daemon.socket_mode,
                daemon.socket_group,
                backlog=min(daemon.max_connections, socket.SOMAXCONN),
            )
    except (StartupError, ActivationError) as exc:
        print(f"scoutd: {exc}", file=sys.stderr)
        return 1
    servers: list[Server] = []

    async def serve() -> None:
        # anyio primitives need a running event loop: build the server inside it.
        servers.append(Server(config, listener, config_arg=config_path))
        await servers[0].serve()

    try:
        anyio.run(serve, backend="asyncio")
    except KeyboardInterrupt:
        pass
    finally:
        listener.sock.close()
        listener.remove_file()
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scoutd.server [--config FILE] [--socket PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m scoutd.server", description=__doc__)
    parser.add_argument("--config", help="configuration file (TOML)")
    parser.add_argument("--socket", help="socket path (overrides [daemon] socket_path)")
    args = parser.parse_args(argv)
    return run(args.config, args.socket)


if __name__ == "__main__":
    sys.exit(main())
