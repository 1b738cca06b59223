"""``scripts/load sessions``: many open sessions, their memory, idle CPU and abort delays."""

from __future__ import annotations

import argparse
import json
import operator
import os
import random
import threading
import time
from functools import partial
from typing import Any

import _reliability as rel

from scoutd.simulate.progress import Progress  # on stderr, only on a terminal
from scoutd.strategies.inbox import inbox_dir


class _Notes(threading.Thread):
    """Reads one connection's ``session.aborted`` notifications: session -> arrival time."""

    def __init__(self, client: rel.LineClient, arrivals: dict[str, float]) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.arrivals = arrivals
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                line = self.client.read_line(0.5)
            except TimeoutError:
                continue
            except OSError:
                return
            if not line:
                return
            message = json.loads(line)
            if message.get("method") == "session.aborted":
                self.arrivals.setdefault(message["params"]["session"], time.monotonic())


def run_sessions(args: argparse.Namespace) -> int:
    failures: list[str] = []
    settings = {
        "max_connections": args.connections + 32,
        "rescan_interval": args.rescan_interval,
        "log_level": "warning",
        "max_sessions_per_uid": args.sessions,
    }
    daemon = rel.Daemon(settings)  # makes the temp dir: removed in the ``finally`` below
    root = daemon.dir
    dirs = [os.path.join(root, f"d{n:03d}") for n in range(args.dirs)]
    save_files = [
        os.path.join(dirs[n % args.dirs], f"agent-{n:05d}.chat") for n in range(args.sessions)
    ]
    document: dict[str, Any] = {
        "command": "sessions",
        "sessions": args.sessions,
        "directories": args.dirs,
        "connections": args.connections,
        "rescan_interval": args.rescan_interval,
    }
    clients: list[rel.LineClient] = []
    readers: list[_Notes] = []
    try:
        if not args.dirs_later:  # else each chat directory is created just before its abort
            for directory in dirs:
                os.makedirs(directory)
        if args.inboxes and not args.dirs_later:  # every session's inbox exists: one watch each
            for path in save_files:
                os.makedirs(inbox_dir(path))
        daemon.start()
        clients = [rel.LineClient(daemon.socket_path, timeout=60) for _ in range(args.connections)]
        for client in clients:
            client.call("status")
        time.sleep(0.5)
        rss_before = daemon.rss_kib()
        started = time.monotonic()
        owner: dict[str, int] = {}
        session_of: dict[str, str] = {}
        opening = Progress(args.connections, "opening sessions: connections")
        for index, client in enumerate(clients):  # pipelined: all requests, then all answers
            opening.update(index)
            mine = save_files[index :: args.connections]
            ids = [client.request("session.open", {"save_file": path}) for path in mine]
            for rid, path in zip(ids, mine, strict=True):
                reply = client.response(rid)
                if "result" not in reply:
                    failures.append(f"session.open failed: {reply.get('error')}")
                    break
                session_of[path] = reply["result"]["session"]
                owner[path] = index
        open_seconds = time.monotonic() - started
        opening.close()
        status = daemon.status()["counts"]
        if status["sessions"] != args.sessions:
            failures.append(f"daemon holds {status['sessions']} sessions of {args.sessions}")
        time.sleep(1.0)
        rss_after = daemon.rss_kib()
        document.update(
            {
                "open_seconds": round(open_seconds, 2),
                "opens_per_second": round(args.sessions / open_seconds, 1),
                "watched_inboxes": status["watches"],
                "rss_kib_before": rss_before,
                "rss_kib_with_sessions": rss_after,
                "rss_bytes_per_session": round((rss_after - rss_before) * 1024 / args.sessions),
                "daemon_threads": rel.proc_status(daemon.pid, "Threads"),
                "dirs_created_after_open": args.dirs_later,
                "inboxes_made_before_open": args.inboxes and not args.dirs_later,
            }
        )
        document["inotify_instances"], document["inotify_watches"] = rel.inotify_usage(daemon.pid)
        # idle cost: CPU over two rescan periods with nothing happening
        window = 2 * args.rescan_interval
        cpu_before = rel.cpu_seconds(daemon.pid)
        time.sleep(window)
        document["idle_cpu_percent"] = round(
            100 * (rel.cpu_seconds(daemon.pid) - cpu_before) / window, 1
        )
        probe = time.monotonic()
        daemon.status()
        document["status_ms_with_sessions"] = round((time.monotonic() - probe) * 1000, 2)
        arrivals: dict[str, float] = {}
        readers = [_Notes(client, arrivals) for client in clients]
        for reader in readers:
            reader.start()
        rng = random.Random(args.seed)
        sample = rng.sample(save_files, min(args.aborts, len(save_files)))
        delays: list[float] = []
        late: list[str] = []
        bound = args.rescan_interval + 5.0
        staging = os.path.join(root, ".staging")  # same file system; the abort is renamed in
        os.makedirs(staging, exist_ok=True)
        pushing = Progress(len(sample), "aborts pushed")
        for n, path in enumerate(sample):
            pushing.update(n)
            session = session_of[path]
            temp = os.path.join(staging, f"abort-{n}")
            with open(temp, "w", encoding="utf-8") as handle:
                handle.write(f"load test {session[:8]}")
                handle.flush()
                os.fsync(handle.fileno())
            # dated back as `scoutd abort` dates its file: found by a scan of an inbox
            # created this instant, it is complete at once (docs/OPERATIONS.md)
            past = time.time() - 1
            os.utime(temp, (past, past))
            # the push delay: from the rename (with --dirs-later, from the creation of
            # the chat and inbox directories just before it), not the writer's fsyncs
            dropped = time.monotonic()
            os.makedirs(inbox_dir(path), exist_ok=True)
            os.rename(temp, os.path.join(inbox_dir(path), "abort"))
            try:
                rel.wait_for(
                    partial(operator.contains, arrivals, session), bound, "the push", 0.001
                )
            except TimeoutError:
                late.append(path)
                continue
            delays.append(arrivals[session] - dropped)
        pushing.close()
        if late:
            failures.append(f"{len(late)} abort(s) not pushed within {bound:g} s")
        document["aborts"] = len(sample)
        document["abort_push"] = rel.summary_ms(delays)
        document["pushes_slower_than_1s"] = sum(d > 1.0 for d in delays)
        document["daemon_threads_after_aborts"] = rel.proc_status(daemon.pid, "Threads")
        per_session_kb = document["rss_bytes_per_session"] / 1024
        document["scale_targets"] = {  # docs/RELIABILITY.md: a benchmark, not a test
            "threads<=64": max(document["daemon_threads"], document["daemon_threads_after_aborts"])
            <= 64,
            "inotify_instances<=8": document["inotify_instances"] <= 8,
            "abort_push_p99<=100ms": bool(delays) and document["abort_push"]["p99_ms"] <= 100,
            "memory_per_session<=10KB": per_session_kb <= 10,
        }
        for reader in readers:
            reader.stop.set()
        for reader in readers:
            reader.join(5)
        for client in clients:
            client.close()
        rel.wait_for(lambda: daemon.status()["counts"]["sessions"] == 0, 60, "sessions to close")
        document["rss_kib_after_close"] = daemon.rss_kib()
        if not daemon.alive():
            failures.append("the daemon died")
    finally:
        for reader in readers:
            reader.stop.set()
        for client in clients:
            client.close()
        daemon.cleanup(keep=args.keep)
    return rel.emit(document, as_json=args.json, failures=failures)
