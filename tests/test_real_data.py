"""The recorded runs the tests read: a clone without the full set uses the subset it ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.replay import load_replay
from tests.support import real_runs

SHIPPED_LIMIT = 300_000  # bytes: the subset stays small


@pytest.fixture
def clone_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a fresh clone with nothing beside it: no ``../shared/real``, no variable."""
    monkeypatch.delenv("SCOUTD_REAL_DIR", raising=False)
    monkeypatch.setattr(real_runs, "REPOSITORY", tmp_path / "scoutd")


@pytest.mark.usefixtures("clone_alone")
def test_a_clone_alone_reads_the_subset_it_ships() -> None:
    assert real_runs.full_dir() is None
    assert real_runs.real_dir() == real_runs.VENDORED
    for kind in real_runs.FILES:
        assert len(real_runs.load_runs(kind)) >= 3
    # The integration tests' run is in the subset, the same as in the full set.
    replay = load_replay()
    assert 45 <= len(replay.outputs) <= 60


def test_the_full_set_wins_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCOUTD_REAL_DIR", str(tmp_path))
    assert real_runs.real_dir() == tmp_path  # named, even when missing: a typo fails loudly
    monkeypatch.setenv("SCOUTD_REAL_DIR", str(real_runs.VENDORED))
    assert real_runs.full_dir() is None


def test_the_subset_is_small_and_says_where_it_comes_from() -> None:
    files = sorted(real_runs.VENDORED.iterdir())
    assert sum(path.stat().st_size for path in files) < SHIPPED_LIMIT
    readme = (real_runs.VENDORED / "README.md").read_text(encoding="utf-8")
    for line in (
        "Copyright (c) 2025 Kilian A. Lieret and Carlos E. Jimenez",
        "Copyright (c) 2026 Entire Inc.",
        "ec0e8e849fea5b1619deb1753007201000904672",
        "394f81fab87f71aa8938d91ff7a067c524ff344b",
        "Permission is hereby granted, free of charge",
    ):
        assert line in readme
