"""The fleet's clock (:class:`scoutd.fleet.link.RedisClock`): Redis's, as a process reads it.

Through real daemons and a real Redis, tests/fleet/test_view.py checks a host whose
clock runs behind and tests/fleet/test_acl.py an account without ``+time``; here the
arithmetic, against numbers worked out by hand.
"""

from __future__ import annotations

import time

import pytest

from scoutd.fleet.link import RedisClock


def test_the_offset_is_redis_time_less_the_middle_of_the_exchange() -> None:
    clock = RedisClock()
    assert clock.note((1_000, 250_000), 10.0, 12.0)  # 1000.25 s against 11 s here
    assert clock.offset == pytest.approx(989.25)
    before = time.time()
    assert before + 989.25 <= clock.now() <= time.time() + 989.25


def test_a_refused_time_keeps_the_offset_measured_before() -> None:
    clock = RedisClock()
    assert clock.offset == 0.0  # this machine's clock until Redis answers
    assert clock.note((50, 0), 40.0, 40.0)
    assert not clock.note(PermissionError("NOPERM"), 0.0, 1.0)
    assert clock.offset == 10.0
