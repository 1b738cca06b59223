"""``scripts/load prepare``: concurrent ``prepare_prompt`` calls, with slow and idle connections.

The load runs in worker processes (``load_prepare_workers.py``) that this module
spawns through the ``scripts/load`` executable, starts together and collects; it
checks that no call fails or waits as long as a slow client's timeout and that
every cut happens at its configured timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import _reliability as rel

# the executable that runs the workers (``load _load ...``, ``load _pester ...``)
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load")
CUT_EARLY = 0.05  # seconds a cut may come before its configured timeout (clock skew)
CUT_LATE = 2.0  # seconds a cut may come after it (a busy daemon checks a bit later)


def _spawn(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (rel.ROOT, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    try:
        ready = proc.stdout.readline().strip() == "ready"
    except BaseException:  # a Ctrl-C while it starts: it is nobody's to stop yet
        rel.stop_process(proc)
        raise
    if not ready:
        rel.stop_process(proc)
        raise RuntimeError("a load worker did not start")
    return proc


def _go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def _result(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        rel.stop_process(proc)
        raise RuntimeError("a load worker ran out of time") from None
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"a load worker exited with {proc.returncode}")
    document: dict[str, Any] = json.loads(lines[-1])
    return document


def _cut_figures(
    cuts: list[float], timeout: float, label: str, failures: list[str]
) -> dict[str, Any]:
    early = [c for c in cuts if c < timeout - CUT_EARLY]
    late = [c for c in cuts if c > timeout + CUT_LATE]
    if not cuts:
        failures.append(f"no {label} connection was cut")
    if early or late:
        failures.append(
            f"{len(early) + len(late)} {label} cut(s) outside [{timeout - CUT_EARLY:g}, "
            f"{timeout + CUT_LATE:g}] s: {sorted(early + late)[:5]}"
        )
    return {
        "cuts": len(cuts),
        "configured_s": timeout,
        "min_s": round(min(cuts, default=0.0), 3),
        "max_s": round(max(cuts, default=0.0), 3),
    }


def _phase(
    args: argparse.Namespace, daemon: rel.Daemon, pester: bool, failures: list[str], label: str
) -> dict[str, Any]:
    spawned: list[subprocess.Popen[str]] = []
    try:
        return _load(args, daemon, pester, failures, label, spawned)
    finally:  # a worker left behind by an error or a Ctrl-C would load the machine on
        for worker in spawned:
            rel.stop_process(worker)


def _load(
    args: argparse.Namespace,
    daemon: rel.Daemon,
    pester: bool,
    failures: list[str],
    label: str,
    spawned: list[subprocess.Popen[str]],
) -> dict[str, Any]:
    """The phase itself; every process it starts goes into ``spawned`` at once."""
    workers: list[subprocess.Popen[str]] = []
    share = [args.clients // args.procs] * args.procs
    share[0] += args.clients - sum(share)
    for i, n in enumerate(share):
        if n:
            load_args = (str(n), str(args.calls), str(i + 1), str(args.large_share))
            workers.append(_spawn("_load", daemon.socket_path, *load_args))
            spawned.append(workers[-1])
    pesterer = None
    if pester:
        pesterer = _spawn("_pester", daemon.socket_path, str(args.slow), str(args.idle))
        spawned.append(pesterer)
        _go(pesterer)
        # the slow lines and idle connections are in place before the load starts
        rel.wait_for(
            lambda: daemon.status()["counts"]["connections"] > args.slow + args.idle,
            30,
            "the slow and idle connections",
        )
    pester_started = time.monotonic()
    cpu_before = rel.cpu_seconds(daemon.pid)
    started = time.monotonic()
    for worker in workers:
        _go(worker)
    outs = [_result(worker, args.max_seconds) for worker in workers]
    seconds = time.monotonic() - started
    cpu = rel.cpu_seconds(daemon.pid) - cpu_before
    latencies = [x for out in outs for x in out["latencies"]]
    errors = sum(out["errors"] for out in outs)
    figures: dict[str, Any] = {
        "calls": len(latencies) + errors,
        "errors": errors,
        "seconds": round(seconds, 2),
        "calls_per_second": round(len(latencies) / seconds, 1) if seconds else 0.0,
        "latency": rel.summary_ms(latencies),
        "latency_small": rel.summary_ms([x for out in outs for x in out["small"]]),
        "latency_large": rel.summary_ms([x for out in outs for x in out["large"]]),
        "daemon_cpu_seconds": round(cpu, 2),
    }
    if errors:
        samples = [s for out in outs for s in out["samples"]][:3]
        failures.append(f"{label}: {errors} call(s) failed, e.g. {samples}")
    expected = args.clients * args.calls
    if len(latencies) + errors != expected:
        failures.append(f"{label}: {len(latencies) + errors} calls made of {expected}")
    if pesterer is not None:
        # let every kind of connection be cut at least once, even after a short load
        longest = max(args.read_timeout, args.idle_timeout) + CUT_LATE + 0.5
        time.sleep(max(0.0, pester_started + longest - time.monotonic()))
        cuts = _result(pesterer, 30)  # closing its stdin stops it
        figures["slow_cuts"] = _cut_figures(cuts["slow"], args.read_timeout, "slow", failures)
        figures["idle_cuts"] = _cut_figures(cuts["idle"], args.idle_timeout, "idle", failures)
        worst = figures["latency"]["max_ms"] / 1000
        if worst >= args.read_timeout:
            failures.append(f"{label}: a call took {worst:.2f} s, as long as the read timeout")
    return figures


def run_prepare(args: argparse.Namespace) -> int:
    settings = {
        "max_connections": args.clients + args.slow + args.idle + 32,
        "read_timeout": args.read_timeout,
        "idle_timeout": args.idle_timeout,
        "log_level": "warning",
    }
    failures: list[str] = []
    document: dict[str, Any] = {
        "command": "prepare",
        "clients": args.clients,
        "calls_per_client": args.calls,
        "large_share": args.large_share,
        "slow": args.slow,
        "idle": args.idle,
    }
    daemon = rel.Daemon(settings)
    try:
        daemon.start()
        document["rss_kib_start"] = daemon.rss_kib()
        if args.baseline:
            document["alone"] = _phase(args, daemon, False, failures, "alone")
        pester = bool(args.slow or args.idle)
        document["with_slow_and_idle" if pester else "load"] = _phase(
            args, daemon, pester, failures, "loaded"
        )
        document["rss_kib_end"] = daemon.rss_kib()
        document["rss_kib_hwm"] = rel.proc_status(daemon.pid, "VmHWM")
        if not daemon.alive():
            failures.append("the daemon died")
    finally:
        daemon.cleanup(keep=args.keep)
    return rel.emit(document, as_json=args.json, failures=failures)
