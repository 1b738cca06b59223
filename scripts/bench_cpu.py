"""The CPU-per-megabyte figures of ``scripts/bench`` (docs/PERFORMANCE.md).

What one request costs the daemon, in CPU seconds per megabyte (10^6 bytes)
of request line, for the most costly conversation we can build in each format
(``scoutd/testing/worst.py``: Anthropic user turns holding a result and a text
block, parallel calls answered out of order, repeated call ids, ...), prepared
with the strategies that compact them. The daemon's CPU time is read from
/proc before and after the requests, so it counts decoding, the view, the
strategies, the rebuild and encoding the answer, in every thread.

Each format's worst conversation is found at the small size, then timed at the
small and the large size: ``cpu_s_per_mb_<format>`` is the large one's figure
and ``cpu_growth_<format>``, the ratio of the two, is a target (a linear path
costs the same per megabyte at any size; a quadratic one four times as much
for four times the size). Imported by ``scripts/bench.py``.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable, Iterator
from typing import Any

from scoutd.testing import Daemon, LineClient, cpu_seconds
from scoutd.testing.worst import WORST, Builder

__all__ = ["CPU_GROWTH_LIMIT", "bench_cpu", "cpu_targets", "render_cpu"]

# cpu_s_per_mb at four times the size over cpu_s_per_mb at the base size, at most.
CPU_GROWTH_LIMIT = 1.5
# The strategies each conversation is prepared with, by their short name in the report.
STRATEGIES = {"default": "shorten_tools_cost_aware,inbox", "epoch": "shorten_tools_epoch"}
MAX_REPEATS = 200  # requests a sample sends, at most
# A context window small enough that the default strategy compacts these runs.
PROMPT = {"context_window": 20_000}
TITLES = {
    "openai-chat": "OpenAI Chat",
    "openai-responses": "OpenAI Responses",
    "anthropic": "Anthropic",
    "scout": "scout",
}


def _key(fmt: str) -> str:
    return fmt.replace("-", "_")


def _sized(builder: Builder, megabytes: float) -> list[dict[str, Any]]:
    """``builder``'s conversation of about ``megabytes`` of JSON."""
    per_turn = len(json.dumps(builder(100))) / 100
    return builder(max(1, int(megabytes * 1e6 / per_turn)))


def _line(messages: list[dict[str, Any]], fmt: str, strategies: str) -> bytes:
    params = {"messages": messages, "format": fmt, "strategies": strategies, "config": PROMPT}
    request = {"jsonrpc": "2.0", "id": 1, "method": "prepare_prompt", "params": params}
    return json.dumps(request).encode() + b"\n"


def _cpu_per_mb(
    daemon: Daemon, client: LineClient, line: bytes, runs: int, sample_cpu: float
) -> float:
    """Median daemon CPU seconds per MB of ``line`` over ``runs`` samples, each of as
    many requests as take ``sample_cpu`` seconds (the clock counts in 10 ms ticks)."""
    samples = []
    for _ in range(runs):
        before, sent = cpu_seconds(daemon.pid), 0
        while sent < MAX_REPEATS:
            client.send_raw(line)
            answer = client.recv(timeout=600)
            assert "result" in answer, str(answer)[:300]
            sent += 1
            if cpu_seconds(daemon.pid) - before >= sample_cpu:
                break
        samples.append((cpu_seconds(daemon.pid) - before) / (sent * len(line) / 1e6))
    return statistics.median(samples)


def bench_cpu(
    results: dict[str, Any],
    directory: str,
    sizes: tuple[float, float],
    runs: int,
    sample_cpu: float,
    progress: Callable[[str], None],
) -> None:
    """``cpu_s_per_mb_<format>``, ``cpu_growth_<format>`` and ``cpu_worst_<format>``."""
    small, large = sizes
    cpu_dir = os.path.join(directory, "cpu")
    os.makedirs(cpu_dir)
    limits = {"log_level": "warning", "max_request_bytes": 256 * 1024 * 1024}
    daemon = Daemon(daemon=limits, directory=cpu_dir, name="cpu")
    with daemon, daemon.connect(600) as client:
        for fmt, builders in WORST.items():
            progress(f"daemon CPU per request MB, {TITLES[fmt]} format")
            found = []
            for builder in builders:
                messages = _sized(builder, small)
                for short, strategies in STRATEGIES.items():
                    line = _line(messages, fmt, strategies)
                    cost = _cpu_per_mb(daemon, client, line, 1, sample_cpu)
                    found.append((cost, builder, short))
            _, worst, short = max(found, key=lambda f: f[0])
            strategies = STRATEGIES[short]
            lines = [_line(_sized(worst, size), fmt, strategies) for size in (small, large)]
            costs = [_cpu_per_mb(daemon, client, line, runs, sample_cpu) for line in lines]
            key = _key(fmt)
            results[f"cpu_s_per_mb_{key}"] = round(costs[1], 4)
            results[f"cpu_s_per_mb_small_{key}"] = round(costs[0], 4)
            results[f"cpu_growth_{key}"] = round(costs[1] / costs[0], 3) if costs[0] else 0.0
            results[f"cpu_worst_{key}"] = f"{worst.__name__}, {short}"
    results["cpu_sizes_mb"] = [small, large]


def cpu_targets(results: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Linearity: CPU per MB at the large size over the small one, each format."""
    for fmt in WORST:
        value = results[f"cpu_growth_{_key(fmt)}"]
        yield {
            "name": f"cpu_growth_{_key(fmt)}",
            "value": value,
            "target": CPU_GROWTH_LIMIT,
            "met": value <= CPU_GROWTH_LIMIT,
        }


def render_cpu(results: dict[str, Any], row: Callable[..., str]) -> list[str]:
    """The report's lines for these figures."""
    small, large = results["cpu_sizes_mb"]
    lines = [
        "daemon CPU seconds per request MB, worst input per format:"
        f" {large:g} MB / {small:g} MB requests"
    ]
    for fmt in WORST:
        key = _key(fmt)
        base, growth = results[f"cpu_s_per_mb_small_{key}"], results[f"cpu_growth_{key}"]
        lines.append(
            row(
                f"{TITLES[fmt]}: {results[f'cpu_worst_{key}']}",
                f"{results[f'cpu_s_per_mb_{key}']:.3f} s",
                f"/ {base:.3f} s, x{growth:.2f}",
            )
        )
    return lines
