"""Fixtures of the inbox's tests."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture
def placing(tmp_path: pathlib.Path) -> Iterator[tuple[pathlib.Path, int]]:
    """A directory holding ``source`` ("new") and ``taken`` ("old"), and its descriptor:
    where a file is given a name without replacing one."""
    (tmp_path / "source").write_text("new")
    (tmp_path / "taken").write_text("old")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield tmp_path, fd
    finally:
        os.close(fd)


@pytest.fixture
def reachable() -> Iterator[pathlib.Path]:
    """A directory uid 65534 can reach (pytest's own are private to root)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="sd"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
