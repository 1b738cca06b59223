"""Crash during delivery (docs/STRATEGIES.md, inbox): SIGKILL the consumer at random moments.

CI size: 5 kills over 300 notices per consumer kind; the full size (50 kills over
5,000 notices) is ``scripts/chaos-inbox kill`` with its defaults, recorded in
docs/RELIABILITY.md. The script audits the log of delivered notices, the inbox
and the removed directory; these tests check its verdict and the figures.
"""

from __future__ import annotations

import pytest

from tests.reliability.harness import run_script


@pytest.mark.parametrize("mode", ["library", "daemon"])
def test_a_killed_consumer_never_delivers_twice_and_loses_at_most_one_per_kill(
    mode: str,
) -> None:
    """Every notice is delivered, recorded by a consumer that died, or still queued."""
    document = run_script(
        "chaos-inbox", "kill", "--mode", mode, "--notices", "300", "--kills", "5", "--seed", "7"
    )
    [run] = document["runs"]
    assert run["mode"] == mode
    assert run["kills"] >= 5
    assert run["duplicates"] == 0
    assert run["lost_between_move_and_read"] <= run["kills"]
    accounted = (
        run["delivered"]
        + run["recorded_but_unreported"]
        + run["lost_between_move_and_read"]
        + run["still_in_inbox"]
    )
    assert accounted == run["notices"] == 303  # 3 of them dropped after the last kill
    assert run["final_delivered"] == 3  # the consumer left running delivers
    assert run["delivered"] >= 3
