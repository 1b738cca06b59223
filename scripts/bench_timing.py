"""Timing for ``scripts/bench``: medians in milliseconds, the collector kept quiet,
functions timed in turn; and the progress lines on stderr."""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator


def progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect now, then keep the collector off for a timed loop."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.collect()


def interleaved(
    fns: dict[str, Callable[[], object]], runs: int, warmup: int
) -> dict[str, list[float]]:
    """Time each function once per round, ``warmup + runs`` rounds; keep the last ``runs``.

    Interleaving puts the same machine noise on every function, so their ratio
    is fair even when the machine is busy.
    """
    samples: dict[str, list[float]] = {name: [] for name in fns}
    clock = time.perf_counter
    with quiet_gc():
        for round_number in range(warmup + runs):
            for name, fn in fns.items():
                start = clock()
                fn()
                elapsed = clock() - start
                if round_number >= warmup:
                    samples[name].append(elapsed)
    return samples
