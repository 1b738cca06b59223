"""``scripts/chaos-inbox kill``: SIGKILL the consumer (a library process or the daemon)
at random moments while a producer drops notices; then audit the delivery."""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any

import _reliability as rel
from chaos_inbox_audit import audit
from chaos_inbox_harness import (
    DRAIN_TIMEOUT,
    IDLE_SLEEP,
    READY_TIMEOUT,
    read_log,
    sigkill,
    spawn,
    visible,
    wait_line,
)

from scoutd.errors import DaemonTimeout, DaemonUnavailable
from scoutd.simulate.progress import Progress  # on stderr, only on a terminal
from scoutd.strategies.inbox import inbox_dir, write_notice

# Notices dropped after the last kill: the consumer that is left must deliver each.
# Without them a run could deliver nothing and still pass (every notice taken in
# one batch by a consumer killed before it reported the batch).
FINAL_NOTICES = 3


def kill_delay(rng: random.Random, args: argparse.Namespace) -> float:
    """Log-uniform between the bounds: half the kills land in the first few milliseconds
    after a (re)start, while the consumer drains the backlog that built up meanwhile."""
    low, high = math.log(args.min_interval), math.log(args.max_interval)
    return math.exp(rng.uniform(low, high))


def drop_final(save_file: str, count: int) -> None:
    """The :data:`FINAL_NOTICES`, numbered after the producer's ``count``."""
    for seq in range(count, count + FINAL_NOTICES):
        write_notice(save_file, f"notice {seq:07d}")


def check_final(figures: dict[str, Any], failures: list[str], delivered: list[str]) -> None:
    """Fail the run unless every notice dropped after the last kill was delivered."""
    count = figures["notices"] - FINAL_NOTICES
    final = {f"notice {seq:07d}" for seq in range(count, count + FINAL_NOTICES)}
    figures["final_delivered"] = len(final & set(delivered))
    if figures["final_delivered"] != FINAL_NOTICES:
        failures.append(
            f"{FINAL_NOTICES - figures['final_delivered']} notice(s) dropped after the last"
            " kill were not delivered"
        )


def kill_library(args: argparse.Namespace, base: str, rng: random.Random) -> dict[str, Any]:
    save_file = os.path.join(base, "agent.chat")
    log_path = os.path.join(base, "delivered.log")
    stop_path = os.path.join(base, "stop")

    def start_consumer() -> subprocess.Popen[str]:
        proc = spawn("_consume", save_file, log_path, stop_path, str(args.max_seconds), "0")
        wait_line(proc, "ready", READY_TIMEOUT)
        return proc

    started = time.monotonic()
    deadline = started + args.max_seconds
    producer = spawn("_produce", save_file, str(args.notices), str(args.rate))
    consumer: subprocess.Popen[str] | None = None
    kills = 0
    progress = Progress(args.kills, "library mode: kills")
    try:
        consumer = start_consumer()
        while time.monotonic() < deadline and (kills < args.kills or producer.poll() is None):
            time.sleep(kill_delay(rng, args))
            sigkill(consumer)
            kills += 1
            progress.update(kills)
            consumer = start_consumer()
        progress.close()
        wait_line(producer, "done", max(1.0, deadline - time.monotonic()))
        producer.wait(rel.STOP_TIMEOUT)
        drop_final(save_file, args.notices)
        rel.wait_for(lambda: not visible(inbox_dir(save_file)), DRAIN_TIMEOUT, "the inbox to drain")
        open(stop_path, "w").close()
        consumer.wait(DRAIN_TIMEOUT)
    finally:
        if consumer is not None:
            sigkill(consumer)
        sigkill(producer)
    log = read_log(log_path)
    figures, failures = audit(save_file, log, args.notices + FINAL_NOTICES, kills, 1)
    check_final(figures, failures, log)
    return {
        "mode": "library",
        **figures,
        "seconds": round(time.monotonic() - started, 2),
        "failures": failures,
    }


