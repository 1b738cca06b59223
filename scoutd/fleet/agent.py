"""The daemon's side of a fleet: read commands, deliver them here, acknowledge, report.

:class:`FleetAgent` runs in the daemon's task group when ``[fleet]`` is
configured. It reads the command stream through this host's own consumer
group (``XREADGROUP``), so every host gets every command and Redis keeps,
per host, the commands it read and has not acknowledged. For each command:
match it against the open sessions and the chats under the roots
(:mod:`.select`), deliver it through the inbox (:mod:`.deliver`, a worker
thread), write the receipt, then ``XACK``. A host that died or lost Redis
before its ``XACK`` reads the command again (its pending entries first);
the journal keeps that from delivering it twice.

Fail closed: at startup the daemon reads its pending and new commands before
it accepts a connection, for at most ``startup_timeout`` (an abort published
while it was down is in the chat's inbox before any prepare of that chat).
Without Redis it serves its local files all the same, reconnects with a
backoff up to ``reconnect_max``, and ``status``/metrics say so.

Resource handling: the Redis client is closed when :meth:`run` ends or the
link is lost. Error handling: a lost link is logged once per loss and retried;
a command that cannot be decoded is acknowledged with an error receipt
(it would never decode); one that cannot be written to a chat is
acknowledged with that chat under ``refused``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol

import anyio
import anyio.abc
import msgspec

from .. import protocol
from ..config import FleetConfig
from ..paths import printable
from .deliver import Found, Journal, canonical_pattern, deliver, find_chats, over_limit
from .link import BLOCK_MS, LinkErrors, RedisClock, connect
from .select import Identity, chats_for
from .wire import (
    FIELD,
    Command,
    HostBeat,
    Keys,
    Receipt,
    SessionEvent,
    SessionView,
    decode_beat,
    decode_command,
    encode,
)

__all__ = ["FleetAgent", "OpenSession"]

log = logging.getLogger("scoutd.fleet")

BATCH = 100  # commands read at once
FIRST_BACKOFF = 0.1  # seconds before the first reconnect; doubles up to reconnect_max
MAX_LISTED = 1000  # sessions listed by name in a heartbeat (all are counted)
MAX_UNSENT_EVENTS = 10_000  # session events kept while Redis is out of reach
EventName = Literal["opened", "aborted", "closed"]


class OpenSession(Protocol):
    """What the fleet reads of one of the daemon's sessions (nothing else)."""

    @property
    def id(self) -> str: ...
    @property
    def resolved(self) -> str: ...
    @property
    def label(self) -> str | None: ...
    @property
    def aborted(self) -> str | None: ...


def _views(sessions: Iterable[OpenSession]) -> list[SessionView]:
    return [
        SessionView(id=s.id, save_file=s.resolved, label=s.label, aborted=s.aborted is not None)
        for s in sessions
    ]


