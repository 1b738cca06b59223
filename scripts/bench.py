#!/usr/bin/env python3
"""scoutd's performance benchmark: ``scripts/bench [--json] [--quick]``.

Measures, on deterministic synthetic agent runs (``scoutd.simulate``), what a
prepare costs in-process and through the daemon, what an incremental session
round costs as the conversation grows, how fast an abort file reaches its
session, and how much memory the daemon spends per session. docs/PERFORMANCE.md
explains every figure and holds the results of a real run.

Method: each timing is a median over many runs after a few warm-up runs,
taken with :func:`time.perf_counter`. The in-process figures run with the
garbage collector disabled (after a full collection), so that a collection of
the benchmark's own garbage does not land in a random sample; the daemon runs
as usual, with its collector on. Progress goes to stderr; ``--json`` prints
exactly one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ensure_importable() -> None:
    """Import scoutd from this checkout; re-run under ``.venv/bin/python`` without its deps."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    scripts = os.path.dirname(os.path.abspath(__file__))  # bench_formats beside this file
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    try:
        import msgspec  # noqa: F401

        import scoutd  # noqa: F401
    except ImportError:
        venv = os.path.join(ROOT, ".venv")
        venv_python = os.path.join(venv, "bin", "python")
        # sys.prefix, not the executable: a venv's python links to its base interpreter
        if os.path.exists(venv_python) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
            os.execv(venv_python, [venv_python, os.path.abspath(__file__), *sys.argv[1:]])
        sys.exit("scripts/bench: cannot import scoutd; run scripts/install first")


_ensure_importable()

import msgspec  # noqa: E402
from bench_cpu import bench_cpu, cpu_targets  # noqa: E402
from bench_daemon import Daemon  # noqa: E402
from bench_formats import bench_formats  # noqa: E402
from bench_inproc import bench_inproc  # noqa: E402
from bench_many_sessions import bench_abort, bench_rss  # noqa: E402
from bench_plan import QUICK, SEED, Plan  # noqa: E402
from bench_report import render, targets  # noqa: E402
from bench_rpc import bench_rpc, bench_sessions  # noqa: E402
from bench_speed import bench_speed, speed_targets  # noqa: E402
from bench_startup import bench_startup, startup_targets  # noqa: E402
from bench_timing import interleaved, progress, quiet_gc  # noqa: E402

import scoutd  # noqa: E402
from scoutd.config import PromptConfig  # noqa: E402
from scoutd.simulate.workload import synthetic_run  # noqa: E402

# Environment variables that would change the daemon's or the library's behaviour.
_PROMPT_ENV = tuple(
    "PROMPT_STRATEGY" if key == "prompt_strategies" else key.upper()
    for key in PromptConfig.__struct_fields__
)


