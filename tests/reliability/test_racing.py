"""Racing consumers: library processes and the daemon's watcher on one inbox.

The issue's size runs in CI as is (8 consumers, 1,000 notices, 20 aborts): each
notice is delivered exactly once and each abort consumed exactly once, by a
consumer (``Aborted``) or by the daemon (``session.aborted``).
"""

from __future__ import annotations

from tests.reliability.harness import run_script


def test_eight_consumers_and_the_watcher_consume_each_file_exactly_once() -> None:
    document = run_script(
        "chaos-inbox", "race", "--consumers", "8", "--notices", "1000", "--aborts", "20"
    )
    assert document["notices"] == 1000 and document["aborts"] == 20
    assert sum(document["notices_per_consumer"]) == 1000
    assert document["aborts_by_consumers"] + document["aborts_by_daemon_watcher"] == 20
    # both kinds of party took part (the consumers pause between calls so that the
    # watcher gets its chances; with 20 aborts either side winning all is unlikely)
    assert sum(n > 0 for n in document["notices_per_consumer"]) >= 2


def test_racing_with_a_polling_watcher() -> None:
    document = run_script(
        "chaos-inbox",
        "race",
        "--consumers",
        "4",
        "--notices",
        "300",
        "--aborts",
        "5",
        "--watch-mode",
        "poll",
    )
    assert document["aborts_by_consumers"] + document["aborts_by_daemon_watcher"] == 5
