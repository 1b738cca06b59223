"""The daemon's counts in process: each bound at its exact edge, and the words of each refusal.

The daemon's own tests (tests/server/test_quotas.py, test_quota_accounting.py)
reach these counts through real connections; here :class:`Quotas` is driven
directly, so that a bound off by one byte, or a refusal that names the wrong
key, shows. A bound is "at most": a count equal to it passes where that is
the rule (sessions), and unread answers at their bound stop new prepares.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest

from scoutd import protocol
from scoutd.config import DaemonConfig
from scoutd.errors import ProtocolError
from scoutd.server.quotas import Quotas


@dataclass
class Stored:
    """A session as its count sees it."""

    id: str
    uid: int
    closed: bool = False


LIMITS = msgspec.structs.replace(
    DaemonConfig(),
    max_queued_response_bytes_per_uid=100,
    max_queued_response_bytes_total=150,
    max_session_bytes=1000,
    max_session_bytes_per_uid=1500,
    max_total_session_bytes=2000,
    max_prepares_per_uid=None,
)


def quotas(workers: int = 4, **limits: object) -> Quotas:
    config = msgspec.structs.replace(LIMITS, **limits)
    return Quotas(lambda: config, workers)


def refusal(raised: pytest.ExceptionInfo[ProtocolError]) -> tuple[int, str, int, str, object]:
    error = raised.value
    data = error.data
    assert isinstance(data, protocol.TooLargeData)
    return error.code, error.message, data.limit, data.key, error.id


@pytest.mark.parametrize(("workers", "slots"), [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (9, 4)])
def test_a_uid_computes_on_half_the_workers_at_least_one(workers: int, slots: int) -> None:
    assert quotas(workers).prepares_per_uid() == slots
    assert type(quotas(workers).prepares_per_uid()) is int


def test_the_configured_prepares_per_uid_stand_whatever_the_workers() -> None:
    assert quotas(9, max_prepares_per_uid=7).prepares_per_uid() == 7
    assert quotas(1, max_prepares_per_uid=3).prepares_per_uid() == 3


def test_unread_answers_are_counted_per_uid_and_forgotten_at_zero() -> None:
    counts = quotas()
    counts.add_queued(7, 0)  # nothing, for a uid never counted
    counts.add_queued(7, 40)
    counts.add_queued(8, 30)
    assert (counts.queued, counts.queued_by_uid) == (70, {7: 40, 8: 30})
    counts.add_queued(7, -40)
    assert (counts.queued, counts.queued_by_uid) == (30, {8: 30})


def test_unread_answers_are_over_at_their_bound_not_before() -> None:
    counts = quotas()
    assert not counts.answers_over(7)  # a uid with none
    counts.add_queued(7, 99)
    assert not counts.answers_over(7)
    counts.add_queued(7, 1)
    assert counts.answers_over(7)  # 100 of 100: at the bound
    other = quotas()
    other.add_queued(8, 49)
    other.add_queued(9, 100)
    assert not other.answers_over(7) and other.answers_over(9)
    other.add_queued(8, 1)
    assert other.answers_over(7)  # 150 of 150 in all, though uid 7 holds none


def test_a_uid_with_no_unread_answers_is_under_a_bound_of_one_byte() -> None:
    assert not quotas(max_queued_response_bytes_per_uid=1).answers_over(7)


def test_a_uids_first_session_may_fill_its_bound_exactly() -> None:
    counts = quotas(max_session_bytes_per_uid=1000)
    assert counts.reserve_session(Stored("a", 7), 1000, 1) == 0
    assert counts.held_by_uid == {7: 1000}


def test_a_prepare_is_refused_at_its_uids_bound_in_words() -> None:
    counts = quotas()
    counts.add_queued(7, 99)
    counts.check_answers(7, 3)  # one byte under: served
    counts.add_queued(7, 1)
    with pytest.raises(ProtocolError) as raised:
        counts.check_answers(7, 3)
    assert refusal(raised) == (
        protocol.TOO_LARGE,
        "too large: answers not yet read by uid 7 hold 100 bytes, at least"
        " max_queued_response_bytes_per_uid = 100; read them first",
        100,
        "max_queued_response_bytes_per_uid",
        3,
    )


def test_the_daemons_bound_refuses_only_a_uid_that_holds_some_of_it() -> None:
    counts = quotas()
    counts.add_queued(8, 99)
    counts.add_queued(9, 50)
    counts.check_answers(7, 1)  # none of its own: never refused for others'
    counts.check_answers(9, 1)  # 149 of 150
    counts.add_queued(8, 1)
    counts.check_answers(7, 1)
    with pytest.raises(ProtocolError) as raised:
        counts.check_answers(9, "r")
    assert refusal(raised) == (
        protocol.TOO_LARGE,
        "too large: answers not yet read hold 150 bytes in all, at least"
        " max_queued_response_bytes_total = 150, 50 of them uid 9's; read them first",
        150,
        "max_queued_response_bytes_total",
        "r",
    )


def test_a_session_not_counted_holds_nothing() -> None:
    assert quotas().session_held("s") == 0


def test_a_session_may_hold_its_bound_and_not_a_byte_more() -> None:
    counts = quotas()
    session = Stored("s", 7)
    assert counts.reserve_session(session, 1000, 1) == 0
    assert (counts.session_held("s"), counts.held, counts.held_by_uid) == (1000, 1000, {7: 1000})
    with pytest.raises(ProtocolError) as raised:
        counts.reserve_session(session, 1001, 2)
    assert refusal(raised) == (
        protocol.TOO_LARGE,
        "too large: the session would hold 1001 bytes, more than max_session_bytes = 1000",
        1000,
        "max_session_bytes",
        2,
    )
    assert counts.session_held("s") == 1000  # nothing counted


@pytest.mark.parametrize(
    ("others", "refused", "words", "limit", "key"),
    [
        (
            [("b", 7, 500)],  # 1500 of uid 7's 1500
            ("b", 7, 501),
            "the sessions of uid 7 would hold 1501 bytes",
            1500,
            "max_session_bytes_per_uid",
        ),
        (
            [("b", 8, 1000)],  # 2000 of the daemon's 2000
            ("c", 9, 1),
            "the daemon's sessions would hold 2001 bytes",
            2000,
            "max_total_session_bytes",
        ),
    ],
    ids=["uid", "daemon"],
)
def test_sessions_may_reach_a_bound_and_not_pass_it(
    others: list[tuple[str, int, int]],
    refused: tuple[str, int, int],
    words: str,
    limit: int,
    key: str,
) -> None:
    counts = quotas()
    counts.reserve_session(Stored("a", 7), 1000, 1)
    for name, uid, held in others:
        assert counts.reserve_session(Stored(name, uid), held, 1) == 0
    before = (counts.held, dict(counts.held_by_uid))
    name, uid, held = refused
    with pytest.raises(ProtocolError) as raised:
        counts.reserve_session(Stored(name, uid), held, 2)
    message = f"too large: {words}, more than {key} = {limit}"
    assert refusal(raised) == (protocol.TOO_LARGE, message, limit, key, 2)
    assert (counts.held, counts.held_by_uid) == before  # nothing counted


@pytest.mark.parametrize("bound", ["max_session_bytes_per_uid", "max_total_session_bytes"])
def test_a_session_that_does_not_grow_passes_bounds_lowered_under_it(bound: str) -> None:
    """A reload may lower a bound under what is held: a round that keeps or shrinks
    its session is served; one that grows it by a byte is not."""
    config = [LIMITS]
    counts = Quotas(lambda: config[0], 4)
    session = Stored("s", 7)
    counts.reserve_session(session, 900, 1)
    config[0] = msgspec.structs.replace(LIMITS, **{bound: 500})  # a reload
    assert counts.reserve_session(session, 900, 2) == 900  # unchanged: served
    assert counts.reserve_session(session, 800, 3) == 900  # shrinks: served
    with pytest.raises(ProtocolError) as raised:
        counts.reserve_session(session, 801, 4)
    assert refusal(raised)[3] == bound
    assert counts.session_held("s") == 800


def test_a_closed_session_is_unknown_and_counts_nothing() -> None:
    counts = quotas()
    with pytest.raises(ProtocolError) as raised:
        counts.reserve_session(Stored("s", 7, closed=True), 10, 5)
    error = raised.value
    assert (error.code, error.message, error.id) == (
        protocol.UNKNOWN_SESSION,
        "unknown session 's'",
        5,
    )
    assert (counts.held, counts.held_by_uid, counts.session_held("s")) == (0, {}, 0)


def test_a_failed_round_restores_its_count_unless_the_session_closed() -> None:
    counts = quotas()
    session = Stored("s", 7)
    before = counts.reserve_session(session, 300, 1)
    counts.reserve_session(session, 700, 2)  # the round grew it, then failed:
    counts.restore_session(session, 300)
    assert (counts.session_held("s"), counts.held_by_uid) == (300, {7: 300})
    counts.restore_session(session, before)  # back to nothing: forgotten
    assert (counts.held, counts.held_by_uid, counts.session_held("s")) == (0, {}, 0)
    counts.reserve_session(session, 300, 3)
    counts.release_session("s")  # closed by the registry, then a round failed
    session.closed = True
    counts.restore_session(session, 300)
    assert (counts.held, counts.held_by_uid) == (0, {})


def test_releases_forget_a_uid_and_a_session_at_zero() -> None:
    counts = quotas()
    counts.reserve_session(Stored("a", 7), 100, 1)
    counts.reserve_session(Stored("b", 7), 50, 1)
    counts.release_session("a")
    counts.release_session("unknown")
    counts.restore_session(Stored("new", 8), 0)  # a first round that failed: nothing
    assert (counts.held, counts.held_by_uid) == (50, {7: 50})
    counts.release_session("b")
    assert (counts.held, counts.held_by_uid, counts.session_held("b")) == (0, {}, 0)