def kill_daemon(args: argparse.Namespace, base: str, rng: random.Random) -> dict[str, Any]:
    from scoutd.client import Client

    daemon = rel.Daemon({"rescan_interval": 1.0}, directory=base)
    save_file = os.path.join(base, "agent.chat")
    delivered: list[str] = []
    failed_calls = [0]
    stop = threading.Event()
    errors: list[str] = []

    def client_loop() -> None:
        with Client(daemon.socket_path, timeout=30.0, reconnect=True) as client:
            while not stop.is_set():
                try:
                    messages = client.prepare_prompt([], "inbox", save_file=save_file)
                except (DaemonUnavailable, DaemonTimeout):
                    failed_calls[0] += 1  # the call in flight, or one to the dying daemon
                    continue
                except Exception as exc:
                    errors.append(repr(exc))
                    return
                delivered.extend(m["content"] for m in messages)
                if not messages:
                    time.sleep(IDLE_SLEEP)

    started = time.monotonic()
    deadline = started + args.max_seconds
    producer: subprocess.Popen[str] | None = None
    threads: list[threading.Thread] = []
    kills = 0
    progress = Progress(args.kills, "daemon mode: kills")
    try:  # the daemon, the producer and the clients end in the ``finally``, whatever happens
        daemon.start()
        producer = spawn("_produce", save_file, str(args.notices), str(args.rate))
        threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        rel.wait_for(lambda: daemon.status()["counts"]["connections"] > args.clients, 30, "clients")
        while time.monotonic() < deadline and (kills < args.kills or producer.poll() is None):
            time.sleep(kill_delay(rng, args))
            daemon.kill()
            kills += 1
            progress.update(kills)
            daemon.start()
            # aim the next kill at the client's first call, which carries the backlog
            # that built up during the restart: wait until it is connected again
            rel.wait_for(
                lambda: daemon.status()["counts"]["connections"] > args.clients, 30, "the client"
            )
        progress.close()
        wait_line(producer, "done", max(1.0, deadline - time.monotonic()))
        producer.wait(rel.STOP_TIMEOUT)
        drop_final(save_file, args.notices)
        rel.wait_for(lambda: not visible(inbox_dir(save_file)), DRAIN_TIMEOUT, "the inbox to drain")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        if producer is not None:
            sigkill(producer)
        daemon.stop()
    figures, failures = audit(
        save_file, delivered, args.notices + FINAL_NOTICES, kills, args.clients
    )
    check_final(figures, failures, delivered)
    failures.extend(f"client error: {error}" for error in errors)
    if any(thread.is_alive() for thread in threads):
        failures.append("a client thread did not finish")
    return {
        "mode": "daemon",
        **figures,
        "clients": args.clients,
        "calls_failed_by_a_kill": failed_calls[0],
        "daemon_starts": daemon.starts,
        "seconds": round(time.monotonic() - started, 2),
        "failures": failures,
    }


def run_kill(args: argparse.Namespace) -> int:
    if args.rate is None:
        # spread the notices over roughly the time the kills take
        low, high = args.min_interval, args.max_interval
        mean = (high - low) / math.log(high / low) if high > low else low  # log-uniform's mean
        cycle = mean + 0.25  # the mean kill delay plus a restart
        args.rate = max(1.0, args.notices / (args.kills * cycle))
    modes = ["library", "daemon"] if args.mode == "both" else [args.mode]
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for mode in modes:
        base = tempfile.mkdtemp(prefix="sd", dir="/tmp")
        rng = random.Random(args.seed)
        try:
            result = (kill_library if mode == "library" else kill_daemon)(args, base, rng)
        except (RuntimeError, TimeoutError) as exc:  # a bounded wait ran out: a failed check
            result = {"mode": mode, "failures": [f"the run stopped: {exc}"]}
        finally:
            if not args.keep:
                shutil.rmtree(base, ignore_errors=True)
        if result.get("kills", args.kills) < args.kills:  # --max-seconds came first
            result["failures"].append(f"{result['kills']} kill(s) of the {args.kills} asked for")
        failures.extend(f"{mode}: {f}" for f in result.pop("failures"))
        results.append(result)
    document = {"command": "kill", "seed": args.seed, "rate": round(args.rate, 1), "runs": results}
    return rel.emit(document, as_json=args.json, failures=failures)
