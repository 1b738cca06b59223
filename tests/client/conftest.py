"""Daemons of the client tests (scoutd.Client and scoutd.AsyncClient)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..support.daemon import Daemon
from .helpers import PROMPT


@pytest.fixture(scope="package")
def daemon() -> Iterator[Daemon]:
    """One daemon shared by the client tests that do not change its state."""
    with Daemon(prompt=PROMPT) as running:
        yield running


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon for one test (it reloads, stops or limits it)."""
    with Daemon(prompt=PROMPT, daemon={"max_request_bytes": 262144}) as running:
        yield running
