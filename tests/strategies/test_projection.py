"""When the default's compaction will pay: :func:`rounds_to_pay` against a plain search.

The oracle walks the projected rounds one by one with the rule's own tests
(:func:`projected_unmet`) and takes the first at which all pass; the closed
form must name the same round, for decisions drawn at random, with each of
the rule's tests the last to pass in some of them.
"""

from __future__ import annotations

import random

from scoutd.strategies.cost_plan import Decision
from scoutd.strategies.projection import PROJECTION_ROUNDS, projected_unmet, rounds_to_pay

SEARCHED = 1_000  # rounds the oracle walks
CASES = 600


def first_round(decision: Decision) -> int | None:
    """The first round within SEARCHED at which the projected tests all pass."""
    return next((j for j in range(SEARCHED) if projected_unmet(decision, j) is None), None)


def draw(rng: random.Random) -> Decision:
    """A decision that did not compact, with figures of a plausible scale."""
    number = rng.randint(1, 300)
    head = rng.randint(100, 5_000)
    per_round = rng.randint(0, 400)
    grown = per_round * number
    read = rng.choice((0.1, 0.25, 0.5))
    write = rng.choice((1.0, 1.25))
    removed = rng.randint(0, grown)
    return Decision(
        round=number,
        prompt=head + grown - rng.randint(0, grown // 2),
        full=20,
        trigger=rng.choice((0.0, 10_000.0, 50_000.0)),
        limit=1e9,
        forced=False,
        weighed=True,
        compacted=False,
        removed=removed,
        rewrite=rng.uniform(0, 40_000),
        carried=rng.uniform(0, 100_000),
        billed=rng.uniform(0, 2e6),
        batch=rng.choice((1.0, 5.0)),
        read=read,
        write=write,
        horizon=number * rng.choice((0.25, 1.0, 3.0)),
        risk=rng.choice((0.005, 0.02, 0.5)),
        growth=per_round * rng.choice((0.5, 1.0, 2.0)),  # the recent rounds' growth
    )


def test_the_closed_form_finds_the_first_round_the_search_finds() -> None:
    rng = random.Random(29)
    later = 0
    deciding: set[str] = set()  # the test that failed last, before the answer
    for _ in range(CASES):
        decision = draw(rng)
        if decision.unmet() is None:
            continue
        expected = first_round(decision)
        found = rounds_to_pay(decision)
        if expected is None:
            assert found is None or SEARCHED <= found <= PROJECTION_ROUNDS, decision
            continue
        assert found == expected, decision
        later += expected > 1
        if expected > 0:
            deciding.add(str(projected_unmet(decision, expected - 1)))
    assert later >= 250, later
    assert deciding == {"trigger", "rent", "horizon", "risk"}, deciding
