"""Shared helpers of the reliability scripts (``chaos-inbox``, ``fuzz-rpc``, ``load``).

The scripts run from a checkout: ``scripts/load ...`` re-executes itself with the
checkout's ``.venv/bin/python`` when the running interpreter cannot import scoutd.
Each script starts its own daemon (``python -m scoutd serve``) in a short temp dir
under /tmp (Unix socket paths must stay under 108 bytes), talks to it only over
that Unix socket, bounds every wait and loop, and prints one JSON object of
figures on stdout (``--json``) or a readable summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _use_the_checkout() -> None:
    """Import scoutd from this checkout; re-exec with its virtualenv if needed."""
    if ROOT not in sys.path:
        sys.path.insert(1, ROOT)
    try:
        import msgspec  # noqa: F401
        import watchdog  # noqa: F401
    except ImportError:
        venv = os.path.join(ROOT, ".venv")
        python = os.path.join(venv, "bin", "python")
        # compare prefixes: the venv's python is often a symlink to this very binary
        if os.path.exists(python) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
            os.execv(python, [python, *sys.argv])
        raise


_use_the_checkout()

# The daemon harness of the test suite (importable: the checkout is on sys.path).
from tests.support import daemon as suite  # noqa: E402

LineClient = suite.LineClient
toml_text = suite.toml_text
wait_for = suite.wait_for

START_TIMEOUT = 20.0  # seconds for a daemon to answer `status` after exec
STOP_TIMEOUT = 15.0  # seconds for SIGTERM before SIGKILL


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1) of ``values``; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p99/max of durations given in seconds, in milliseconds."""
    return {
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        "p99_ms": round(percentile(seconds, 0.99) * 1000, 3),
        "max_ms": round(max(seconds, default=0.0) * 1000, 3),
    }


def proc_status(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM, ...), in KiB; 0 if unreadable."""
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
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


class Daemon(suite.Daemon):
    """The test suite's daemon harness with the campaign's defaults.

    ``settings`` become the ``[daemon]`` table (logs at info, the configured
    rescan interval), ``prefix`` wraps the command (e.g. a ``ulimit``), and
    ``starts`` counts the starts (the chaos run kills and restarts it).
    """

    def __init__(
        self,
        settings: Mapping[str, Any] | None = None,
        *,
        prompt: Mapping[str, Any] | None = None,
        prefix: Sequence[str] = (),
        directory: str | None = None,
    ) -> None:
        super().__init__(
            prompt=prompt,
            daemon={"log_level": "info", "rescan_interval": 5.0, **(settings or {})},
            argv_prefix=prefix,
            directory=directory,
        )
        self.settings = self.daemon
        self.starts = 0

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> Daemon:
        self.starts += 1
        super().start(wait=wait, timeout=timeout)
        return self


def conversation(pairs: int, *, output_size: int = 700, tag: str = "") -> list[dict[str, Any]]:
    """A system prompt, a task, then ``pairs`` tool call/output pairs with user turns."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": f"Fix the failing test {tag}."},
    ]
    for n in range(pairs):
        args = {"path": f"/src/{n % 37}.py", "pattern": "é/" * 60 + str(n)}
        call = {"name": "grep", "arguments": args, "id": f"c{n}"}
        out = {"name": "grep", "content": f"{n}:" + "line\n" * (output_size // 5), "id": f"c{n}"}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(out)})
        if n % 25 == 24:
            messages.append({"role": "user", "content": f"progress check {n}"})
    return messages


def emit(result: Mapping[str, Any], *, as_json: bool, failures: Iterable[str]) -> int:
    """Print the figures (JSON or readable) and the failed checks; return the exit code."""
    failed = list(failures)
    document = {**result, "ok": not failed, "failures": failed}
    if as_json:
        print(json.dumps(document, indent=None, sort_keys=False))
    else:
        print(json.dumps(document, indent=2, sort_keys=False))
    for failure in failed:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failed else 0


def stop_process(proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; always reaps."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
