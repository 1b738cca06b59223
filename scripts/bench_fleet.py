#!/usr/bin/env python3
"""Fleet figures: ``scripts/bench --fleet [--json] [--quick] [--hosts N] [--sessions N]``.

Real daemons (subprocesses) as the hosts of one fleet, on this machine, and
one real ``redis-server`` (docs/OPERATIONS.md, "A fleet"):

* ``abort_p50_ms`` / ``abort_p99_ms``: one abort addressed to one chat by a
  glob (``chat=...``), from the operator's XADD until that chat's session sees
  ``session.aborted`` on its connection; one abort at a time, each to a chat
  of another session, spread over every host;
* ``all_abort_*``: one abort to ``all``, from the XADD until every session of
  every host has seen it (the slowest), and the median session;
* ``commands_per_s``: notices through the one command stream, addressed to a
  host that does not exist (so no file is written: the stream's own cost),
  from the first XADD until every host read and acknowledged all of them and
  wrote its receipt for each.

Progress goes to stderr; ``--json`` prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import anyio  # noqa: E402
import redis  # noqa: E402

from scoutd.config import FleetConfig  # noqa: E402
from scoutd.fleet.operator import publish  # noqa: E402
from scoutd.fleet.wire import FIELD, Keys, encode, new_command_id  # noqa: E402
from scoutd.testing import Daemon, LineClient, percentile, wait_for  # noqa: E402
from scoutd.testing.fleet import RedisServer, fleet_daemon  # noqa: E402

WAIT = 120.0  # seconds: the longest any step waits


def progress(text: str) -> None:
    print(f"[bench-fleet] {text}", file=sys.stderr, flush=True)


def open_sessions(daemon: Daemon, count: int) -> tuple[LineClient, dict[str, str]]:
    """``count`` sessions on one connection, each on a chat of its own: chat -> session."""
    client = daemon.connect(timeout=WAIT)
    sessions = {}
    for i in range(count):
        chat = os.path.join(daemon.dir, f"c{i:03d}", "agent.chat")
        os.makedirs(os.path.dirname(chat))
        with open(chat, "w") as handle:
            handle.write("[]")
        reply = client.call("session.open", {"save_file": chat})
        sessions[chat] = reply["result"]["session"]
    return client, sessions


Host = tuple[LineClient, dict[str, str]]  # a host's connection and its chats' sessions


def abort_latency(ops: FleetConfig, hosts: list[Host], n: int) -> tuple[list[float], set[str]]:
    """One abort at a time to one chat; seconds from publish to its session's push.

    The chats are taken round-robin over the hosts. Returns the latencies and
    the chats aborted (they stay aborted).
    """
    order = [
        (client, chat)
        for i in range(max(len(sessions) for _, sessions in hosts))
        for client, sessions in hosts
        for chat in list(sessions)[i : i + 1]
    ]
    latencies = []
    for client, chat in order[:n]:
        start = time.perf_counter()
        anyio.run(publish, ops, "abort", "chat", chat, "bench")
        client.notification("session.aborted", WAIT)
        latencies.append(time.perf_counter() - start)
    return latencies, {chat for _, chat in order[:n]}


def all_abort(ops: FleetConfig, hosts: list[Host], aborted: set[str]) -> list[float]:
    """One abort to ``all``: seconds until each session not aborted yet sees it."""
    arrivals: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(len(hosts) + 1)
    start = [0.0]

    def wait(client: LineClient, count: int) -> None:
        ready.wait()
        for _ in range(count):
            client.notification("session.aborted", WAIT)
            with lock:
                arrivals.append(time.perf_counter() - start[0])

    threads = []
    for client, sessions in hosts:
        left = sum(1 for chat in sessions if chat not in aborted)
        thread = threading.Thread(target=wait, args=(client, left))
        thread.start()
        threads.append(thread)
    start[0] = time.perf_counter()
    ready.wait()
    anyio.run(publish, ops, "abort", "all", "", "bench: everyone")
    for thread in threads:
        thread.join(WAIT)
    return arrivals


def throughput(server: RedisServer, ops: FleetConfig, hosts: int, n: int) -> tuple[float, float]:
    """(commands/s published, commands/s read and acknowledged by every host)."""
    client = redis.Redis.from_url(server.url)
    keys = Keys(ops.prefix)
    try:
        start = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            command = {
                "id": new_command_id(),
                "kind": "notice",
                "selector": "host",
                "value": "nobody",
                "text": f"n{i}",
                "issued": time.time(),
            }
            pipe.xadd(keys.commands, {FIELD: encode(command)})
            if len(pipe) >= 500:
                pipe.execute()
        pipe.execute()
        published = time.perf_counter() - start

        def drained() -> bool:
            groups = client.xinfo_groups(keys.commands)
            return len(groups) >= hosts and all(
                int(g["pending"]) == 0 and int(g["lag"] or 0) == 0 for g in groups
            )

        wait_for(drained, WAIT, "every host to acknowledge every command", 0.02)
        done = time.perf_counter() - start
    finally:
        client.close()
    return n / published, n / done


def run(hosts: int, sessions: int, aborts: int, commands: int) -> dict[str, Any]:
    results: dict[str, Any] = {
        "hosts": hosts,
        "sessions_per_host": sessions,
        "cpus": os.cpu_count(),
    }
    with ExitStack() as stack:
        # Redis' default fsync policy (the tests use "always": they kill the server)
        server = stack.enter_context(RedisServer(fsync="everysec"))
        ops = FleetConfig(url=server.url, state_dir="/nonexistent")
        progress(f"starting {hosts} daemons")
        daemons = []
        for i in range(hosts):
            daemon = fleet_daemon(server.url, f"h{i:02d}", heartbeat_interval=1.0)
            daemon.daemon["log_level"] = "info"
            stack.callback(daemon.cleanup)
            daemon.start(wait=False)
            daemons.append(daemon)
        for daemon in daemons:
            daemon.wait_ready(WAIT)
            wait_for(lambda d=daemon: d.status()["fleet"]["caught_up"], WAIT, "fleet connected")
        progress(f"opening {hosts} x {sessions} sessions")
        opened = [open_sessions(d, sessions) for d in daemons]
        for client, _ in opened:
            stack.callback(client.close)
        progress(f"commands per second ({commands} commands)")
        results["publish_per_s"], results["commands_per_s"] = throughput(
            server, ops, hosts, commands
        )
        progress(f"{aborts} single-chat aborts")
        single, aborted = abort_latency(ops, opened, aborts)
        results["abort_count"] = len(single)
        results["abort_p50_ms"] = round(percentile(single, 0.5) * 1000, 2)
        results["abort_p99_ms"] = round(percentile(single, 0.99) * 1000, 2)
        progress("one abort to every session")
        everyone = all_abort(ops, opened, aborted)
        results["all_abort_sessions"] = len(everyone)
        results["all_abort_p50_ms"] = round(percentile(everyone, 0.5) * 1000, 2)
        results["all_abort_max_ms"] = round(max(everyone) * 1000, 2)
        info = redis.Redis.from_url(server.url)
        results["redis_used_memory_bytes"] = int(info.info("memory")["used_memory"])
        info.close()
        results["publish_per_s"] = round(results["publish_per_s"])
        results["commands_per_s"] = round(results["commands_per_s"])
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="2 hosts x 5 sessions: a smoke test")
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=50, help="sessions per host")
    parser.add_argument("--aborts", type=int, default=200, help="single-chat aborts timed")
    parser.add_argument("--commands", type=int, default=5000)
    args = parser.parse_args(argv)
    if args.quick:
        args.hosts, args.sessions, args.aborts, args.commands = 2, 5, 6, 200
    # at most half the sessions: the other half is left for the abort to all
    aborts = min(args.aborts, args.hosts * args.sessions // 2)
    results = run(args.hosts, args.sessions, aborts, args.commands)
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
