"""Fleet test helpers: real daemons with a ``[fleet]`` table, an operator, bounded waits."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio

from scoutd.config import FleetConfig
from scoutd.fleet.deliver import notice_name
from scoutd.fleet.operator import Receipts, publish, receipts
from scoutd.fleet.wire import Command
from scoutd.inbox import inbox_dir, inbox_removed_dir
from scoutd.testing.fleet import RedisServer, fleet_daemon
from tests.support.daemon import Daemon, LineClient, wait_for

__all__ = [
    "WAIT",
    "delivered_copies",
    "fleet_host",
    "open_session",
    "operator",
    "publish_sync",
    "receipts_sync",
    "wait_connected",
    "wait_receipts",
]

WAIT = 20.0  # seconds: the longest any fleet test waits for one thing
T = TypeVar("T")


def fleet_host(redis: RedisServer | str, host: str, **extra: Any) -> Daemon:
    """A daemon (not started) serving its own temp dir, reading the fleet as ``host``."""
    return fleet_daemon(redis if isinstance(redis, str) else redis.url, host, **extra)


def operator(redis: RedisServer, **extra: Any) -> FleetConfig:
    return FleetConfig(url=redis.url, state_dir="/nonexistent", **extra)


def run(call: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(call)


def publish_sync(config: FleetConfig, kind: str, target: str, text: str = "") -> Command:
    selector, _, value = target.partition("=")
    command, _ = run(lambda: publish(config, kind, selector, value, text, by="test"))
    return command


def receipts_sync(config: FleetConfig, command: str) -> Receipts:
    return run(lambda: receipts(config, command))


def wait_receipts(config: FleetConfig, command: str, hosts: Iterable[str]) -> Receipts:
    """Wait until every host in ``hosts`` wrote its receipt for ``command``."""
    wanted = set(hosts)

    def answered() -> Receipts | None:
        found = receipts_sync(config, command)
        return found if wanted <= {r.host for r in found.receipts} else None

    found: Receipts = wait_for(answered, WAIT, f"receipts of {sorted(wanted)}", 0.05)
    return found


def wait_connected(daemon: Daemon, connected: bool = True) -> dict[str, Any]:
    def state() -> dict[str, Any] | None:
        fleet: dict[str, Any] = daemon.status()["fleet"]
        return (
            fleet if fleet["connected"] == connected and fleet["caught_up"] == connected else None
        )

    found: dict[str, Any] = wait_for(state, WAIT, f"fleet connected = {connected}", 0.05)
    return found


def open_session(c: LineClient, save_file: str, label: str | None = None) -> str:
    params = {"save_file": save_file} if label is None else {"save_file": save_file, "label": label}
    reply = c.call("session.open", params)
    assert "result" in reply, reply
    return str(reply["result"]["session"])


def delivered_copies(save_file: str, command: Command) -> int:
    """How many copies of the fleet notice ``command`` the chat holds (pending or taken)."""
    name = notice_name(command)
    stem = name.removesuffix(".txt")
    count = 0
    for directory in (inbox_dir(save_file), inbox_removed_dir(save_file)):
        try:
            entries = os.listdir(directory)
        except FileNotFoundError:
            continue
        count += sum(1 for entry in entries if entry.startswith(stem))
    return count
