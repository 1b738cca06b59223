"""The operator's side of a fleet: publish a command, read the fleet's state and receipts.

What ``scoutd notify --fleet``, ``scoutd abort --fleet`` and ``scoutd fleet``
run (:mod:`scoutd.cli.fleet`). Publishing trims the command stream as
configured: by length with the ``XADD`` itself, by age with ``XTRIM MINID``
(both approximate, so Redis trims whole nodes, cheaply).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..config import FleetConfig
from .link import connect, redis_now
from .wire import FIELD, Command, HostBeat, Keys, Receipt, decode_beat, encode, new_command_id

__all__ = [
    "FleetView",
    "GroupView",
    "Receipts",
    "Unreadable",
    "fleet_view",
    "publish",
    "receipts",
    "trim_commands",
]


class GroupView(msgspec.Struct, frozen=True, kw_only=True):
    """A host's consumer group: the commands it read and did not acknowledge, and those unread."""

    host: str
    pending: int
    lag: int | None  # None: Redis cannot tell (after a trim)


class FleetView(msgspec.Struct, frozen=True, kw_only=True):
    """``scoutd fleet status``: the hosts, their sessions, their backlog, recent commands."""

    at: float
    hosts: list[HostBeat]
    alive: list[str]  # hosts whose last heartbeat is within 3 intervals
    conflicts: list[str]  # live host names two daemons beat under (each command reaches one)
    groups: list[GroupView]
    commands: int  # entries in the command stream
    recent: list[dict[str, Any]]  # the last commands and how many hosts answered


class Unreadable(msgspec.Struct, frozen=True, kw_only=True):
    """A receipt field that does not decode as a :class:`Receipt`: its field name, and why."""

    host: str  # the hash field, undecodable bytes as \xNN
    reason: str  # msgspec's message


class Receipts(msgspec.Struct, frozen=True, kw_only=True):
    """``scoutd fleet receipts ID``: who answered, how cleanly, and which known hosts have not.

    Any host account may write any field of the receipts hash, so each field is
    decoded alone: a malformed one is listed under ``unreadable`` and never
    hides the others.
    """

    command: str
    receipts: list[Receipt]
    unreadable: list[Unreadable]
    missing: list[str]  # hosts with a heartbeat but no receipt yet
    incomplete: list[str]  # hosts whose answer is not clean: refused, error or unreadable
    conflicts: list[str]  # host names two daemons beat under: the command reached one of them
    chats: int  # chats written to, all hosts together


_receipt = msgspec.json.Decoder(Receipt)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def publish(
    config: FleetConfig,
    kind: str,
    selector: str,
    value: str,
    text: str,
    *,
    by: str = "",
    trim: bool = True,
) -> tuple[Command, str]:
    """XADD one command (trimming the stream by length); returns it and its stream entry id.

    ``trim``: trim by age too, here (:func:`trim_commands`). The CLI trims after
    it printed the id: a failed trim (an ACL without ``XTRIM``) must not hide
    a command that was published, which a retry would publish twice.

    Raises:
        ValueError: the command is malformed (msgspec's message).
    """
    command = msgspec.convert(  # checked before anything is asked of Redis
        {
            "id": new_command_id(),
            "kind": kind,
            "selector": selector,
            "value": value,
            "text": text,
            "issued": 0.0,
            "by": by,
        },
        Command,
    )
    keys = Keys(config.prefix)
    redis = connect(config)
    try:
        # issued on Redis's clock, as hosts date what they write (docs/RELIABILITY.md, rule 39)
        command = msgspec.structs.replace(command, issued=await redis_now(redis))
        entry = await redis.xadd(
            keys.commands,
            {FIELD: encode(command)},
            maxlen=config.command_max_len,
            approximate=True,
        )
        if trim:
            await _trim(redis, config, _text(entry))
    finally:
        await redis.aclose()
    return command, _text(entry)


async def _trim(redis: Any, config: FleetConfig, entry: str) -> None:
    """``XTRIM MINID ~`` to ``command_max_age`` before the stream entry ``entry``.

    Aged on the entries' ids, which are the Redis server's clock, never on this
    machine's: an operator whose clock ran 8 days ahead trimmed, by its own
    time, the abort it had just published (docs/RELIABILITY.md, rule 39).
    """
    newest = int(entry.partition("-")[0])  # milliseconds, as Redis timed the entry
    oldest = newest - int(config.command_max_age * 1000)
    await redis.xtrim(Keys(config.prefix).commands, minid=oldest, approximate=True)


