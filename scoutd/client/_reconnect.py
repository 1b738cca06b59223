"""When and how often a client tries to connect again (``reconnect=True``, ``reconnect()``)."""

from __future__ import annotations

import errno
import random
import time
from collections.abc import Iterator

from ..discovery import unreachable
from ..errors import DaemonUnavailable

# The first retry comes after RECONNECT_INITIAL_DELAY, each next one after twice
# as long, never more than RECONNECT_MAX_DELAY (a restarting daemon answers
# within a second or two; a longer gap only delays the caller), each delay with
# up to 50 % random jitter so that many clients of one restarted daemon do not
# come back in lockstep. The whole wait is bounded by the client's ``timeout``.
RECONNECT_INITIAL_DELAY = 0.05
RECONNECT_MAX_DELAY = 2.0
# connect() errors that mean "no daemon right now, maybe soon": the socket file is
# missing (between a stop and the next start), nobody listens on it (a stale file),
# or the backlog is full.
RECONNECT_ERRNOS = frozenset({errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN})


def backoff() -> Iterator[float]:
    """Delays between connection attempts: exponential, capped, jittered."""
    delay = RECONNECT_INITIAL_DELAY
    while True:
        yield delay * random.uniform(0.5, 1.0)
        delay = min(delay * 2, RECONNECT_MAX_DELAY)


def worth_retrying(exc: BaseException) -> bool:
    """Whether a failed connect is worth retrying (the daemon may be restarting)."""
    return isinstance(exc, OSError) and exc.errno in RECONNECT_ERRNOS


def next_delay(delays: Iterator[float], deadline: float | None) -> float | None:
    """The wait before the next attempt, or None when the deadline has passed.

    The last attempt comes at the deadline, not one delay after it.
    """
    left = remaining(deadline)
    if left is not None and left <= 0:
        return None
    delay = next(delays)
    return delay if left is None else min(delay, left)


def unavailable(socket_path: str, exc: BaseException, attempts: int) -> DaemonUnavailable:
    """The error for a daemon that could not be reached: what was tried, and what to do.

    A path found by discovery names every place looked at, in order
    (:func:`scoutd.discovery.unreachable`).
    """
    message = unreachable(socket_path, exc)
    if attempts > 1:
        message += f" (after {attempts} attempts)"
    return DaemonUnavailable(message)


def deadline_after(timeout: float | None) -> float | None:
    """The :func:`time.monotonic` instant ``timeout`` seconds from now (None: never)."""
    return None if timeout is None else time.monotonic() + timeout


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (never negative; None: no deadline)."""
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)
