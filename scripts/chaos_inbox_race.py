"""``scripts/chaos-inbox race``: racing library consumers and the daemon's watcher empty
one inbox while abort files are dropped: every notice and every abort taken exactly once."""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import time

import _reliability as rel
from chaos_inbox_harness import (
    DRAIN_TIMEOUT,
    READY_TIMEOUT,
    read_log,
    sigkill,
    spawn,
    visible,
    wait_line,
)

from scoutd.inbox.aborted import clear, held
from scoutd.strategies.inbox import (
    ABORT_NAME,
    inbox_dir,
    inbox_removed_dir,
    write_abort,
    write_notice,
)


def run_race(args: argparse.Namespace) -> int:
    """Run the race and audit it; the temp dir goes however the run ends (unless ``--keep``)."""
    daemon = rel.Daemon({"rescan_interval": 1.0, "watch_mode": args.watch_mode})
    try:
        return _race(args, daemon)
    finally:
        daemon.cleanup(keep=args.keep)


def _race(args: argparse.Namespace, daemon: rel.Daemon) -> int:
    base = daemon.dir
    save_file = os.path.join(base, "race.chat")
    stop_path = os.path.join(base, "stop")
    chunks = [args.notices // (args.aborts + 1)] * (args.aborts + 1)
    chunks[-1] += args.notices - sum(chunks)
    seq = iter(range(args.notices))
    failures: list[str] = []
    workers: list[subprocess.Popen[str]] = []
    started = time.monotonic()

    def drop(n: int) -> None:
        for _ in range(n):
            i = next(seq)
            write_notice(save_file, f"notice {i:07d}", name=f"note-{i:07d}.txt")

    try:
        daemon.start()
        drop(chunks[0])
        watcher_client = rel.LineClient(daemon.socket_path, timeout=10)
        session = watcher_client.call("session.open", {"save_file": save_file})["result"]["session"]
        logs = [os.path.join(base, f"consumer-{n}.log") for n in range(args.consumers)]
        for log_path in logs:
            pause = str(args.pause)
            workers.append(spawn("_race", save_file, log_path, stop_path, "120", pause, stdin=True))
        for worker in workers:
            wait_line(worker, "ready", READY_TIMEOUT)
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        abort_path = os.path.join(inbox_dir(save_file), ABORT_NAME)
        for k in range(args.aborts):
            write_abort(save_file, f"abort {k:03d}")
            rel.wait_for(lambda: not os.path.lexists(abort_path), 30, f"abort {k} to be consumed")
            rel.wait_for(lambda: held(save_file) is not None, 30, f"abort {k}'s marker")
            clear(save_file)  # as an operator does, so that the chat is served again
            drop(chunks[k + 1])
        rel.wait_for(lambda: not visible(inbox_dir(save_file)), DRAIN_TIMEOUT, "the inbox to drain")
        open(stop_path, "w").close()
        for worker in workers:
            worker.wait(DRAIN_TIMEOUT)
        lines = [line for log_path in logs for line in read_log(log_path)]
        by_consumers = [line.split("\t", 1)[1] for line in lines if line.startswith("A\t")]
        notices = [line.split("\t", 1)[1] for line in lines if line.startswith("N\t")]
        per_consumer = [
            sum(1 for line in read_log(log_path) if line.startswith("N\t")) for log_path in logs
        ]
        expected_by_watcher = args.aborts - len(by_consumers)
        by_watcher: list[str] = []
        deadline = time.monotonic() + 10
        while len(by_watcher) < expected_by_watcher and time.monotonic() < deadline:
            try:
                note = watcher_client.notification("session.aborted", deadline - time.monotonic())
            except TimeoutError:
                break
            assert note["params"]["session"] == session
            by_watcher.append(note["params"]["reason"])
        status = watcher_client.call("status")["result"]["counts"]
        watcher_client.close()
    finally:
        for worker in workers:
            sigkill(worker)
        daemon.stop()
    counts = collections.Counter(notices)
    expected = {f"notice {i:07d}" for i in range(args.notices)}
    if set(counts) != expected:
        failures.append(f"{len(expected - set(counts))} notice(s) never delivered")
    if any(n != 1 for n in counts.values()):
        failures.append(f"{sum(n > 1 for n in counts.values())} notice(s) delivered twice")
    reasons = collections.Counter(by_consumers + by_watcher)
    if reasons != collections.Counter(f"abort {k:03d}" for k in range(args.aborts)):
        failures.append(f"aborts not consumed exactly once each: {dict(reasons)}")
    if status["aborts"] != len(by_watcher):
        failures.append(f"daemon counted {status['aborts']} aborts, pushed {len(by_watcher)}")
    removed = sorted(os.listdir(inbox_removed_dir(save_file)))
    claims = [n for n in removed if n.startswith(".")]
    abort_records = [n for n in removed if n.startswith(ABORT_NAME)]
    if claims:
        failures.append(f"claim(s) left in the removed directory: {claims[:3]}")
    if len(abort_records) != args.aborts or len(removed) != args.notices + args.aborts:
        failures.append(f"removed directory holds {len(removed)} entries")
    if visible(inbox_dir(save_file)):
        failures.append("the inbox is not empty")
    document = {
        "command": "race",
        "watch_mode": args.watch_mode,
        "consumers": args.consumers,
        "notices": args.notices,
        "aborts": args.aborts,
        "notices_per_consumer": per_consumer,
        "aborts_by_consumers": len(by_consumers),
        "aborts_by_daemon_watcher": len(by_watcher),
        "seconds": round(time.monotonic() - started, 2),
    }
    return rel.emit(document, as_json=args.json, failures=failures)