async def trim_commands(config: FleetConfig, entry: str) -> None:
    """Trim the command stream to ``command_max_age`` before the entry ``entry`` (the
    command just published), ``XTRIM MINID ~``."""
    redis = connect(config)
    try:
        await _trim(redis, config, entry)
    finally:
        await redis.aclose()


async def _beats(redis: Any, keys: Keys) -> list[HostBeat]:
    raw = await redis.hgetall(keys.hosts)
    beats = []
    for data in raw.values():
        try:
            beats.append(decode_beat(data))
        except (msgspec.DecodeError, RecursionError):
            continue  # a host of another version: left out rather than failing the view
    return sorted(beats, key=lambda b: b.host)


def _alive(beat: HostBeat, now: float) -> bool:
    return now - beat.at <= 3 * beat.interval


def _conflicts(beats: list[HostBeat], now: float) -> list[str]:
    """The live host names that two daemons beat under (:meth:`FleetAgent._note_beat`)."""
    return [b.host for b in beats if b.conflict and _alive(b, now)]


async def fleet_view(config: FleetConfig, *, recent: int = 10) -> FleetView:
    keys = Keys(config.prefix)
    redis = connect(config)
    try:
        now = await redis_now(redis)  # the clock the hosts date their beats by
        beats = await _beats(redis, keys)
        length = await redis.xlen(keys.commands)
        groups: list[GroupView] = []
        if length or await redis.exists(keys.commands):
            for group in await redis.xinfo_groups(keys.commands):
                name = _text(group["name"])
                lag = group.get("lag")
                groups.append(
                    GroupView(
                        host=name.removeprefix("host:"),
                        pending=int(group["pending"]),
                        lag=None if lag is None else int(lag),
                    )
                )
        latest = []
        for entry_id, fields in await redis.xrevrange(keys.commands, count=recent):
            try:
                command = msgspec.json.decode(fields[FIELD.encode()], type=Command)
            except (KeyError, msgspec.DecodeError, msgspec.ValidationError):
                continue
            answered = await redis.hlen(keys.receipts(command.id))
            latest.append(
                {
                    "id": command.id,
                    "entry": _text(entry_id),
                    "kind": command.kind,
                    "target": command.selector + ("=" + command.value if command.value else ""),
                    "issued": command.issued,
                    "receipts": answered,
                }
            )
    finally:
        await redis.aclose()
    return FleetView(
        at=now,
        hosts=beats,
        alive=[b.host for b in beats if _alive(b, now)],
        conflicts=_conflicts(beats, now),
        groups=groups,
        commands=int(length),
        recent=latest,
    )


def _field(name: bytes | str) -> str:
    """A hash field's name as text: any bytes a host wrote, undecodable ones as ``\\xNN``."""
    return name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else name


def _clean(receipt: Receipt) -> bool:
    """Every chat the host matched got the command: nothing refused, no error."""
    return not receipt.refused and receipt.error is None


async def receipts(config: FleetConfig, command: str) -> Receipts:
    """Read the receipts of ``command``: each decoded alone, a malformed one listed as such."""
    keys = Keys(config.prefix)
    redis = connect(config)
    try:
        raw = await redis.hgetall(keys.receipts(command))
        beats = await _beats(redis, keys)
        now = await redis_now(redis)
    finally:
        await redis.aclose()
    found: list[Receipt] = []
    unreadable: list[Unreadable] = []
    for name, data in raw.items():
        field = _field(name)
        try:
            receipt = _receipt.decode(data)
        except msgspec.DecodeError as exc:  # ValidationError too: a hostile or newer host
            unreadable.append(Unreadable(host=field, reason=str(exc)))
            continue
        except RecursionError:  # an unknown field nested past what the decoder walks
            unreadable.append(Unreadable(host=field, reason="nested too deeply"))
            continue
        if receipt.command != command or receipt.host != field:
            unreadable.append(Unreadable(host=field, reason="a receipt of another command or host"))
            continue
        found.append(receipt)
    found.sort(key=lambda r: r.host)
    unreadable.sort(key=lambda u: u.host)
    # an unreadable field still answers for the host it names: listed there, not as missing
    answered = {r.host for r in found} | {u.host for u in unreadable}
    incomplete = {r.host for r in found if not _clean(r)} | {u.host for u in unreadable}
    conflicts = _conflicts(beats, now)
    return Receipts(
        command=command,
        receipts=found,
        unreadable=unreadable,
        missing=[b.host for b in beats if b.host not in answered],
        incomplete=sorted(incomplete | set(conflicts)),
        conflicts=conflicts,
        chats=sum(len(r.chats) + len(r.already) for r in found),
    )
