"""The projection's edges, each against a plain reading of its docstring: the first
whole round of a growing quadratic by search, the bound of PROJECTION_ROUNDS on
both sides, the figures that mean "never", and which of a paying and a forced
compaction comes first when both come at one round."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from scoutd.strategies.cost_plan import Decision
from scoutd.strategies.projection import (
    PROJECTION_ROUNDS,
    Forecast,
    _first_round,
    forecast,
    rounds_to_limit,
    rounds_to_pay,
)

NEVER = PROJECTION_ROUNDS + 1  # what _first_round answers for "not within the projection"
SEARCHED = 10_000  # rounds the plain search walks; the drawn quadratics pass before


def searched(a: float, b: float, c: float) -> int:
    """The first whole ``j >= 0`` with ``a*j**2 + b*j + c >= 0``, by walking."""
    return next((j for j in range(SEARCHED) if a * j**2 + b * j + c >= 0), NEVER)


def test_the_first_round_is_the_one_a_plain_search_finds() -> None:
    rng = random.Random(31)
    stepped_back = stepped_on = on_a_root = 0
    for _ in range(20_000):
        shape = rng.randrange(4)
        a = 0.0 if shape == 0 else rng.choice((0.1, 0.3, 0.7, 1.0, 2.5, rng.uniform(0.01, 5)))
        if shape in (1, 2):  # a root on a whole round: a*(j - k)*(j + m)
            k = rng.randint(0, 300)
            m = rng.randint(k, k + 500)
            b, c = a * (m - k), -a * k * m
        else:
            b = rng.choice((0.0, 0.5, 1.0, rng.uniform(0.5, 50)))
            c = rng.choice((0.0, 0.5, -0.5, -rng.uniform(0, 5_000), rng.uniform(0, 10)))
        expected = searched(a, b, c)
        assert _first_round(a, b, c) == expected, (a, b, c)
        on_a_root += expected > 0 and a * expected**2 + b * expected + c == 0
        if c < 0 and a > 0:
            rounded = math.ceil((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a))
            stepped_back += rounded > expected
            stepped_on += rounded < expected
    # the float root landed just above a whole round, or just below, and the check found it
    assert stepped_back >= 500, stepped_back  # 1,374 with this seed
    assert stepped_on >= 200, stepped_on  # 605
    assert on_a_root >= 5_000, on_a_root  # 8,155


@pytest.mark.parametrize(
    ("a", "b", "c", "expected"),
    [
        (0.0, 0.0, 0.0, 0),  # no growth, but already there
        (0.0, 0.0, 0.5, 0),
        (0.0, 0.0, -1e-9, NEVER),  # no growth and not there: never
        (0.0, 0.5, -1.0, 2),  # a slow growth is one
        (0.0, 1.0, -PROJECTION_ROUNDS, PROJECTION_ROUNDS),  # the last round projected
        (0.0, 1.0, -(PROJECTION_ROUNDS + 0.5), NEVER),
        (1e-12, 0.0, -1.0, NEVER),
        (10.0, 1.0, -1e-20, 1),  # the float root is 0.0, not past it: round 1 still
    ],
)
def test_the_first_round_at_its_edges(a: float, b: float, c: float, expected: int) -> None:
    assert _first_round(a, b, c) == expected


PROMPT = 1_000


def only_the_trigger(
    rounds_away: float,
    growth: float = 1.0,
    *,
    number: int = 10,
    limit: float = 1e12,
    compacted: bool = False,
) -> Decision:
    """A decision that fails the trigger alone, ``rounds_away`` rounds of ``growth``
    below it: the rule's other tests pass (nothing to rewrite)."""
    return Decision(
        round=number,
        prompt=PROMPT,
        full=20,
        trigger=PROMPT + growth * rounds_away,
        limit=limit,
        forced=False,
        weighed=True,
        compacted=compacted,
        removed=100,
        read=0.1,
        write=1.25,
        horizon=number,
        risk=0.5,
        growth=growth,
    )


def only_the_rent(growth: float) -> Decision:
    """A decision above its trigger that has not yet paid for its rewrite: reading
    what it would remove carries 10 a round, the rewrite waits for 50 more."""
    paying = only_the_trigger(0, growth)
    return replace(paying, trigger=0.0, rewrite=50.0, billed=1e9, horizon=1e6)


def test_the_rounds_to_pay_are_the_rounds_to_the_trigger() -> None:
    assert only_the_trigger(7).unmet() == "trigger"
    assert rounds_to_pay(only_the_trigger(7)) == 7
    assert rounds_to_pay(only_the_trigger(7, number=1)) == 7  # the first round is a round
    assert rounds_to_pay(only_the_trigger(7, growth=0.5)) == 7  # a slow growth is one
    assert rounds_to_pay(only_the_trigger(PROJECTION_ROUNDS)) == PROJECTION_ROUNDS
    assert rounds_to_pay(only_the_trigger(PROJECTION_ROUNDS + 1)) is None
    assert rounds_to_pay(only_the_rent(1.0)) is not None


def test_no_rounds_to_pay_without_a_round_a_growth_or_a_test_failed() -> None:
    assert rounds_to_pay(only_the_trigger(7, number=0)) is None
    assert rounds_to_pay(only_the_trigger(7, compacted=True)) is None
    # without growth the projection says never, though the rent would come
    assert only_the_rent(0.0).unmet() == "rent"
    assert rounds_to_pay(only_the_rent(0.0)) is None


def test_the_rounds_to_the_limit_are_the_first_past_it() -> None:
    past = only_the_trigger(7, limit=PROMPT + 5.5)
    assert rounds_to_limit(past) == 6
    assert rounds_to_limit(only_the_trigger(7, limit=PROMPT - 3)) == 0  # past it already
    last = PROMPT + PROJECTION_ROUNDS - 1
    assert rounds_to_limit(only_the_trigger(7, limit=last)) == PROJECTION_ROUNDS
    assert rounds_to_limit(only_the_trigger(7, limit=last + 1)) is None
    assert rounds_to_limit(only_the_trigger(7, growth=0.0)) is None
    assert rounds_to_limit(only_the_trigger(7, compacted=True, limit=PROMPT + 5)) is None


def test_the_forecast_names_the_first_and_the_limit_at_a_tie() -> None:
    assert forecast(only_the_trigger(7, growth=3.0)) == Forecast(21, False)
    # the limit is passed at round 7 too: the replay forces that compaction
    tie = only_the_trigger(7, growth=3.0, limit=PROMPT + 3.0 * 6)
    assert (rounds_to_pay(tie), rounds_to_limit(tie)) == (7, 7)
    assert forecast(tie) == Forecast(21, True)
    assert forecast(only_the_trigger(7, growth=3.0, limit=PROMPT + 3.0 * 7)) == Forecast(21, False)
    assert forecast(only_the_trigger(1, growth=0.4)) == Forecast(1, False)  # at least a token
    assert forecast(only_the_trigger(1, growth=0.4, limit=PROMPT)) == Forecast(1, True)
    assert forecast(only_the_trigger(PROJECTION_ROUNDS + 1)) is None
