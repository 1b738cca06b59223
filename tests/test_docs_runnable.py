"""The documentation runs as written: every shell block marked runnable, against a real daemon.

A block is marked by the line ``<!-- runnable -->`` right before its opening
fence (```` ```sh ````), in README.md, docs/*.md or examples/README.md. Each
block runs with ``bash -euo pipefail`` in a fresh sandbox laid out like the
set-up the README makes with ``scripts/serve``: a copy of the checkout's
layout (its directories linked, an empty ``run/``), a private home, and a
real daemon listening on the user's socket under ``$XDG_RUNTIME_DIR`` with
``allowed_roots`` = ``run/`` and the home, as ``scripts/serve`` writes them.
Nothing tells the commands where the daemon is: they find it as a newcomer's
would. Every run has a timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scoutd.config import PromptConfig

from .support.daemon import Daemon

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- runnable -->"
BLOCK_TIMEOUT = 120.0  # seconds for one block: the agent loop replays a whole run
DOCUMENTS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "examples" / "README.md"]
)
# What the checkout holds that a block may name; `run/` is the sandbox's own.
LINKED = ("examples", "docs", "config", "scripts", "systemd", "scoutd", ".venv")
# Variables of the machine running the suite that would change what a block sees.
_HIDDEN_ENV = {
    "SCOUTD_CONFIG",
    "SCOUTD_SOCKET",
    "SCOUTD_RUN_DIR",
    "PROMPT_STRATEGY",
    *(key.upper() for key in PromptConfig.__struct_fields__),
}


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    code: str

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def runnable_blocks(document: Path) -> list[Block]:
    """The marked blocks of ``document``; a marker not followed by a sh block is an error."""
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    for index, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[index + 1] if index + 1 < len(lines) else ""
        if fence.strip() != "```sh":
            raise AssertionError(f"{document}:{index + 1}: {MARKER} must come right before ```sh")
        end = next(i for i in range(index + 2, len(lines)) if lines[i].strip() == "```")
        blocks.append(Block(document, index + 3, "\n".join(lines[index + 2 : end]) + "\n"))
    return blocks


ALL_BLOCKS = [block for document in DOCUMENTS for block in runnable_blocks(document)]


def test_the_docs_mark_their_runnable_blocks() -> None:
    """The marked blocks cover the README's set-up and shell session, and the operator guide."""
    by_document = {str(b.document.relative_to(ROOT)) for b in ALL_BLOCKS}
    assert {"README.md", "docs/OPERATIONS.md", "examples/README.md"} <= by_document
    assert len(ALL_BLOCKS) >= 10
    readme = "\n".join(b.code for b in ALL_BLOCKS if b.document.name == "README.md")
    for command in ("scoutd status", "socat", "scoutd notify", "scoutd abort", "scoutd explain"):
        assert command in readme


@pytest.fixture
def sandbox() -> Iterator[tuple[Path, dict[str, str], Daemon]]:
    """A checkout-like directory, a home, and a daemon on the user's socket (as scripts/serve)."""
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
    environ = {key: value for key, value in os.environ.items() if key not in _HIDDEN_ENV}
    bin_dir = str(Path(sys.executable).parent)
    environ.update(
        HOME=str(home),
        XDG_RUNTIME_DIR=str(runtime),
        PATH=os.pathsep.join([bin_dir, environ.get("PATH", "/usr/bin:/bin")]),
    )
    try:
        daemon.start()
        yield checkout, environ, daemon
    finally:
        daemon.cleanup()
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.name for b in ALL_BLOCKS])
def test_runnable_block(block: Block, sandbox: tuple[Path, dict[str, str], Daemon]) -> None:
    if "socat" in block.code and shutil.which("socat") is None:
        pytest.fail("socat is not installed: the documented block cannot run (apt install socat)")
    checkout, environ, daemon = sandbox
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=checkout, env=environ, capture_output=True, text=True,
        timeout=BLOCK_TIMEOUT, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"{block.name} failed ({result.returncode}):\n{block.code}\n--- stdout\n{result.stdout}"
        f"\n--- stderr\n{result.stderr}\n--- daemon log\n{daemon.log()}"
    )
    assert "Traceback" not in result.stderr, result.stderr
