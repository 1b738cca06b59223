"""Helpers for the ``scoutd`` command tests, which run it as a real subprocess.

Every run gets an explicit, empty config file through ``$SCOUTD_CONFIG`` and
none of the ``[prompt]`` environment variables, so that a config installed on
the test machine cannot change the outcome.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import scoutd
from scoutd.config import PromptConfig, resolve_config

ROOT = Path(__file__).resolve().parent.parent.parent
CLI_TIMEOUT = 60.0  # seconds for one CLI run: generous for a slow CI machine
DAEMON_START_TIMEOUT = 20.0
TOOL_ROLES = ("function_call", "function_call_output")

# Variables that would change the effective configuration of a run.
_CONFIG_ENV = {
    "SCOUTD_CONFIG",
    "SCOUTD_SOCKET",
    "PROMPT_STRATEGY",
    *(key.upper() for key in PromptConfig.__struct_fields__),
}


def clean_environ() -> dict[str, str]:
    """This process's environment without the variables that change the configuration."""
    return {k: v for k, v in os.environ.items() if k not in _CONFIG_ENV}


def run(
    home: Path,
    *args: str,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
    stdin: BinaryIO | None = None,
    program: Sequence[str] = ("-m", "scoutd"),
) -> subprocess.CompletedProcess[str]:
    """``python -m scoutd ARGS`` with a clean environment; stdout/stderr as text.

    ``prefix``: a command that runs it (``setpriv ...``, to act as another user);
    ``stdin``: a file to read instead of ``input`` (``/dev/zero``, say);
    ``program``: what Python runs instead of ``-m scoutd`` (``-c CODE``).
    """
    environ = clean_environ()
    environ["SCOUTD_CONFIG"] = str(home / "empty.toml")
    environ.update(env or {})
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(
        [*prefix, sys.executable, *program, *args],
        input=data,
        stdin=stdin,
        capture_output=True,
        env=environ,
        cwd=home,
        timeout=CLI_TIMEOUT,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed run (no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def empty_snapshot(home: Path) -> scoutd.Config:
    return resolve_config(home / "empty.toml", environ={})


def break_record(save_file: Path, how: str) -> None:
    """Put what an agent could plant in place of the chat's record directory of taken
    entries: a regular file, or a dangling symlink."""
    removed = Path(scoutd.inbox_removed_dir(str(save_file)))
    if how == "regular-file":
        removed.write_text("planted by the agent")
    else:
        removed.symlink_to(save_file.parent / "nowhere")
