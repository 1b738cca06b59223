"""The sizes of ``scripts/bench``: a full run's :class:`Plan` and the ``--quick`` one."""

from __future__ import annotations

from dataclasses import dataclass

SEED = 20240501  # any fixed seed: the same seed gives the same conversations


@dataclass(frozen=True, slots=True)
class Plan:
    """Sizes and repetitions. Keys of the output keep the nominal sizes' names."""

    small: int = 400  # tool calls of the smaller conversation
    large: int = 2000  # tool calls of the larger one
    warmup: int = 3
    inproc_runs_small: int = 61
    inproc_runs_large: int = 31
    rpc_runs: int = 31
    small_rpc_calls: int = 2001
    small_messages: int = 20
    session_small: int = 100  # tool calls before the first timed session round
    session_large: int = 2000
    session_rounds: int = 200
    abort_sessions: int = 1000
    abort_dirs: int = 20
    abort_connections: int = 4
    aborts: int = 100
    abort_budget: float = 90.0  # seconds for all aborts; fewer samples beyond (reported)
    rss_sessions: int = 10_000
    rss_dirs: int = 100
    rss_connections: int = 8
    cpu_small_mb: float = 1.0  # request size of the CPU-per-MB figures, and four times it
    cpu_large_mb: float = 4.0
    cpu_runs: int = 3
    cpu_sample_s: float = 0.5  # daemon CPU time of one sample, at least
    startup_runs: int = 21  # runs of each light verb and of `python -c pass`


QUICK = Plan(
    small=30,
    large=60,
    warmup=1,
    inproc_runs_small=5,
    inproc_runs_large=5,
    rpc_runs=5,
    small_rpc_calls=51,
    session_small=10,
    session_large=60,
    session_rounds=5,
    abort_sessions=12,
    abort_dirs=3,
    abort_connections=2,
    aborts=5,
    abort_budget=30.0,
    rss_sessions=200,
    rss_dirs=4,
    rss_connections=2,
    cpu_small_mb=0.05,
    cpu_large_mb=0.2,
    cpu_runs=1,
    cpu_sample_s=0.02,
    startup_runs=3,
)
