"""``metrics``: the daemon's counters as Prometheus text, checked by an independent parser."""

from __future__ import annotations

import os
import re

import pytest

from scoutd import protocol
from scoutd.server import metrics as metrics_module
from scoutd.server.metrics import LATENCY_WINDOW, PREPARE_BUCKETS, Gauges, Metrics, percentile
from scoutd.strategies.inbox import inbox_dir, write_abort, write_notice
from tests.support.daemon import InProcessDaemon, conversation

# The text exposition format, line by line, written from its description and
# sharing nothing with the renderer.
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*"'
_VALUE = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?Inf|NaN)"
SAMPLE = re.compile(rf"^({_NAME})(?:\{{({_LABEL}(?:,{_LABEL})*)?\}})? ({_VALUE})$")
HELP = re.compile(rf"^# HELP ({_NAME}) .*$")
TYPE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")


def parse_exposition(text: str) -> dict[str, float]:
    """Every sample as ``name{labels}`` -> value; AssertionError on any malformed line."""
    assert text.endswith("\n"), "the text ends with a newline"
    types: dict[str, str] = {}
    samples: dict[str, float] = {}
    for number, line in enumerate(text[:-1].split("\n"), 1):
        if line.startswith("# HELP "):
            assert HELP.match(line), f"line {number}: bad HELP: {line!r}"
            continue
        if line.startswith("# TYPE "):
            match = TYPE.match(line)
            assert match, f"line {number}: bad TYPE: {line!r}"
            assert match[1] not in types, f"line {number}: second TYPE for {match[1]}"
            types[match[1]] = match[2]
            continue
        match = SAMPLE.match(line)
        assert match, f"line {number}: not a sample: {line!r}"
        name = match[1]
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
                family = name[: -len(suffix)]
        assert family in types, f"line {number}: {name} has no TYPE before it"
        key = f"{name}{{{match[2] or ''}}}"
        assert key not in samples, f"line {number}: duplicate sample {key}"
        samples[key] = float(match[3])
    return samples


def test_the_checker_refuses_malformed_text() -> None:
    good = "# TYPE a counter\na 1\n"
    assert parse_exposition(good) == {"a{}": 1.0}
    for bad in (
        "# TYPE a counter\na 1",  # no final newline
        "a 1\n",  # no TYPE
        "# TYPE a counter\na{x=1} 1\n",  # unquoted label
        "# TYPE a counter\na one\n",  # not a number
        "# TYPE a counter\na 1\na 2\n",  # duplicate
        "# TYPE a counter\n# TYPE a gauge\na 1\n",
    ):
        with pytest.raises(AssertionError):
            parse_exposition(bad)


def _gauges(**overrides: object) -> Gauges:
    values: dict[str, object] = {
        "uptime": 1.5,
        "connections": 1,
        "sessions": 0,
        "watches": 0,
        "pending_request_bytes": 0,
        "config_generation": 1,
        "version": 'v"1\\',
        "aborts": 0,
    }
    values.update(overrides)
    return Gauges(**values)  # type: ignore[arg-type]


def test_render_counts_methods_codes_and_buckets() -> None:
    metrics = Metrics(["status", "prepare_prompt"])
    metrics.count_request("status")
    metrics.count_request("no such method\n")
    metrics.count_request(None)
    metrics.count_error(protocol.TOO_LARGE)
    metrics.count_error(protocol.TOO_LARGE)
    for seconds in (0.0001, 0.003, 0.003, 99.0):
        metrics.observe_prepare(seconds)
    samples = parse_exposition(metrics.render(_gauges(), {protocol.TOO_LARGE: "TOO_LARGE"}))
    assert samples['scoutd_requests_total{method="status"}'] == 1
    assert samples['scoutd_requests_total{method="other"}'] == 2  # never the client's text
    assert samples['scoutd_requests_total{method="prepare_prompt"}'] == 0
    assert samples['scoutd_errors_total{code="-32004",name="TOO_LARGE"}'] == 2
    assert samples['scoutd_info{version="v\\"1\\\\"}'] == 1
    buckets = [samples[f'scoutd_prepare_seconds_bucket{{le="{b!r}"}}'] for b in PREPARE_BUCKETS]
    assert buckets == sorted(buckets)  # cumulative
    assert samples['scoutd_prepare_seconds_bucket{le="0.0005"}'] == 1
    assert samples['scoutd_prepare_seconds_bucket{le="0.005"}'] == 3
    assert samples['scoutd_prepare_seconds_bucket{le="+Inf"}'] == 4  # 99 s is in +Inf only
    assert samples["scoutd_prepare_seconds_count{}"] == 4
    assert samples["scoutd_prepare_seconds_sum{}"] == pytest.approx(99.0061)


