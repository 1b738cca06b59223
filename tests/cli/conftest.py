"""Fixtures of the ``scoutd`` command tests: a private directory, a real daemon."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.daemon import Daemon
from .helpers import DAEMON_START_TIMEOUT


@pytest.fixture
def home() -> Iterator[Path]:
    """A short private directory with an empty config file in it."""
    path = Path(tempfile.mkdtemp(prefix="sd"))
    (path / "empty.toml").write_text("")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(home: Path) -> Iterator[Daemon]:
    """A real daemon (``python -m scoutd serve``) with its socket and config in ``home``."""
    started = Daemon(directory=str(home), daemon={"shutdown_timeout": 2.0})
    try:
        started.start(timeout=DAEMON_START_TIMEOUT)
        yield started
    finally:
        started.cleanup()
