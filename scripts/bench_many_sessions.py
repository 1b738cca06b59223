"""Figures of ``scripts/bench`` over many open sessions: how fast an abort file reaches
its session, and the daemon's memory per session (with and without inbox directories)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench_daemon import Daemon, max_inotify_watches
from bench_plan import SEED, Plan
from bench_timing import ms, progress

import scoutd
from scoutd.strategies.inbox import inbox_dir
from scoutd.testing import percentile


def save_files(directory: str, sessions: int, dirs: int, *, inboxes: bool) -> list[str]:
    """Save files spread evenly over ``dirs`` directories (with their inboxes made)."""
    paths = []
    for d in range(dirs):
        os.makedirs(os.path.join(directory, f"d{d:03d}"), exist_ok=True)
    for i in range(sessions):
        path = os.path.join(directory, f"d{i % dirs:03d}", f"agent{i:05d}.chat")
        if inboxes:
            os.makedirs(inbox_dir(path), exist_ok=True)
        paths.append(path)
    return paths


def open_sessions(
    clients: Sequence[scoutd.Client], paths: Sequence[str]
) -> list[scoutd.client.Session]:
    """Open one session per path, the clients taking turns, one thread per client."""
    sessions: list[scoutd.client.Session | None] = [None] * len(paths)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(k, len(paths), len(clients)):
                sessions[i] = clients[k].open_session(paths[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [s for s in sessions if s is not None]


def inotify_report(daemon: Daemon, wanted: int) -> dict[str, Any]:
    """Directories the daemon watches in the kernel, against those it should watch."""
    watches = daemon.inotify_watches()
    return {
        "watches": watches,
        "wanted": wanted,
        "max_user_watches": max_inotify_watches(),
        "limit_hit": watches < wanted,
    }


def bench_abort(results: dict[str, Any], daemon: Daemon, directory: str, plan: Plan) -> None:
    """``abort_ms_p50/p99``: from the rename of an abort file to the notification."""
    progress(f"aborts: opening {plan.abort_sessions} sessions over {plan.abort_dirs} directories")
    paths = save_files(directory, plan.abort_sessions, plan.abort_dirs, inboxes=True)
    staging = os.path.join(directory, "staging")  # same file system, not watched
    os.makedirs(staging)
    clients = [daemon.client(timeout=60) for _ in range(plan.abort_connections)]
    try:
        sessions = open_sessions(clients, paths)
        # one watch per inbox and per directory of save files (+ the config directory)
        results["abort_inotify"] = inotify_report(daemon, plan.abort_sessions + plan.abort_dirs + 1)
        # a claim can wait for the periodic rescan when a watch could not be armed
        timeout = scoutd.load_config(daemon.config_path).daemon.rescan_interval * 2 + 5
        progress(f"aborts: {plan.aborts} aborts (at most {plan.abort_budget:.0f} s)")
        samples: list[float] = []
        lost = 0
        # sessions in a seeded random order: spread over the directories and connections
        order = random.Random(SEED).sample(range(len(sessions)), len(sessions))
        began = time.monotonic()
        for k in range(plan.aborts):
            if time.monotonic() - began > plan.abort_budget:
                break
            i = order[k % len(order)]
            temp = os.path.join(staging, f"abort-{k}")
            with open(temp, "w", encoding="utf-8") as handle:
                handle.write(f"benchmark abort {k}")
                handle.flush()
                os.fsync(handle.fileno())
            target = os.path.join(inbox_dir(paths[i]), "abort")
            start = time.perf_counter()
            os.rename(temp, target)
            arrived = sessions[i].wait_aborted(timeout)
            elapsed = time.perf_counter() - start
            if not arrived:
                lost += 1
            samples.append(elapsed)
            sessions[i].close()  # an aborted session stays aborted: open a fresh one
            sessions[i] = clients[i % len(clients)].open_session(paths[i])
        results["abort_ms_p50"] = ms(percentile(samples, 0.50))
        results["abort_ms_p99"] = ms(percentile(samples, 0.99))
        results["abort_ms_max"] = ms(max(samples))
        results["abort_samples"] = len(samples)
        results["abort_not_delivered"] = lost
        results["abort_sessions"] = plan.abort_sessions
        results["abort_daemon_threads"] = daemon.threads()
    finally:
        for client in clients:
            client.close()


def bench_rss(daemon: Daemon, directory: str, plan: Plan, *, inboxes: bool) -> dict[str, Any]:
    """The daemon's VmRSS idle and with ``plan.rss_sessions`` sessions open.

    With ``inboxes``, every session's inbox directory exists, so the daemon
    watches it as well as the save file's directory; without, it watches only
    the directories of the save files (an inbox is watched once it is created).
    """
    idle = daemon.rss_kb()
    made = "with" if inboxes else "without"
    progress(
        f"memory: {plan.rss_sessions} sessions over {plan.rss_dirs} directories, "
        f"{made} inbox directories"
    )
    paths = save_files(directory, plan.rss_sessions, plan.rss_dirs, inboxes=inboxes)
    clients = [daemon.client(timeout=120) for _ in range(plan.rss_connections)]
    try:
        start = time.perf_counter()
        sessions = open_sessions(clients, paths)
        elapsed = time.perf_counter() - start
        with daemon.client() as probe:
            counted = probe.status()["counts"]["sessions"]
        if counted != len(sessions) or counted != plan.rss_sessions:
            raise RuntimeError(f"{plan.rss_sessions} sessions opened, the daemon counts {counted}")
        loaded = daemon.rss_kb()
        wanted = plan.rss_dirs + 1 + (plan.rss_sessions if inboxes else 0)
        return {
            "idle_mb": round(idle / 1024, 2),
            "loaded_mb": round(loaded / 1024, 2),
            "per_session_kb": round((loaded - idle) / plan.rss_sessions, 3),
            "open_per_s": round(plan.rss_sessions / elapsed, 1),
            "threads": daemon.threads(),
            "inotify": inotify_report(daemon, wanted),
        }
    finally:
        for client in clients:
            client.close()


# -- the run and its report ------------------------------------------------------------