class FleetAgent:
    """One host's reader of the fleet's commands (see the module's docstring)."""

    def __init__(
        self,
        config: FleetConfig,
        sessions: Callable[[], Iterable[OpenSession]],
        roots: Callable[[], Sequence[str]],
        *,
        version: str = "",
    ) -> None:
        self.config = config
        self.host = config.host or socket.gethostname()
        self.keys = Keys(config.prefix)
        self.group = Keys.group(self.host)
        self.instance = secrets.token_hex(8)  # tells this run's beats from any other's
        self.conflict: str | None = None  # another daemon beats under this name (see _judge_beat)
        self._beaten = False  # a beat of this run was written
        self._foreign_at = 0.0  # when another instance's beat was last found
        self.journal = Journal(os.path.join(config.state_dir, f"delivered-{self.host}.log"))
        self.connected = False
        self.caught_up = False
        self.last_error: str | None = None
        self.lost_at: float | None = time.monotonic()
        self.commands = 0
        self.delivered = 0
        self.reconnects = 0
        self._sessions = sessions
        self._roots = roots
        self._version = version
        self._redis: Any = None
        self._ever_connected = False
        self._acked: tuple[int, int] | None = None  # the last entry id acknowledged
        self._unread_beat = False  # the account may not read the beat it replaces (said once)
        self.clock = RedisClock()  # every time this host writes is Redis's (measured each beat)
        self._untimed = False  # the account may not ask Redis's time (said once)
        self._known: dict[str, SessionView] = {}
        self._unsent: list[SessionEvent] = []

    # --- lifecycle -------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Catch up (bounded), report started, then read and beat until cancelled."""
        try:
            await anyio.to_thread.run_sync(self.journal.load)
        except OSError as exc:  # deliveries then fail before their XACK and are retried
            self.last_error = f"journal {self.journal.path}: {exc.strerror or exc}"
            log.error("fleet: %s", self.last_error)
        with anyio.move_on_after(self.config.startup_timeout) as scope:
            try:
                await self._catch_up()
            except LinkErrors.get() as exc:
                await self._lost(exc)
            except Exception:  # never the end of the daemon: the read loop tries again
                log.exception("fleet: reading the pending commands failed")
        if scope.cancelled_caught:
            self.last_error = "pending commands not all read within startup_timeout"
            log.error("fleet: %s; serving local files meanwhile", self.last_error)
            await self._drop_client()
        elif not self.caught_up:
            log.error("fleet: Redis unreachable at startup; serving local files meanwhile")
        task_status.started()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._beat_loop)
                await self._read_loop()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                await self._drop_client()

    def status(self) -> protocol.FleetStatus:
        lost = 0.0 if self.lost_at is None else time.monotonic() - self.lost_at
        return protocol.FleetStatus(
            host=self.host,
            connected=self.connected,
            caught_up=self.caught_up,
            last_error="; ".join(e for e in (self.conflict, self.last_error) if e) or None,
            disconnected_for=round(lost, 3),
            commands=self.commands,
            delivered=self.delivered,
            reconnects=self.reconnects,
        )

    # --- the link --------------------------------------------------------------------

    async def _connect(self) -> Any:
        if self._redis is None:
            self._redis = connect(self.config)
        from redis.exceptions import ResponseError

        await self._redis.ping()
        with contextlib.suppress(ResponseError):  # Redis's clock from the first beat on
            asked = time.time()  # (an account without +time: its beats say so)
            self.clock.note(await self._redis.time(), asked, time.time())
        try:  # "$": a host reads the commands published from its first start on
            await self._redis.xgroup_create(
                self.keys.commands, self.group, self._group_start(), mkstream=True
            )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        if not self.connected:
            self.reconnects += self._ever_connected
            self._ever_connected = True
            log.info("fleet: connected as host %r", self.host)
        self.connected, self.lost_at, self.last_error = True, None, None
        return self._redis

    def _group_start(self) -> str:
        """Where this host's consumer group starts when it has to be created: at the
        first start "$" (the commands published from then on); once this run has
        acknowledged a command, the group is missing because Redis lost it (restarted
        without its data, FLUSHALL, the group deleted), so after the last command
        acknowledged: an abort published before this host reconnects is read, not
        skipped for good (the journal keeps a second read single). Capped at this
        host's clock: a new stream's ids are its server's time."""
        if self._acked is None:
            return "$"
        now = (int(self.clock.now() * 1000), 0)
        millis, seq = min(self._acked, now)
        return f"{millis}-{seq}"

    def _note_acked(self, ident: str) -> None:
        millis, _, seq = ident.partition("-")
        if millis.isdigit() and seq.isdigit():  # a stream id: where a lost group restarts
            self._acked = max(self._acked or (0, 0), (int(millis), int(seq)))

    async def _lost(self, exc: BaseException) -> None:
        if self.connected or self.last_error is None:
            log.error("fleet: Redis out of reach (%s); serving local files, reconnecting", exc)
        if self.connected:
            self.lost_at = time.monotonic()
        self.connected = self.caught_up = False
        self.last_error = str(exc) or type(exc).__name__
        await self._drop_client()

    async def _drop_client(self) -> None:
        client, self._redis = self._redis, None
        if client is not None:
            try:
                await client.aclose()
            except Exception:  # closing a broken link: nothing left to do
                log.debug("fleet: closing the Redis client failed", exc_info=True)

    # --- commands --------------------------------------------------------------------

    async def _catch_up(self) -> None:
        """Read this host's pending commands, then every new one, until none is left."""
        await self._connect()
        last = "0"
        while True:  # the pending ones: read before, not acknowledged (a crash, a lost link)
            entries = await self._read(last, None)
            if not entries:
                break
            last = entries[-1]
        while await self._read(">", None):
            pass
        self.caught_up = True

    async def _read_loop(self) -> None:
        backoff = FIRST_BACKOFF
        while True:
            try:
                if not self.caught_up:
                    await self._catch_up()
                await self._read(">", BLOCK_MS)
                backoff = FIRST_BACKOFF
            except LinkErrors.get() as exc:
                await self._lost(exc)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, self.config.reconnect_max)
            except Exception as exc:
                # Never the end of the daemon (its other clients, its local aborts): the
                # entries read and not acknowledged are read again, from the pending ones.
                log.exception("fleet: reading commands failed; reading them again")
                self.caught_up, self.last_error = False, f"{type(exc).__name__}: {exc}"
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, self.config.reconnect_max)

    async def _read(self, start: str, block: int | None) -> list[str]:
        """One XREADGROUP from ``start``: deliver each entry in order, then write their
        receipts and acknowledge them, in one round trip. Returns their ids."""
        redis = self._redis if self._redis is not None else await self._connect()
        answer = await redis.xreadgroup(
            self.group, self.host, {self.keys.commands: start}, count=BATCH, block=block
        )
        done: list[str] = []
        pipe = redis.pipeline(transaction=False)
        for _stream, entries in answer or ():
            for entry_id, fields in entries:
                ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                receipt = await self._apply(ident, fields)
                key = self.keys.receipts(receipt.command)
                pipe.hset(key, self.host, encode(receipt))
                pipe.expire(key, int(self.config.receipt_max_age))
                pipe.xack(self.keys.commands, self.group, ident)
                done.append(ident)
        if done:
            await pipe.execute()
            self.commands += len(done)
            for ident in done:
                self._note_acked(ident)
        return done

    async def _apply(self, entry_id: str, fields: dict[bytes, bytes] | None) -> Receipt:
        """Deliver one command here; what happened, as its receipt."""
        now = self.clock.now()
        data = (fields or {}).get(FIELD.encode())
        try:
            if not fields:  # Redis answers a pending entry trimmed since with no fields
                raise ValueError("trimmed from the stream before this host read it")
            if data is None:
                raise ValueError(f"no `{FIELD}` field: not a command")
            command = decode_command(data)
        except (ValueError, msgspec.DecodeError) as exc:
            # msgspec names an unknown field as the publisher spelt it: escaped
            log.error("fleet: command %s ignored: %s", entry_id, printable(str(exc)))
            return Receipt(command=f"entry:{entry_id}", host=self.host, at=now, error=str(exc))
        try:
            # the sessions are read here, on the event loop that owns them
            me = Identity(self.host, self.config.labels, tuple(self._roots()))
            views = _views(self._sessions())
            if command.selector != "chat" and not chats_for(command, me, views, limit=1):
                return Receipt(command=command.id, host=self.host, at=now)  # none: no thread
            receipt = await anyio.to_thread.run_sync(self._deliver, command, me, views, now)
        except Exception as exc:
            # Never fatal, never read again: the entry is acknowledged with why, which
            # the operator's receipts show (a command that kept failing here would
            # otherwise stop this host at every start, and every command after it).
            log.exception("fleet: %s %s not applied here", command.kind, command.id)
            error = f"not applied on this host: {type(exc).__name__}: {exc}"
            return Receipt(command=command.id, host=self.host, at=now, error=error)
        self.delivered += len(receipt.chats)
        log.info(
            "fleet: %s %s for %s=%r: %d chat(s) written, %d already, %d refused",
            command.kind,
            command.id,
            command.selector,
            command.value,
            len(receipt.chats),
            len(receipt.already),
            len(receipt.refused),
        )
        return receipt

    def _deliver(
        self, command: Command, me: Identity, views: list[SessionView], now: float
    ) -> Receipt:
        """In a worker thread: the chats the command reaches here, then the delivery.

        At most ``max_chats`` of them; the receipt says so when more matched (the
        others are not reached: never silently)."""
        limit = self.config.max_chats
        found, matched = Found([]), command
        if command.selector == "chat":  # the command as read is delivered (and journaled)
            matched = msgspec.structs.replace(command, value=canonical_pattern(command.value))
            found = find_chats(matched.value, me.roots, limit)
        chats = chats_for(matched, me, views, found.chats, limit=limit + 1)
        cut = found.cut if len(chats) <= limit else over_limit(limit)
        receipt = deliver(command, chats[:limit], self.journal, self.host, now)
        self.journal.compact(now - 2 * self.config.command_max_age)
        said = [*found.unlisted, *([] if cut is None else [cut])]
        if said:  # a chat there may match: never silently (docs/OPERATIONS.md)
            for line in said:
                log.error("fleet: %s %s: %s", command.kind, command.id, printable(line))
            receipt = msgspec.structs.replace(receipt, refused=[*receipt.refused, *said])
        return receipt

    # --- heartbeats and session events -----------------------------------------------

    async def _beat_loop(self) -> None:
        while True:
            views = _views(self._sessions())  # on the event loop: the registry's own thread
            self._note_events(views)
            if self.connected and self._redis is not None:
                try:
                    await self._beat(views)
                except LinkErrors.get() as exc:
                    log.debug("fleet: heartbeat not sent: %s", exc)
                except Exception:  # never the end of the daemon: the next beat tries again
                    log.exception("fleet: heartbeat not sent")
            await anyio.sleep(self.config.heartbeat_interval)

    def _note_events(self, views: list[SessionView]) -> None:
        now = self.clock.now()
        current = {v.id: v for v in views}
        for view in views:
            before = self._known.get(view.id)
            if before is None:
                self._unsent.append(self._event(now, "opened", view))
            if view.aborted and (before is None or not before.aborted):
                self._unsent.append(self._event(now, "aborted", view))
        for ident, view in self._known.items():
            if ident not in current:
                self._unsent.append(self._event(now, "closed", view))
        self._known = current
        del self._unsent[:-MAX_UNSENT_EVENTS]

    def _event(self, now: float, event: EventName, view: SessionView) -> SessionEvent:
        return SessionEvent(
            host=self.host, at=now, event=event, session=view.id, save_file=view.save_file
        )

    async def _beat(self, views: list[SessionView]) -> None:
        beat = HostBeat(
            host=self.host,
            at=self.clock.now(),
            labels=list(self.config.labels),
            roots=list(self._roots()),
            interval=self.config.heartbeat_interval,
            sessions=len(views),
            listed=views[:MAX_LISTED],
            delivered=self.delivered,
            version=self._version,
            instance=self.instance,
            conflict=self.conflict or "",
        )
        pipe = self._redis.pipeline(transaction=False)
        pipe.time()  # Redis's clock, for the next beat's times and the events'
        pipe.hget(self.keys.hosts, self.host)  # the beat this one replaces
        pipe.hset(self.keys.hosts, self.host, encode(beat))
        for event in self._unsent:
            pipe.xadd(
                self.keys.events,
                {FIELD: encode(event)},
                maxlen=self.config.event_max_len,
                approximate=True,
            )
        sent = len(self._unsent)
        # Each answer alone: a refused TIME or HGET (a host ACL without it) must not count
        # the beat and the events, which Redis wrote, as unsent (they would be sent again).
        asked = time.time()
        clock, replaced, *written = await pipe.execute(raise_on_error=False)
        for answer in written:
            if isinstance(answer, Exception):
                raise answer
        if not self.clock.note(clock, asked, time.time()) and not self._untimed:
            self._untimed = True  # said once
            log.warning(
                "fleet: Redis's time cannot be read (%s): this host dates its heartbeats by"
                " its own clock; give the host account +time",
                clock,
            )
        del self._unsent[:sent]
        if not isinstance(replaced, Exception):
            conflict = self._judge_beat(replaced)
            if (conflict or "") != beat.conflict:  # told in the stored beat now, not a beat later
                told = msgspec.structs.replace(beat, conflict=conflict or "")
                await self._redis.hset(self.keys.hosts, self.host, encode(told))
            self.conflict = conflict
        elif not self._unread_beat:  # said once
            self._unread_beat = True
            log.error(
                "fleet: the beat this host replaces cannot be read (%s): a second daemon"
                " as host %r cannot be told; give the host account +hget",
                replaced,
                self.host,
            )

    def _judge_beat(self, replaced: bytes | None) -> str | None:
        """Tell a second daemon under this host name from this daemon's own restart.

        Both read through the name's one consumer group, so Redis gives each
        command to one of them only: an abort for every host reaches the chats
        of one. At its first beat a daemon replaces whatever beat was there (its
        own from before a restart, say); after that, a beat of another instance
        in its place was written since its own last one: another daemon, live.
        Said in ``status`` and in the beats (``fleet status``, ``fleet
        receipts``) until none is seen for three intervals. Returns the
        conflict to tell; the caller stores it once the beat says it too, so
        that ``status`` never tells one the fleet's view does not.
        """
        other = _instance_of(replaced)
        now = time.monotonic()
        if self._beaten and other and other != self.instance:
            if self.conflict is None:
                log.error(
                    "fleet: another daemon (instance %s) beats as host %r: commands are split"
                    " between them; give each daemon its own [fleet] host",
                    other,
                    self.host,
                )
            self._foreign_at = now
            self._beaten = True
            return (
                f"another scoutd daemon beats as host {self.host!r} (instance {other}): each"
                " command reaches only one of the daemons under one name; give each its own"
                " [fleet] host"
            )
        self._beaten = True
        if (
            self.conflict is not None
            and now - self._foreign_at > 3 * self.config.heartbeat_interval
        ):
            log.info("fleet: no other daemon beats as host %r any more", self.host)
            return None
        return self.conflict


def _instance_of(beat: bytes | None) -> str:
    """The ``instance`` of a stored beat; "" when there is none or it does not decode."""
    if beat is None:
        return ""
    try:
        return decode_beat(beat).instance
    except (msgspec.DecodeError, RecursionError):  # another version, or not a beat at all
        return ""
