"""Smoke test of ``scripts/bench --fleet``: it runs and reports every figure (none is timed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from scoutd.testing import ROOT

FIGURES = (
    "publish_per_s",
    "commands_per_s",
    "abort_p50_ms",
    "abort_p99_ms",
    "all_abort_p50_ms",
    "all_abort_max_ms",
    "redis_used_memory_bytes",
)


def test_the_fleet_bench_reports_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "bench_fleet.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    results = json.loads(done.stdout)
    assert all(results[key] > 0 for key in FIGURES), results
    # every abort was seen by its session: one per single-chat abort, the rest at once
    assert results["abort_count"] + results["all_abort_sessions"] == 2 * 5
