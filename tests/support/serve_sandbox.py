"""A sandbox laid out as the README's set-up with ``scripts/serve`` leaves a newcomer.

A copy of the checkout's layout (its directories linked, an empty ``run/``), a
private home, and a real daemon listening on the user's socket under
``$XDG_RUNTIME_DIR`` with ``allowed_roots`` = ``run/`` and the home, as
``scripts/serve`` writes them. Nothing tells a command where the daemon is: it
finds it as a newcomer's would.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scoutd.config import PromptConfig

from .daemon import Daemon

ROOT = Path(__file__).resolve().parents[2]
# What the checkout holds that a document may name; `run/` is the sandbox's own.
LINKED = ("examples", "docs", "config", "scripts", "systemd", "scoutd", "tests", ".venv")
# Variables of the machine running the suite that would change what a command sees.
HIDDEN_ENV = {
    "SCOUTD_CONFIG",
    "SCOUTD_SOCKET",
    "SCOUTD_RUN_DIR",
    "PROMPT_STRATEGY",
    *(key.upper() for key in PromptConfig.__struct_fields__),
}


@dataclass(frozen=True)
class Sandbox:
    checkout: Path
    home: Path
    environ: dict[str, str]
    daemon: Daemon


@contextmanager
def serve_sandbox() -> Iterator[Sandbox]:
    """The sandbox, its daemon started; everything removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="sd"))
    checkout, home, runtime = top / "co", top / "h", top / "x"
    for directory in (checkout / "run", home, top / "d"):
        directory.mkdir(parents=True)
    (runtime / "scoutd").mkdir(parents=True, mode=0o700)
    runtime.chmod(0o700)
    for name in LINKED:
        if (ROOT / name).exists():
            (checkout / name).symlink_to(ROOT / name)
    daemon = Daemon(
        directory=str(top / "d"),
        daemon={"allowed_roots": [str(checkout / "run"), str(home)], "shutdown_timeout": 2.0},
    )
    daemon.socket_path = str(runtime / "scoutd" / "scoutd.sock")  # the user's socket
    daemon.daemon["socket_path"] = daemon.socket_path
    daemon.write_config()
    environ = {key: value for key, value in os.environ.items() if key not in HIDDEN_ENV}
    bin_dir = str(Path(sys.executable).parent)
    environ.update(
        HOME=str(home),
        XDG_RUNTIME_DIR=str(runtime),
        PATH=os.pathsep.join([bin_dir, environ.get("PATH", "/usr/bin:/bin")]),
    )
    try:
        daemon.start()
        yield Sandbox(checkout, home, environ, daemon)
    finally:
        daemon.cleanup()
        shutil.rmtree(top, ignore_errors=True)
