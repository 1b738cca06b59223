"""Fixtures of the fleet tests: a real redis-server per test, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scoutd.testing.fleet import REDIS_SERVER, RedisServer


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    if REDIS_SERVER is None:  # .ci/run installs it; a run without it fails, never skips
        pytest.fail("redis-server is not installed: apt-get install redis-server")
    with RedisServer() as server:
        yield server
