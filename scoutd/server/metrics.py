"""The daemon's counters and latencies, and their Prometheus text exposition.

Pure: the server calls the ``count_*``/``observe_*`` methods as things happen
and asks for :meth:`Metrics.render` when a ``metrics`` request comes; nothing
here does I/O or reads a clock. Label values come from closed sets (the
methods of the protocol, the error codes of its table), so a client cannot
grow the text by sending odd method names (docs/OPERATIONS.md, "Metrics").
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["LATENCY_WINDOW", "PREPARE_BUCKETS", "Gauges", "Metrics", "percentile"]

LATENCY_WINDOW = 4096  # recent requests behind p50/p99 in `status`
# The window's percentiles are sorted out again once this many requests (at most;
# fewer while the window is small) came in since: sorting 4,096 latencies takes
# about 0.7 ms of the event loop, and a client sending nothing but `status` made
# every other client wait behind that sort once per request (docs/RELIABILITY.md).
LATENCY_RESORT = 64
# Upper bounds, in seconds, of the prepare-time histogram: a fast incremental round
# is well under a millisecond, a 64 MiB first prepare takes seconds.
PREPARE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
OTHER_METHOD = "other"  # the label of requests naming no known method


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile, ``q`` in 0..1, of a sample; 0.0 if empty.

    The smallest value with at least ``q`` of the sample at or below it: of
    1..100, p50 is 50 and p99 is 99. The one percentile of the daemon, the
    test suite and the scripts.
    """
    return _ranked(sorted(values), q)


def _ranked(ordered: list[float], q: float) -> float:
    """:func:`percentile` of a sample already sorted."""
    if not ordered:
        return 0.0
    rank = math.ceil(q * len(ordered))
    return ordered[min(len(ordered), max(1, rank)) - 1]


@dataclass(frozen=True, slots=True)
class Gauges:
    """What is true right now, read from the server when rendering."""

    uptime: float
    connections: int
    sessions: int
    watches: int
    pending_request_bytes: int
    config_generation: int
    version: str
    aborts: int  # a counter, kept by the session registry


class Metrics:
    """Counters since start, the recent latency window and the prepare histogram."""

    def __init__(self, methods: Iterable[str]) -> None:
        self.connections = 0  # open now
        self.requests = 0
        self.errors = 0
        self.notices_delivered = 0
        self.sessions_opened = 0
        self.requests_by_method: dict[str, int] = dict.fromkeys([*methods, OTHER_METHOD], 0)
        self.errors_by_code: dict[int, int] = {}
        self.latency_count = 0
        self.latency_max = 0.0  # ms
        self.recent: deque[float] = deque(maxlen=LATENCY_WINDOW)  # ms
        self.prepare_buckets = [0] * len(PREPARE_BUCKETS)
        self.prepare_count = 0
        self.prepare_sum = 0.0  # seconds
        self._percentiles = (0.0, 0.0)  # p50, p99 of the window when last sorted
        self._sorted_at = -1  # latency_count when last sorted

    def count_request(self, method: str | None) -> None:
        """One request line taken in (``method`` None: it did not decode)."""
        self.requests += 1
        key = method if method in self.requests_by_method else OTHER_METHOD
        self.requests_by_method[key] += 1

    def count_error(self, code: int) -> None:
        """One error answer with ``code`` (protocol error codes)."""
        self.errors += 1
        self.errors_by_code[code] = self.errors_by_code.get(code, 0) + 1

    def observe_request(self, seconds: float) -> None:
        """The time one request took from its line to its answer."""
        ms = seconds * 1000
        self.latency_count += 1
        self.latency_max = max(self.latency_max, ms)
        self.recent.append(ms)

    def observe_prepare(self, seconds: float) -> None:
        """The time one ``prepare_prompt`` spent preparing (its worker-thread part)."""
        self.prepare_count += 1
        self.prepare_sum += seconds
        for i, bound in enumerate(PREPARE_BUCKETS):
            if seconds <= bound:
                self.prepare_buckets[i] += 1
                break

    def latency(self) -> tuple[int, float, float, float]:
        """(count, p50 ms, p99 ms, max ms) of the recent window, rounded to the microsecond.

        The percentiles are those of the window at most :data:`LATENCY_RESORT`
        requests ago (a 64th of the window while it is smaller), so that asking
        costs the event loop about nothing however often a client asks.
        """
        stale = self.latency_count - self._sorted_at
        if self._sorted_at < 0 or stale >= min(LATENCY_RESORT, max(1, len(self.recent) // 64)):
            ordered = sorted(self.recent)
            self._percentiles = (_ranked(ordered, 0.50), _ranked(ordered, 0.99))
            self._sorted_at = self.latency_count
        p50, p99 = self._percentiles
        return (self.latency_count, round(p50, 3), round(p99, 3), round(self.latency_max, 3))

    def render(self, gauges: Gauges, code_names: Mapping[int, str]) -> str:
        """The Prometheus text exposition (format 0.0.4) of every metric.

        ``code_names`` names the error codes (``-32004`` -> ``TOO_LARGE``).
        """
        out: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP scoutd_{name} {help_text}")
            out.append(f"# TYPE scoutd_{name} {kind}")

        def sample(name: str, value: float, labels: str = "") -> None:
            out.append(f"scoutd_{name}{labels} {_number(value)}")

        family("info", "gauge", "The running version (always 1).")
        sample("info", 1, f'{{version="{_label(gauges.version)}"}}')
        for name, help_text, value in (
            ("uptime_seconds", "Seconds since the daemon started.", gauges.uptime),
            ("connections", "Client connections open now.", gauges.connections),
            ("sessions", "Sessions open now.", gauges.sessions),
            ("watched_inboxes", "Inboxes watched for aborts now.", gauges.watches),
            (
                "pending_request_bytes",
                "Bytes of request lines received and not yet answered.",
                gauges.pending_request_bytes,
            ),
            (
                "config_generation",
                "Generation of the running configuration.",
                gauges.config_generation,
            ),
        ):
            family(name, "gauge", help_text)
            sample(name, value)
        family("requests_total", "counter", "Requests received, by method.")
        for method, count in sorted(self.requests_by_method.items()):
            sample("requests_total", count, f'{{method="{_label(method)}"}}')
        family("errors_total", "counter", "Error answers sent, by error code.")
        for code, count in sorted(self.errors_by_code.items()):
            name = _label(code_names.get(code, "unknown"))
            sample("errors_total", count, f'{{code="{code}",name="{name}"}}')
        for name, help_text, value in (
            ("sessions_opened_total", "Sessions opened since start.", self.sessions_opened),
            (
                "notices_delivered_total",
                "Inbox notices delivered to prompts.",
                self.notices_delivered,
            ),
            ("aborts_total", "Abort files consumed.", gauges.aborts),
        ):
            family(name, "counter", help_text)
            sample(name, value)
        family("prepare_seconds", "histogram", "Time spent preparing a prompt.")
        cumulative = 0
        for bound, count in zip(PREPARE_BUCKETS, self.prepare_buckets, strict=True):
            cumulative += count
            sample("prepare_seconds_bucket", cumulative, f'{{le="{_number(bound)}"}}')
        sample("prepare_seconds_bucket", self.prepare_count, '{le="+Inf"}')
        sample("prepare_seconds_sum", self.prepare_sum)
        sample("prepare_seconds_count", self.prepare_count)
        return "\n".join(out) + "\n"


def _number(value: float) -> str:
    """A sample value as the exposition format writes it."""
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _label(value: object) -> str:
    """A label value, escaped as the exposition format requires."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
