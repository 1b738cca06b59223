"""The full set of real runs, second part: see test_byte_identity.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import real_runs
from tests.test_byte_identity import FULL_FIRST, KEEP_STRATEGIES, STRATEGIES, _compare

# Long (tests/conftest.py starts the tests marked slow first).
pytestmark = pytest.mark.slow

REST = tuple(s for s in STRATEGIES if s not in FULL_FIRST)


@pytest.mark.skipif(real_runs.full_dir() is None, reason="the full set of real runs is absent")
@pytest.mark.timeout(900)  # about a minute of CPU, longer on a shared machine
@pytest.mark.parametrize(
    ("name", "only"), [("full", REST), ("full-keep", KEEP_STRATEGIES)], ids=["full", "full-keep"]
)
def test_the_full_set_prepares_as_recorded(
    name: str, only: tuple[str, ...], tmp_path: Path
) -> None:
    full = real_runs.full_dir()
    assert full is not None
    _compare(name, full, tmp_path, only)
