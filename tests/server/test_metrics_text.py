"""The metrics' text and figures in process, written out in full (docs/PROTOCOL.md, "metrics").

The daemon's tests read a few samples of the text through a real connection
(tests/server/test_metrics.py); here every line of one exposition is written
out by hand, and the latency window's figures are checked at their edges.
"""

from __future__ import annotations

import pytest

from scoutd.server.metrics import (
    LATENCY_WINDOW,
    Gauges,
    Metrics,
    _label,
    _number,
    percentile,
)

# Every family, in order; a version that needs escaping; errors sorted by code,
# one without a name; prepare times at a bucket's bound and past the last one.
EXPECTED = r"""# HELP scoutd_info The running version (always 1).
# TYPE scoutd_info gauge
scoutd_info{version="0.1.0\"x\\"} 1
# HELP scoutd_uptime_seconds Seconds since the daemon started.
# TYPE scoutd_uptime_seconds gauge
scoutd_uptime_seconds 5.5
# HELP scoutd_connections Client connections open now.
# TYPE scoutd_connections gauge
scoutd_connections 3
# HELP scoutd_sessions Sessions open now.
# TYPE scoutd_sessions gauge
scoutd_sessions 2
# HELP scoutd_watched_inboxes Inboxes watched for aborts now.
# TYPE scoutd_watched_inboxes gauge
scoutd_watched_inboxes 4
# HELP scoutd_pending_request_bytes Bytes of request lines received and not yet answered.
# TYPE scoutd_pending_request_bytes gauge
scoutd_pending_request_bytes 10
# HELP scoutd_config_generation Generation of the running configuration.
# TYPE scoutd_config_generation gauge
scoutd_config_generation 7
# HELP scoutd_requests_total Requests received, by method.
# TYPE scoutd_requests_total counter
scoutd_requests_total{method="other"} 1
scoutd_requests_total{method="prepare_prompt"} 0
scoutd_requests_total{method="status"} 2
# HELP scoutd_errors_total Error answers sent, by error code.
# TYPE scoutd_errors_total counter
scoutd_errors_total{code="-32600",name="unknown"} 1
scoutd_errors_total{code="-32004",name="TOO_LARGE"} 2
# HELP scoutd_sessions_opened_total Sessions opened since start.
# TYPE scoutd_sessions_opened_total counter
scoutd_sessions_opened_total 2
# HELP scoutd_notices_delivered_total Inbox notices delivered to prompts.
# TYPE scoutd_notices_delivered_total counter
scoutd_notices_delivered_total 3
# HELP scoutd_aborts_total Abort files consumed.
# TYPE scoutd_aborts_total counter
scoutd_aborts_total 1
# HELP scoutd_prepare_seconds Time spent preparing a prompt.
# TYPE scoutd_prepare_seconds histogram
scoutd_prepare_seconds_bucket{le="0.0005"} 1
scoutd_prepare_seconds_bucket{le="0.001"} 2
scoutd_prepare_seconds_bucket{le="0.0025"} 3
scoutd_prepare_seconds_bucket{le="0.005"} 3
scoutd_prepare_seconds_bucket{le="0.01"} 3
scoutd_prepare_seconds_bucket{le="0.025"} 3
scoutd_prepare_seconds_bucket{le="0.05"} 3
scoutd_prepare_seconds_bucket{le="0.1"} 3
scoutd_prepare_seconds_bucket{le="0.25"} 3
scoutd_prepare_seconds_bucket{le="0.5"} 3
scoutd_prepare_seconds_bucket{le="1.0"} 3
scoutd_prepare_seconds_bucket{le="2.5"} 3
scoutd_prepare_seconds_bucket{le="+Inf"} 4
scoutd_prepare_seconds_sum 3.0026
scoutd_prepare_seconds_count 4
"""


def test_the_whole_text_of_one_exposition() -> None:
    metrics = Metrics(["status", "prepare_prompt"])
    for method in ("status", None, "status"):
        metrics.count_request(method)
    for code in (-32004, -32004, -32600):
        metrics.count_error(code)
    metrics.sessions_opened, metrics.notices_delivered = 2, 3
    for seconds in (0.0005, 0.001, 0.0011, 3.0):
        metrics.observe_prepare(seconds)
    gauges = Gauges(
        uptime=5.5,
        connections=3,
        sessions=2,
        watches=4,
        pending_request_bytes=10,
        config_generation=7,
        version='0.1.0"x\\',
        aborts=1,
    )
    assert metrics.render(gauges, {-32004: "TOO_LARGE"}) == EXPECTED
    assert (metrics.requests, metrics.errors) == (3, 3)


def test_values_and_labels_as_the_format_writes_them() -> None:
    assert [_number(v) for v in (2, 1.5, float("inf"), float("-inf"))] == [
        "2",
        "1.5",
        "+Inf",
        "-Inf",
    ]
    assert _label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


def test_a_percentile_is_the_nearest_rank() -> None:
    hundred = [float(n) for n in range(100, 0, -1)]
    assert (percentile(hundred, 0.50), percentile(hundred, 0.99)) == (50.0, 99.0)
    assert percentile([3.0, 1.0, 2.0], 0.0) == 1.0  # the smallest, not the second
    assert percentile([], 0.5) == 0.0


def test_no_request_yet_is_all_zeros() -> None:
    assert Metrics([]).latency() == (0, 0.0, 0.0, 0.0)


def test_latencies_are_rounded_to_the_microsecond() -> None:
    metrics = Metrics([])
    metrics.observe_request(0.00123456)  # 1.23456 ms
    assert metrics.latency() == (1, 1.235, 1.235, 1.235)


def test_the_window_holds_the_newest_requests_only() -> None:
    metrics = Metrics([])
    for _ in range(10):
        metrics.observe_request(9.0)  # 9,000 ms, soon out of the window
    for _ in range(LATENCY_WINDOW):
        metrics.observe_request(0.001)
    assert len(metrics.recent) == LATENCY_WINDOW
    assert metrics.latency() == (LATENCY_WINDOW + 10, 1.0, 1.0, 9000.0)


@pytest.mark.parametrize(("size", "every"), [(100, 1), (128, 2)])
def test_the_percentiles_are_sorted_again_every_64th_of_the_window(size: int, every: int) -> None:
    """While the window is under 64 x 64 requests, the percentiles are sorted again
    once a 64th of it (at least one) came in since: 1 of 100, 2 of 128."""
    metrics = Metrics([])
    for n in range(size):
        metrics.observe_request(0.001 if n < size // 2 else 0.003)
    assert metrics.latency()[1] == 1.0  # p50: the 50th (or 64th) of 1 ms, then 3 ms
    for added in range(1, every + 1):
        metrics.observe_request(0.003)  # the median moves to 3 ms
        expected = 3.0 if added == every else 1.0  # held until a 64th came in
        assert metrics.latency()[1] == expected, added


def test_the_window_gives_its_median_its_99th_and_its_slowest() -> None:
    metrics = Metrics([])
    for ms in range(100, 0, -1):
        metrics.observe_request(ms / 1000)
    assert metrics.latency() == (100, 50.0, 99.0, 100.0)
