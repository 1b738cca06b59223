"""The suite's own helpers (tests/support) give every test the same answer."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from .support import nesting


@pytest.fixture
def measured_afresh() -> Iterator[None]:
    """``decoder_limit`` measured again inside the test, and forgotten after it."""
    nesting.decoder_limit.cache_clear()
    yield
    nesting.decoder_limit.cache_clear()


@pytest.mark.usefixtures("measured_afresh")
def test_the_decoder_limit_does_not_follow_a_raised_recursion_limit() -> None:
    """Hypothesis raises the recursion limit while it runs a test; a strategy that
    asked for the limit first had it remembered about twice too deep, and a later
    test of a daemon's accepted depths failed, depending on the order."""
    plain = nesting.decoder_limit()
    nesting.decoder_limit.cache_clear()
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(before + 2_000)
    try:
        raised = nesting.decoder_limit()
    finally:
        sys.setrecursionlimit(before)
    assert raised == plain