def test_a_real_daemon_counts_what_it_did() -> None:
    with InProcessDaemon() as d, d.connect() as c:
        save_file = os.path.join(d.dir, "chat", "a.chat")
        os.makedirs(os.path.dirname(save_file))
        write_notice(save_file, "deploy frozen", name="n1")
        write_notice(save_file, "tests are red", name="n2")
        reply = c.call("prepare_prompt", {"messages": conversation(5), "save_file": save_file})
        assert "result" in reply
        c.call("prepare_prompt", {"messages": conversation(3)})
        assert c.call("no.such.method")["error"]["code"] == protocol.METHOD_NOT_FOUND
        opened = c.call("session.open", {"save_file": save_file})["result"]["session"]
        write_abort(save_file, "runaway")
        aborted = c.notification("session.aborted", timeout=10)
        assert aborted["params"]["session"] == opened
        line = b'{"jsonrpc":"2.0","id":"m","method":"metrics"}'
        c.send_raw(line + b"\n")
        samples = parse_exposition(c.response("m")["result"]["text"])
        # every other request answered: pending is this one's line (without its newline)
        assert samples["scoutd_pending_request_bytes{}"] == len(line)
        assert samples['scoutd_requests_total{method="prepare_prompt"}'] == 2
        assert samples['scoutd_requests_total{method="other"}'] == 1
        assert samples['scoutd_requests_total{method="metrics"}'] == 1
        assert samples['scoutd_errors_total{code="-32601",name="METHOD_NOT_FOUND"}'] == 1
        assert samples["scoutd_notices_delivered_total{}"] == 2
        assert samples["scoutd_aborts_total{}"] == 1
        assert samples["scoutd_sessions{}"] == 1
        assert samples["scoutd_sessions_opened_total{}"] == 1
        assert samples["scoutd_connections{}"] == 1
        assert samples["scoutd_prepare_seconds_count{}"] == 2
        assert samples['scoutd_prepare_seconds_bucket{le="+Inf"}'] == 2
        assert samples["scoutd_prepare_seconds_sum{}"] > 0
        # status and metrics tell the same counts
        counts = c.call("status")["result"]["counts"]
        assert counts["notices_delivered"] == 2 and counts["aborts"] == 1
        assert not os.path.exists(os.path.join(inbox_dir(save_file), "abort"))


def test_metrics_refuses_params() -> None:
    with InProcessDaemon() as d, d.connect() as c:
        reply = c.call("metrics", {"verbose": True})
        assert reply["error"]["code"] == protocol.INVALID_PARAMS
        assert "result" in c.call("metrics", {})


def test_asking_for_the_latency_does_not_sort_the_window_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client sending nothing but ``status`` made the daemon sort its 4,096 recent
    latencies twice per request on the event loop (0.7 ms each): with 16 such
    connections another client's ``status`` took 1.9 s (p50), 220 ms after the fix.
    Counted as sorts, not time: at most one per 64 requests once the window is full,
    and the figures still follow the window."""
    metrics = Metrics(["status"])
    for i in range(LATENCY_WINDOW):
        metrics.observe_request(i / 1e6)
    sorts = 0
    real_sorted = sorted

    def counting(values: list[float]) -> list[float]:
        nonlocal sorts
        sorts += 1
        return real_sorted(values)

    monkeypatch.setattr(metrics_module, "sorted", counting, raising=False)
    for _ in range(1024):  # a flood of `status`: each is a request, then its answer
        metrics.observe_request(1.0)
        metrics.latency()
    assert sorts <= 1024 // 64 + 1, sorts
    metrics.observe_request(1.0)  # the window of 64 requests ago, or now
    count, p50, p99, worst = metrics.latency()
    assert count == LATENCY_WINDOW + 1025 and worst == 1000.0
    assert p99 == 1000.0  # a quarter of the window now took 1 s
    exact = percentile(metrics.recent, 0.5)  # 3.072: each request moved it by 0.001 ms
    assert abs(p50 - exact) <= 64 * 0.001, (p50, exact)


def test_a_small_window_gives_exact_percentiles() -> None:
    metrics = Metrics(["status"])
    for ms in (1, 2, 3, 100):
        metrics.observe_request(ms / 1000)
        assert metrics.latency()[2] == ms  # p99 of 1..ms is ms, at every request
