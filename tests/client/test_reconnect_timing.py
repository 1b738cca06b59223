"""When a client tries to connect again (``scoutd/client/_reconnect.py``), in this process.

The delays against a plain oracle (0.05 s doubled each time, 2 s at most,
each drawn between half and all of it), the deadline on a clock of the
test's own, and which connect errors are worth another attempt.
tests/reliability/test_restart.py runs the same against a restarted daemon.
"""

from __future__ import annotations

import errno
import itertools
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from scoutd.client import _reconnect
from scoutd.discovery import unreachable
from scoutd.errors import DaemonUnavailable

HINT = " (is the daemon running?)"
# 0.05, 0.1, 0.2, ... 1.6, then 2.0 for ever
BASES = [0.05 * 2**k for k in range(6)] + [2.0] * 4


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The module's monotonic clock, set by the test: ``clock[0]`` is now."""
    now = [1000.0]
    monkeypatch.setattr(_reconnect, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


@pytest.mark.parametrize("end", ["high", "low"])
def test_each_delay_doubles_to_its_cap_jittered_by_up_to_half(
    monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    asked: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        asked.append((low, high))
        return high if end == "high" else low

    monkeypatch.setattr(_reconnect, "random", SimpleNamespace(uniform=uniform))
    delays = list(itertools.islice(_reconnect.backoff(), len(BASES)))
    factor = 1.0 if end == "high" else 0.5
    assert delays == pytest.approx([base * factor for base in BASES], rel=1e-12)
    assert asked == [(0.5, 1.0)] * len(BASES)


def test_the_real_jitter_stays_inside_its_bounds() -> None:
    for k, delay in enumerate(itertools.islice(_reconnect.backoff(), 200)):
        base = min(0.05 * 2**k, 2.0)
        assert base * 0.5 <= delay <= base, (k, delay)


@pytest.mark.parametrize(
    ("exc", "worth"),
    [
        (OSError(errno.ENOENT, "no such file"), True),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), True),
        (BlockingIOError(errno.EAGAIN, "try again"), True),
        (PermissionError(errno.EACCES, "denied"), False),
        (OSError(errno.ENOTSOCK, "not a socket"), False),
        (OSError("no errno"), False),
        (TimeoutError(), False),
        (ValueError(errno.ENOENT), False),
    ],
)
def test_only_a_missing_refusing_or_full_socket_is_worth_retrying(
    exc: BaseException, worth: bool
) -> None:
    assert _reconnect.worth_retrying(exc) is worth


def counted(values: list[float]) -> tuple[Iterator[float], list[float]]:
    """An iterator over ``values`` and the list of those it gave."""
    given: list[float] = []

    def gen() -> Iterator[float]:
        for value in values:
            given.append(value)
            yield value

    return gen(), given


def test_without_a_deadline_the_next_delay_is_the_next_of_the_backoff(clock: list[float]) -> None:
    delays, given = counted([0.3, 0.7])
    assert _reconnect.next_delay(delays, None) == 0.3
    assert _reconnect.next_delay(delays, None) == 0.7
    assert given == [0.3, 0.7]


@pytest.mark.parametrize(("left", "expected"), [(5.0, 0.3), (0.3, 0.3), (0.1, 0.1)])
def test_the_last_attempt_comes_at_the_deadline_not_after(
    clock: list[float], left: float, expected: float
) -> None:
    delays, _ = counted([0.3])
    assert _reconnect.next_delay(delays, clock[0] + left) == pytest.approx(expected)


@pytest.mark.parametrize("past", [0.0, 0.5])
def test_at_or_past_the_deadline_there_is_no_next_attempt(clock: list[float], past: float) -> None:
    delays, given = counted([0.3])
    assert _reconnect.next_delay(delays, clock[0] - past) is None
    assert given == []  # the backoff is not advanced


def test_a_deadline_is_timeout_seconds_from_now_and_never_negative(clock: list[float]) -> None:
    assert _reconnect.deadline_after(None) is None
    assert _reconnect.remaining(None) is None
    deadline = _reconnect.deadline_after(2.5)
    assert deadline == 1002.5
    assert _reconnect.remaining(deadline) == 2.5
    clock[0] += 2.0
    assert _reconnect.remaining(deadline) == pytest.approx(0.5)
    clock[0] += 1.0
    assert _reconnect.remaining(deadline) == 0.0


def test_an_unavailable_daemon_says_what_was_tried_and_how_often(tmp_path: Path) -> None:
    where = str(tmp_path / "gone.sock")
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory")
    once = _reconnect.unavailable(where, exc, 1)
    assert isinstance(once, DaemonUnavailable)
    assert str(once) == unreachable(where, exc)
    assert str(once) == f"cannot connect to scoutd at {where}: no such file" + HINT
    assert str(_reconnect.unavailable(where, exc, 2)) == f"{once} (after 2 attempts)"
    assert str(_reconnect.unavailable(where, exc, 7)).endswith(" (after 7 attempts)")