def run(plan: Plan, seed: int = SEED) -> dict[str, Any]:
    """Run every benchmark; return the results (figures, context and targets)."""
    started = time.perf_counter()
    load_before = round(os.getloadavg()[0], 2)
    results: dict[str, Any] = {}
    directory = tempfile.mkdtemp(prefix="sdb", dir="/tmp")  # short: socket paths
    saved_env = {name: os.environ.pop(name) for name in _PROMPT_ENV if name in os.environ}
    try:
        # The library and the daemon read the same file: built-in [prompt] defaults.
        rpc_daemon = Daemon(directory, "rpc", [directory])
        os.environ["SCOUTD_CONFIG"] = rpc_daemon.config_path
        progress("generating the synthetic conversations")
        small = synthetic_run(plan.small, seed=seed).messages
        large = synthetic_run(plan.large, seed=seed).messages
        long_run = synthetic_run(plan.session_large + plan.session_rounds, seed=seed).messages
        results["conversations"] = {
            str(key): {
                "calls": calls,
                "messages": len(m),
                "chars": sum(len(x["content"]) for x in m),
            }
            for key, calls, m in ((400, plan.small, small), (2000, plan.large, large))
        }
        progress(f"floor and in-process prepare_prompt, {plan.small} calls")
        bench_inproc(results, 400, small, plan.inproc_runs_small, plan.warmup, fresh=False)
        progress(f"floor and in-process prepare_prompt, {plan.large} calls")
        bench_inproc(results, 2000, large, plan.inproc_runs_large, plan.warmup, fresh=True)
        for key, runs, messages in (
            (400, plan.inproc_runs_small, small),
            (2000, plan.inproc_runs_large, large),
        ):
            progress(f"OpenAI Chat format against scout format, {len(messages)} messages")
            bench_formats(results, key, messages, runs, plan.warmup, interleaved)
        rescan_interval = scoutd.load_config().daemon.rescan_interval

        sessions_dir = os.path.join(directory, "sessions")
        os.makedirs(sessions_dir)
        with rpc_daemon as daemon:
            bench_rpc(results, daemon, large, small[: plan.small_messages], plan)
            bench_sessions(results, daemon, sessions_dir, long_run, plan)
            progress("in-process and repeat-heavy session rounds")
            bench_speed(results, daemon, sessions_dir, plan, seed, quiet_gc=quiet_gc)

        abort_dir = os.path.join(directory, "aborts")
        os.makedirs(abort_dir)
        with Daemon(directory, "abort", [abort_dir]) as daemon:
            bench_abort(results, daemon, abort_dir, plan)

        for inboxes in (True, False):
            name = "rss" if inboxes else "rss-bare"
            rss_dir = os.path.join(directory, name)
            os.makedirs(rss_dir)
            with Daemon(directory, name, [rss_dir]) as daemon:
                figures = bench_rss(daemon, rss_dir, plan, inboxes=inboxes)
            suffix = "" if inboxes else "_no_inbox"
            if inboxes:
                results["rss_idle_mb"] = figures["idle_mb"]
                results["rss_session_count"] = plan.rss_sessions
            results[f"rss_sessions_mb{suffix}"] = figures["loaded_mb"]
            results[f"rss_per_session_kb{suffix}"] = figures["per_session_kb"]
            results[f"session_open_per_s{suffix}"] = figures["open_per_s"]
            results[f"rss_daemon_threads{suffix}"] = figures["threads"]
            results[f"rss_inotify{suffix}"] = figures["inotify"]

        bench_startup(results, plan.startup_runs, progress)
        sizes = (plan.cpu_small_mb, plan.cpu_large_mb)
        bench_cpu(results, directory, sizes, plan.cpu_runs, plan.cpu_sample_s, progress)
    finally:
        os.environ.pop("SCOUTD_CONFIG", None)
        os.environ.update(saved_env)
        shutil.rmtree(directory, ignore_errors=True)
    results["targets"] = [
        *targets(results),
        *speed_targets(results),
        *cpu_targets(results),
        *startup_targets(results),
    ]
    for target in results["targets"] if plan != Plan() else ():
        target["met"] = None  # tiny sizes: the full-size targets say nothing about them
    results["context"] = {
        "quick": plan != Plan(),
        "plan": asdict(plan),
        "seed": seed,
        "scoutd": scoutd.__version__,
        "python": platform.python_version(),
        "msgspec": msgspec.__version__,
        "platform": platform.platform(terse=True),
        "cpus": os.cpu_count(),
        "inproc_config": "snapshot (load_config() once); inproc_fresh_config reads it per call",
        "gc": "disabled during in-process and client-side timed loops",
        "rescan_interval_s": rescan_interval,
        "load_average_1min": [load_before, round(os.getloadavg()[0], 2)],
        "seconds": round(time.perf_counter() - started, 1),
    }
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description="scoutd performance benchmark (docs/PERFORMANCE.md)",
        epilog="scripts/bench --fleet [--json]: the fleet's figures instead"
        " (scripts/bench_fleet.py; needs redis-server)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the conversations")
    args = parser.parse_args(argv)
    results = run(QUICK if args.quick else Plan(), args.seed)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
