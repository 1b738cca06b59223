"""In-process figures of ``scripts/bench``: ``prepare_prompt`` against the floor (decoding
each tool message once, what no strategy can do without)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from bench_timing import interleaved, ms

import scoutd
from scoutd.strategies.tool_messages import TOOL_ROLES


def floor_fn(messages: Sequence[dict[str, Any]]) -> Callable[[], object]:
    """Decode every tool message's JSON once: what no strategy can do without."""
    decode = msgspec.json.Decoder().decode
    roles = TOOL_ROLES

    def floor() -> None:
        for message in messages:
            if message["role"] in roles:
                decode(message["content"])

    return floor


def bench_inproc(
    results: dict[str, Any],
    key: int,
    messages: list[dict[str, Any]],
    runs: int,
    warmup: int,
    *,
    fresh: bool,
) -> None:
    """``floor_ms_N``, ``inproc_ms_N`` (config snapshot) and maybe the fresh-config figure.

    ``key`` names the figures (the nominal size, also in quick mode).
    """
    snapshot = scoutd.load_config()
    fns: dict[str, Callable[[], object]] = {
        "floor": floor_fn(messages),
        "inproc": lambda: scoutd.prepare_prompt(messages, config=snapshot),
    }
    if fresh:
        fns["fresh"] = lambda: scoutd.prepare_prompt(messages)
    samples = interleaved(fns, runs, warmup)
    results[f"floor_ms_{key}"] = ms(statistics.median(samples["floor"]))
    results[f"inproc_ms_{key}"] = ms(statistics.median(samples["inproc"]))
    if fresh:
        results[f"inproc_fresh_config_ms_{key}"] = ms(statistics.median(samples["fresh"]))
