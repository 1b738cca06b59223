"""Fixtures of the framework integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.daemon import Daemon


@pytest.fixture(params=["in-process", "daemon"])
def socket(request: pytest.FixtureRequest) -> Iterator[tuple[str | None, str]]:
    """``(socket path or None, a directory for the chat)``: in process, then a real daemon."""
    if request.param == "in-process":
        yield None, str(request.getfixturevalue("tmp_path"))
        return
    with Daemon() as daemon:
        yield daemon.socket_path, daemon.dir
