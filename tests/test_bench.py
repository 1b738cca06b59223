"""Smoke test of the benchmark (scripts/bench.py): it runs and reports every figure.

Only the shape of the report is checked, never a timing: figures depend on the
machine, and the benchmark's targets are read from its output, not asserted by
the suite (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "scripts", "bench.py")

# Every figure the benchmark promises, each a positive number.
FIGURES = (
    "floor_ms_400",
    "inproc_ms_400",
    "floor_ms_2000",
    "inproc_ms_2000",
    "inproc_fresh_config_ms_2000",
    "format_scout_ms_400",
    "format_openai_chat_ms_400",
    "format_overhead_400",
    "format_scout_ms_2000",
    "format_openai_chat_ms_2000",
    "format_overhead_2000",
    "format_openai_chat_cold_ms_400",
    "format_overhead_cold_400",
    "format_openai_chat_cold_ms_2000",
    "format_overhead_cold_2000",
    "format_anthropic_ms_400",
    "format_anthropic_overhead_400",
    "format_anthropic_ms_2000",
    "format_anthropic_overhead_2000",
    "format_openai_responses_ms_400",
    "format_openai_responses_overhead_400",
    "format_openai_responses_ms_2000",
    "format_openai_responses_overhead_2000",
    "rpc_ms_2000",
    "rpc_whole_answer_ms_2000",
    "rpc_inproc_ms_2000",
    "small_rpc_us_p50",
    "small_rpc_us_p99",
    "session_round_ms_100",
    "session_round_ms_2000",
    "session_round_ms_p99_2000",
    "session_round_request_bytes_2000",
    "session_round_response_bytes_2000",
    "full_round_ms_100",
    "full_round_ms_2000",
    "abort_ms_p50",
    "abort_ms_p99",
    "abort_ms_max",
    "abort_samples",
    "rss_idle_mb",
    "rss_sessions_mb",
    "rss_per_session_kb",
    "rss_per_session_kb_no_inbox",
    "session_open_per_s",
    "rss_daemon_threads",
    "inproc_session_round_ms_2000",
    "inproc_session_round_ms_epoch_2000",
    "inproc_session_cold_ms_2000",
    "inproc_session_round_ms_repeats_2000",
    "session_round_ms_repeats_2000",
    "session_round_ms_p99_repeats_2000",
    "repeat_share",
    "startup_python_ms",
    "startup_notify_ms",
    "startup_notify_served_ms",
    "startup_abort_served_ms",
    "startup_help_ms",
    *(
        f"{figure}_{fmt}"
        for figure in ("cpu_s_per_mb", "cpu_s_per_mb_small", "cpu_growth")
        for fmt in ("anthropic", "openai_chat", "openai_responses", "scout")
    ),
)
TARGETS = {
    "inproc_ms_400 / floor_ms_400",
    "inproc_ms_2000 / floor_ms_2000",
    "rpc_ms_2000 / rpc_inproc_ms_2000",
    "session_round_ms_2000 / session_round_ms_100",
    "format_openai_chat_ms_400 / format_scout_ms_400",
    "format_openai_chat_ms_2000 / format_scout_ms_2000",
    "abort_ms_p99",
    "inproc_session_round_ms_2000",
    "session_round_ms_repeats_2000",
    "rss_per_session_kb",
    "cpu_growth_anthropic",
    "cpu_growth_openai_chat",
    "cpu_growth_openai_responses",
    "cpu_growth_scout",
    "startup_notify_ms / startup_python_ms",
    "startup_notify_served_ms / startup_python_ms",
    "startup_abort_served_ms / startup_python_ms",
    "startup_help_ms / startup_python_ms",
}


@functools.cache
def _load_bench() -> ModuleType:
    """scripts/bench.py as a module (registered: its dataclasses look themselves up)."""
    spec = importlib.util.spec_from_file_location("scoutd_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quick_results() -> dict[str, Any]:
    """One ``scripts/bench.py --quick --json`` run (real daemons, tiny sizes)."""
    proc = subprocess.run(
        [sys.executable, BENCH, "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results: dict[str, Any] = json.loads(proc.stdout)  # exactly one JSON object
    return results


def test_quick_run_reports_every_figure(quick_results: dict[str, Any]) -> None:
    """Every promised figure is there and is a positive, finite number."""
    for key in FIGURES:
        value = quick_results[key]
        assert isinstance(value, (int, float)) and not isinstance(value, bool), key
        assert value > 0 and math.isfinite(value), (key, value)
    assert quick_results["session_mode"] in ("full", "incremental")
    assert quick_results["context"]["quick"] is True


def test_quick_run_delivers_every_abort(quick_results: dict[str, Any]) -> None:
    """The abort benchmark saw each abort's notification (none timed out)."""
    assert quick_results["abort_not_delivered"] == 0
    assert quick_results["abort_samples"] == quick_results["context"]["plan"]["aborts"]


