"""The command line as a whole: version, usage errors, help, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

import scoutd

from .helpers import (
    run,
)


def test_version(home: Path) -> None:
    result = run(home, "--version")
    assert result.returncode == 0
    assert result.stdout == f"scoutd {scoutd.__version__}\n"


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("frobnicate",),
        ("prepare", "--bogus"),
        ("prepare", "--set", "no-equals-sign"),
        ("config",),
        ("notify",),
        ("status", "--timeout", "-1"),
    ],
)
def test_usage_errors_exit_2(home: Path, args: tuple[str, ...]) -> None:
    result = run(home, *args)
    assert result.returncode == 2, result
    assert "usage: scoutd" in result.stderr
    assert "Traceback" not in result.stderr
