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

# The daemon harness shared with the test suite, and its figures.
from scoutd import testing  # noqa: E402
from scoutd.cli.arg_types import integer, real  # noqa: E402
from scoutd.testing import (  # noqa: E402
    LineClient,
    conversation,
    cpu_seconds,
    inotify_usage,
    open_fds,
    percentile,
    proc_status,
    summary_ms,
    toml_text,
    wait_for,
)

__all__ = [
    "ROOT",
    "at_least",
    "fraction",
    "STOP_TIMEOUT",
    "Daemon",
    "LineClient",
    "conversation",
    "cpu_seconds",
    "emit",
    "inotify_usage",
    "non_negative",
    "open_fds",
    "percentile",
    "positive_seconds",
    "proc_status",
    "stop_process",
    "summary_ms",
    "toml_text",
    "wait_for",
]

START_TIMEOUT = 20.0  # seconds for a daemon to answer `status` after exec
STOP_TIMEOUT = 15.0  # seconds for SIGTERM before SIGKILL


class Daemon(testing.Daemon):
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


# Option types (scoutd.cli.arg_types): a count of 0 or less made a run check nothing
# and call it a pass, divide by zero, or wait out a timeout; refused before it starts.
at_least = integer
positive_seconds = real(0.0, above=True)
non_negative = real(0.0)  # a rate where 0 means no limit
fraction = real(0.0, maximum=1.0)


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
