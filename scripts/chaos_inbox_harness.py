"""The driver's side of ``scripts/chaos-inbox``: its worker processes and their logs.

Workers are the ``scripts/chaos-inbox`` executable run again (``_produce``,
``_consume``, ``_race``; ``chaos_inbox_workers.py``): spawned, waited for by the
line they print, SIGKILLed; their delivery logs read back.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
from typing import Any

import _reliability as rel

# the executable that runs the workers (``chaos-inbox _produce ...``)
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chaos-inbox")
NOTICE = re.compile(r"^notice (\d+)$")
READY_TIMEOUT = 20.0  # seconds for a consumer process to import scoutd and say "ready"
DRAIN_TIMEOUT = 60.0  # seconds for the last consumer to empty the inbox
IDLE_SLEEP = 0.001  # seconds between polls of an empty inbox


def spawn(*args: str, stdin: bool = False) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (rel.ROOT, env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, SCRIPT, *args],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_line(proc: subprocess.Popen[str], expected: str, timeout: float) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != expected:
        raise RuntimeError(f"worker {proc.pid} said {line!r} instead of {expected!r}")


def sigkill(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(rel.STOP_TIMEOUT)


def read_log(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.rstrip("\n") for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def visible(directory: str) -> list[str]:
    """The names in ``directory`` that are not dotfiles ([] when it does not exist)."""
    try:
        return [name for name in os.listdir(directory) if not name.startswith(".")]
    except FileNotFoundError:
        return []
