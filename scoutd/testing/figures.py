"""Figures shared by the test suite and the scripts: percentiles, a workload, /proc readings."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from typing import Any

from ..server.metrics import percentile

__all__ = [
    "conversation",
    "cpu_seconds",
    "inotify_usage",
    "open_fds",
    "percentile",
    "proc_status",
    "summary_ms",
]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/max of durations given in seconds, in milliseconds."""
    return {
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        "p99_ms": round(percentile(seconds, 0.99) * 1000, 3),
        "max_ms": round(max(seconds, default=0.0) * 1000, 3),
    }


def conversation(
    pairs: int = 120,
    *,
    output_size: int = 700,
    tag: str = "",
    user_every: int = 25,
    ensure_ascii: bool = True,
    repeat_every: int = 0,
) -> list[dict[str, Any]]:
    """A system prompt, a task, then ``pairs`` tool call/output pairs with user turns.

    Pair ``n``'s call is message ``2 + 2 * n`` when ``user_every`` is 0, which
    drops the user turns that otherwise come after every ``user_every`` pairs.
    The calls carry non-ASCII arguments long enough to be shortened and a key
    of their own (``extra``) that every strategy must pass through; an output
    is ``output_size`` characters of lines. ``ensure_ascii=False`` writes the
    bodies' non-ASCII text as itself rather than as ``\\u`` escapes, for the
    tests that check it comes out as UTF-8. With ``repeat_every`` > 0, every
    that-many-th call (after the first) repeats the first call's arguments
    exactly, under an id of its own.
    """
    task = f"Fix the failing test {tag}." if tag else "Fix the failing test."
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": task},
    ]
    for n in range(pairs):
        repeat = repeat_every > 0 and n > 0 and n % repeat_every == 0
        args = {"path": f"/src/{n % 37}.py", "pattern": "é/" * 130 + str(n)}
        if repeat:
            args = {"path": "/src/0.py", "pattern": "é/" * 130 + "0"}
        call = {"name": "grep", "arguments": args, "id": f"c{n}"}
        out = {"name": "grep", "content": f"{n}:" + "line\n" * (output_size // 5), "id": f"c{n}"}
        messages.append(
            {
                "role": "function_call",
                "content": json.dumps(call, ensure_ascii=ensure_ascii),
                "extra": n,
            }
        )
        messages.append({"role": "function_call_output", "content": json.dumps(out)})
        if user_every and n % user_every == user_every - 1:
            messages.append({"role": "user", "content": f"progress check {n}"})
    return messages


# --- /proc figures of a process --------------------------------------------------------


def proc_status(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM, Threads...); 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (from /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def inotify_usage(pid: int) -> tuple[int, int]:
    """``(instances, watches)``: the inotify instances ``pid`` holds and their watches."""
    instances = watches = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                    continue
                instances += 1
                with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
                    watches += sum(1 for line in info if line.startswith("inotify wd:"))
    return instances, watches


def open_fds(pid: int) -> int:
    """File descriptors ``pid`` holds open; 0 if unreadable."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0
