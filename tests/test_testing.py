"""The shared harness helpers of :mod:`scoutd.testing`."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd.testing import Daemon, InProcessDaemon, conversation, percentile, summary_ms


def test_percentile_is_nearest_rank() -> None:
    """p50 and p99 of 1..100 are 50 and 99; a single sample is every percentile."""
    values = [float(v) for v in range(100, 0, -1)]
    assert percentile(values, 0.50) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 1.0) == 100.0
    assert percentile(values, 0.0) == 1.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.5) == 0.0


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1), st.floats(0, 1))
def test_percentile_is_a_sample_value_with_q_of_the_sample_at_or_below(
    values: list[float], q: float
) -> None:
    value = percentile(values, q)
    assert value in values
    at_or_below = sum(1 for v in values if v <= value)
    assert at_or_below >= q * len(values)
    below = sum(1 for v in values if v < value)
    assert below < max(1, q * len(values)) or q == 0


def test_summary_ms_converts_seconds() -> None:
    assert summary_ms([0.001, 0.002, 0.003]) == {"p50_ms": 2.0, "p99_ms": 3.0, "max_ms": 3.0}
    assert summary_ms([]) == {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}


def test_conversation_shape() -> None:
    messages = conversation(50, output_size=100, tag="x")
    assert messages[1]["content"] == "Fix the failing test x."
    calls = [m for m in messages if m["role"] == "function_call"]
    outputs = [m for m in messages if m["role"] == "function_call_output"]
    assert len(calls) == len(outputs) == 50
    assert [json.loads(m["content"])["id"] for m in calls] == [f"c{n}" for n in range(50)]
    assert sum(1 for m in messages if m["content"].startswith("progress check")) == 2


@pytest.mark.parametrize("kind", [Daemon, InProcessDaemon])
def test_the_log_is_read_after_the_daemon_and_its_directory_are_gone(kind: type[Daemon]) -> None:
    """A test that checks the log after its ``with`` block (``"Traceback" not in
    d.log()``) reads the daemon's last log, not an empty text: three did, and
    passed whatever the daemon logged, until the log was kept at cleanup."""
    with kind() as d, d.connect() as client:
        client.call("no.such.method")
    assert not os.path.exists(d.dir)
    assert "serving on" in d.log() and "no.such.method" in d.log()
