"""The daemon harness of the suite: :mod:`scoutd.testing`, shared with ``scripts/``."""

from __future__ import annotations

import time

from scoutd.testing import Daemon, InProcessDaemon, LineClient, conversation, toml_text, wait_for

__all__ = [
    "Daemon",
    "InProcessDaemon",
    "LineClient",
    "conversation",
    "session_count",
    "sessions_settled",
    "toml_text",
    "wait_for",
]


def session_count(daemon: Daemon) -> int:
    """The sessions the daemon holds now."""
    found: int = daemon.status()["counts"]["sessions"]
    return found


def sessions_settled(daemon: Daemon, expected: int, timeout: float = 1.5) -> int:
    """The daemon's session count once it is ``expected`` or less, else the last one
    seen after ``timeout`` seconds (a session a client closes ends a moment later)."""
    deadline = time.monotonic() + timeout
    while True:
        found = session_count(daemon)
        if found <= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.02)
