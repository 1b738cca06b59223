"""The blocking client is generated from the async one, and a stale copy is caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNASYNC = ROOT / "scripts" / "unasync"
CLIENT = ROOT / "scoutd" / "client"


def unasync(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(UNASYNC), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_committed_blocking_client_is_current() -> None:
    done = unasync("--check")
    assert done.returncode == 0, done.stderr


def test_a_stale_blocking_client_is_detected(tmp_path: Path) -> None:
    source, target = tmp_path / "_async.py", tmp_path / "_sync.py"
    shutil.copy(CLIENT / "_async.py", source)
    shutil.copy(CLIENT / "_sync.py", target)
    assert unasync("--check", source, target).returncode == 0
    # a change to the source that was not regenerated
    source.write_text(source.read_text().replace("CLOSE_GRACE = 5.0", "CLOSE_GRACE = 7.0"))
    done = unasync("--check", source, target)
    assert done.returncode == 1
    assert "stale" in done.stderr and "CLOSE_GRACE = 7.0" in done.stderr
    # regenerating makes it current again, with the change in it
    assert unasync(source, target).returncode == 0
    assert "CLOSE_GRACE = 7.0" in target.read_text()
    assert unasync("--check", source, target).returncode == 0


def test_a_hand_edit_of_the_generated_file_is_detected(tmp_path: Path) -> None:
    source, target = tmp_path / "_async.py", tmp_path / "_sync.py"
    shutil.copy(CLIENT / "_async.py", source)
    target.write_text((CLIENT / "_sync.py").read_text() + "\n# a local fix\n")
    assert unasync("--check", source, target).returncode == 1


def test_the_generated_client_has_no_async_left() -> None:
    text = (CLIENT / "_sync.py").read_text() + (CLIENT / "_sync_connection.py").read_text()
    for word in ("async ", "await ", "anyio", "AsyncSession", "AsyncClient", "aclose"):
        assert word not in text, word
