"""The operator's side of a fleet: publish a command, read the fleet's state and receipts.

What ``scoutd notify --fleet``, ``scoutd abort --fleet`` and ``scoutd fleet``
run (:mod:`scoutd.cli.fleet`). Publishing trims the command stream as
configured: by length with the ``XADD`` itself, by age with ``XTRIM MINID``
(both approximate, so Redis trims whole nodes, cheaply).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from ..config import FleetConfig
from .link import connect
from .wire import FIELD, Command, HostBeat, Keys, Receipt, encode, new_command_id

__all__ = ["FleetView", "GroupView", "Receipts", "fleet_view", "publish", "receipts"]


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
    groups: list[GroupView]
    commands: int  # entries in the command stream
    recent: list[dict[str, Any]]  # the last commands and how many hosts answered


class Receipts(msgspec.Struct, frozen=True, kw_only=True):
    """``scoutd fleet receipts ID``: who answered, and which known hosts have not."""

    command: str
    receipts: list[Receipt]
    missing: list[str]  # hosts with a heartbeat but no receipt yet
    chats: int  # chats written to, all hosts together


_beat = msgspec.json.Decoder(HostBeat)
_receipt = msgspec.json.Decoder(Receipt)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def publish(
    config: FleetConfig, kind: str, selector: str, value: str, text: str, *, by: str = ""
) -> tuple[Command, str]:
    """XADD one command (trimming the stream); returns it and its stream entry id.

    Raises:
        ValueError: the command is malformed (msgspec's message).
    """
    command = msgspec.convert(
        {
            "id": new_command_id(),
            "kind": kind,
            "selector": selector,
            "value": value,
            "text": text,
            "issued": time.time(),
            "by": by,
        },
        Command,
    )
    keys = Keys(config.prefix)
    redis = connect(config)
    try:
        entry = await redis.xadd(
            keys.commands,
            {FIELD: encode(command)},
            maxlen=config.command_max_len,
            approximate=True,
        )
        oldest = int((command.issued - config.command_max_age) * 1000)
        await redis.xtrim(keys.commands, minid=oldest, approximate=True)
    finally:
        await redis.aclose()
    return command, _text(entry)


async def _beats(redis: Any, keys: Keys) -> list[HostBeat]:
    raw = await redis.hgetall(keys.hosts)
    beats = []
    for data in raw.values():
        try:
            beats.append(_beat.decode(data))
        except msgspec.DecodeError:
            continue  # a host of another version: left out rather than failing the view
    return sorted(beats, key=lambda b: b.host)


def _alive(beat: HostBeat, now: float) -> bool:
    return now - beat.at <= 3 * beat.interval


async def fleet_view(config: FleetConfig, *, recent: int = 10) -> FleetView:
    keys = Keys(config.prefix)
    redis = connect(config)
    try:
        now = time.time()
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
        groups=groups,
        commands=int(length),
        recent=latest,
    )


async def receipts(config: FleetConfig, command: str) -> Receipts:
    keys = Keys(config.prefix)
    redis = connect(config)
    try:
        raw = await redis.hgetall(keys.receipts(command))
        beats = await _beats(redis, keys)
    finally:
        await redis.aclose()
    found = sorted((_receipt.decode(data) for data in raw.values()), key=lambda r: r.host)
    answered = {r.host for r in found}
    return Receipts(
        command=command,
        receipts=found,
        missing=[b.host for b in beats if b.host not in answered],
        chats=sum(len(r.chats) + len(r.already) for r in found),
    )
