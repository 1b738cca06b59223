"""A progress bar on standard error, for replays that take more than a moment.

Drawn only when the stream is a terminal and only once the work has run for
``delay`` seconds, so pipes, logs and quick runs see nothing of it.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]

WIDTH = 30


class Progress:
    """Counts ``done`` out of ``total`` steps (None: unknown) and redraws one line in place."""

    def __init__(
        self, total: int | None, label: str, *, stream: TextIO | None = None, delay: float = 1.5
    ) -> None:
        self.total = None if total is None else max(total, 1)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.delay = delay
        self.started = time.monotonic()
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.drawn = False

    def update(self, done: int) -> None:
        """Record ``done`` steps; draw when enabled and past the delay."""
        if not self.enabled or time.monotonic() - self.started < self.delay:
            return
        if self.total is None:  # no bar: only how many are done
            self.stream.write(f"\r{self.label} {' ' * (WIDTH + 2)} {done}")
        else:
            filled = WIDTH * min(done, self.total) // self.total
            bar = "#" * filled + "-" * (WIDTH - filled)
            self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total}")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Erase the bar (if one was drawn)."""
        if self.drawn:
            self.stream.write("\r" + " " * (len(self.label) + WIDTH + 24) + "\r")
            self.stream.flush()
            self.drawn = False