def test_quick_targets_are_reported_without_a_verdict(quick_results: dict[str, Any]) -> None:
    """Each target has its measured value and limit; tiny sizes are judged against none."""
    targets = quick_results["targets"]
    assert {t["name"] for t in targets} == TARGETS
    for target in targets:
        assert target["value"] >= 0 and target["target"] > 0
        assert target["met"] is None


def test_full_size_targets_get_a_verdict() -> None:
    """Outside quick runs each target is met exactly when its value is within its limit."""
    bench = _load_bench()
    figures = dict.fromkeys(FIGURES, 1.0) | {"abort_ms_p99": 500.0, "rpc_ms_2000": 3.0}
    figures |= {"startup_python_ms": 20.0, "startup_notify_ms": 100.0}  # 5 x: over 4 x
    figures["startup_notify_served_ms"] = 80.0  # 4 x: within
    figures["startup_abort_served_ms"] = 81.0  # just over 4 x
    targets = [
        *bench.targets(figures),
        *bench.speed_targets(figures),
        *bench.cpu_targets(figures),
        *bench.startup_targets(figures),
    ]
    assert {t["name"] for t in targets} == TARGETS
    for target in targets:
        assert isinstance(target["met"], bool)
        assert target["met"] == (target["value"] <= target["target"])
    verdicts = {t["name"]: t["met"] for t in targets}
    assert verdicts["abort_ms_p99"] is False
    assert verdicts["rpc_ms_2000 / rpc_inproc_ms_2000"] is False
    assert verdicts["rss_per_session_kb"] is True
    assert verdicts["inproc_session_round_ms_2000"] is False  # 1 ms > 0.2 ms
    assert verdicts["startup_notify_ms / startup_python_ms"] is False
    assert verdicts["startup_notify_served_ms / startup_python_ms"] is True
    assert verdicts["startup_abort_served_ms / startup_python_ms"] is False
    assert verdicts["startup_help_ms / startup_python_ms"] is True  # 1 ms / 20 ms


def test_a_start_up_run_is_timed_to_its_exit_and_a_hung_one_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The start-up figures wait for the process itself (no polling that rounds the
    figure up), fail on a failed run, and stop one that hangs."""
    _load_bench()
    startup = sys.modules["bench_startup"]
    env = dict(os.environ)
    pause = "import time; time.sleep(0.05)"
    assert startup._wall([sys.executable, "-c", pause], env) >= 0.05
    with pytest.raises(RuntimeError, match="exited with 3"):
        startup._wall([sys.executable, "-c", "raise SystemExit(3)"], env)
    monkeypatch.setattr(startup, "RUN_TIMEOUT", 0.5)
    with pytest.raises(RuntimeError, match=r"killed after 0\.5 s"):
        startup._wall([sys.executable, "-c", "import time; time.sleep(60)"], env)


def test_table_shows_figures_and_targets(quick_results: dict[str, Any]) -> None:
    """The readable report names every target and says a quick run judges none."""
    table = _load_bench().render(quick_results)
    assert "targets" in table
    for target in quick_results["targets"]:
        assert target["name"] in table
    assert "NOT MET" not in table
    assert table.count("not judged (quick)") == len(quick_results["targets"])
    assert "in-process sessions (scoutd.Session)" in table
    assert "daemon CPU seconds per request MB, worst input per format" in table
    assert "scoutd notify (a real inbox)" in table
    assert "scoutd notify, a daemon serving" in table
