"""``scripts/install``: its help and its mistakes are told in one line, before pip runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60.0


def install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "scripts" / "install"), *args],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_installs_nothing(flag: str) -> None:
    result = install(flag)
    assert result.returncode == 0, result.stderr
    assert "scripts/install EXTRA" in result.stdout and "test" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--bogus",), "unknown option: --bogus"),
        (("test]",), "not a list of extras"),
        (("tset",), "no extra named tset"),
        (("plot,nope",), "no extra named nope"),
        (("test", "dev"), "unexpected argument: dev"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    result = install(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "InvalidRequirement" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "usage: scripts/install" in lines[0]
