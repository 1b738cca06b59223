"""The full set of real runs under the default (full-keep): see test_byte_identity.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import real_runs
from tests.test_byte_identity import _compare

# Long (tests/conftest.py starts the tests marked slow first).
pytestmark = pytest.mark.slow


@pytest.mark.skipif(real_runs.full_dir() is None, reason="the full set of real runs is absent")
@pytest.mark.timeout(900)  # under a minute of CPU, longer on a shared machine
def test_the_full_set_prepares_as_recorded_under_the_default(tmp_path: Path) -> None:
    """The cost-aware strategy and the default chain, every key at its default."""
    full = real_runs.full_dir()
    assert full is not None
    _compare("full-keep", full, tmp_path)
