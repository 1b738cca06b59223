"""The documentation runs as written: every document's runnable blocks, in order, in one shell.

A block is marked by the line ``<!-- runnable -->`` right before its opening
fence (```` ```sh ````), in README.md, docs/*.md or examples/README.md. A
reader runs a document's blocks one after the other in one terminal, so the
tests do too: the blocks of one document run in document order in a single
``bash -euo pipefail`` session (a ``cd`` or a variable of one block is there
for the next), in a fresh sandbox laid out as the README's set-up with
``scripts/serve`` leaves it (tests/support/serve_sandbox.py): a real daemon on
the user's socket that the commands find by themselves. Every run has a
timeout; a failure names the block that failed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from .support.serve_sandbox import serve_sandbox

# Long (tests/conftest.py starts the tests marked slow first).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- runnable -->"
BLOCK_TIMEOUT = 120.0  # seconds per block: the agent loop replays a whole run
DOCUMENTS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "examples" / "README.md"]
)
BEGIN = "@@ scoutd-docs block "


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


def session_script(blocks: list[Block]) -> str:
    """One shell script: the blocks in order, each announced on stdout and stderr."""
    parts = []
    for block in blocks:
        announce = f"{BEGIN}{block.name}"
        parts.append(f"printf '%s\\n' '{announce}'; printf '%s\\n' '{announce}' >&2\n{block.code}")
    return "\n".join(parts)


def outputs(text: str) -> dict[str, str]:
    """A session's output cut at the announcements: block name -> what it printed."""
    found: dict[str, str] = {}
    name = ""
    for line in text.splitlines(keepends=True):
        if line.startswith(BEGIN):
            name = line[len(BEGIN) :].strip()
            found[name] = ""
        elif name:
            found[name] += line
    return found


SESSIONS = {
    str(document.relative_to(ROOT)): runnable_blocks(document)
    for document in DOCUMENTS
    if runnable_blocks(document)
}
ALL_BLOCKS = [block for blocks in SESSIONS.values() for block in blocks]


def test_the_docs_mark_their_runnable_blocks() -> None:
    """The marked blocks cover the README's set-up and walkthrough, and the operator guide."""
    assert {"README.md", "docs/OPERATIONS.md", "docs/FORMATS.md", "examples/README.md"} <= set(
        SESSIONS
    )
    assert len(ALL_BLOCKS) >= 12
    readme = "\n".join(b.code for b in SESSIONS["README.md"])
    for command in (
        "scoutd status",
        "socat",
        "scoutd notify ~/chats/a1/agent.chat",
        "scoutd abort ~/chats/a1/agent.chat",
        "scoutd explain",
        "python examples/agent_loop.py",
    ):
        assert command in readme


def test_a_session_carries_a_block_over_to_the_next() -> None:
    """What one block leaves (a directory, a variable) is there for the next, as for a reader."""
    doc = ROOT / "README.md"
    blocks = [Block(doc, 1, "cd /\nVALUE=kept\n"), Block(doc, 2, 'echo "$PWD $VALUE"\n')]
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", session_script(blocks)],
        capture_output=True, text=True, timeout=BLOCK_TIMEOUT, check=False,
    )  # fmt: skip
    assert outputs(result.stdout)["README.md:2"] == "/ kept\n"


def _check_readme(printed: dict[str, str]) -> None:
    """The README's walkthrough tells one story: a compaction, the notice once, the abort."""
    everything = "".join(printed.values())
    notice = "operator notice: 'Please wrap up and write the summary.'"
    assert everything.count(notice) == 1, everything
    walkthrough = next(text for text in printed.values() if notice in text)
    assert "; compacted: " in walkthrough
    assert re.search(r"\d+% less, compacted in \d+ of \d+ rounds", walkthrough), walkthrough
    assert "aborted by the operator: Runaway loop, stopping." in everything
    assert "exit status 3" in everything
    # The output the README shows is the output a newcomer gets, figures and all
    # (they went stale once when the default changed): the loop is deterministic.
    shown = re.findall(r"^(?:round \d+|done): .*$", (ROOT / "README.md").read_text(), re.M)
    assert len(shown) >= 3, shown
    printed_lines = walkthrough.splitlines()
    for line in shown:
        assert line in printed_lines, f"the README shows {line!r}; the loop printed:\n{walkthrough}"


EXPECTED = {"README.md": _check_readme}


@pytest.mark.parametrize("document", sorted(SESSIONS))
def test_the_document_runs_as_one_session(document: str) -> None:
    blocks = SESSIONS[document]
    if any("socat" in block.code for block in blocks) and shutil.which("socat") is None:
        pytest.fail("socat is not installed: the documented session cannot run (apt install socat)")
    with serve_sandbox() as sandbox:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", session_script(blocks)],
            cwd=sandbox.checkout, env=sandbox.environ, capture_output=True, text=True,
            timeout=BLOCK_TIMEOUT * len(blocks), check=False,
        )  # fmt: skip
        log = sandbox.daemon.log()
    failed = [*outputs(result.stderr)] or ["(before the first block)"]
    assert result.returncode == 0, (
        f"{document}: the session failed ({result.returncode}) in block {failed[-1]}"
        f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}\n--- daemon log\n{log}"
    )
    assert "Traceback" not in result.stderr, result.stderr
    check = EXPECTED.get(document)
    if check is not None:
        check(outputs(result.stdout))
