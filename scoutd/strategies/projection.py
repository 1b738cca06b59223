"""When the default's compaction will pay: a projection from the last decision's figures.

The report's reason says "it will pay at about K more tokens of prompt"
(docs/ECONOMY.md, "Why it did not compact"). That is a projection, not part of
the rule: each later round is taken to add what an average recent round added
(``Decision.growth``, over :data:`~.cost_plan.GROWTH_ROUNDS` rounds), both to
the prompt and to what a compaction would remove, and the rewrite to stay what
it is now. :func:`projected_unmet` runs the
rule's own tests (:func:`~.cost_plan.unmet_test`) on the figures projected
that far; :func:`rounds_to_pay` solves the same tests in closed form.

The window comes first when it is nearer: a prompt growing so will pass
``compaction_limit_share`` of the window (:func:`rounds_to_limit`) and be
compacted to fit whatever the price. :func:`forecast` says which of the two
comes first, so that the reason never promises a compaction that pays where
the next one is forced, or none where one is.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .cost_plan import Decision, unmet_test

__all__ = [
    "Forecast",
    "forecast",
    "projected_unmet",
    "rounds_to_limit",
    "rounds_to_pay",
]

# The projection looks this many rounds ahead at most.
PROJECTION_ROUNDS = 100_000


def projected_unmet(decision: Decision, rounds: int) -> str | None:
    """:meth:`~.cost_plan.Decision.unmet` ``rounds`` later, if each round added
    :attr:`Decision.growth` tokens to the prompt and to what a compaction would remove."""
    added = decision.growth
    read = decision.read
    carried = decision.carried + read * (
        decision.removed * rounds + added * rounds * (rounds + 1) / 2
    )
    billed = (
        decision.billed
        + rounds * (decision.prompt * read + added * decision.write)
        + read * added * rounds * (rounds - 1) / 2
    )
    horizon = decision.horizon * (decision.round + rounds) / decision.round
    return unmet_test(
        decision,
        decision.prompt + added * rounds,
        carried,
        decision.removed + added * rounds,
        horizon,
        billed,
    )


def rounds_to_pay(decision: Decision) -> int | None:
    """The first round ahead at which :func:`projected_unmet` is None (None: the
    decision compacted, or it would not within ``PROJECTION_ROUNDS``).

    Each test, projected, is a quadratic in the rounds ahead that only grows,
    so the first round it passes has a closed form, and all pass from the
    latest of those on: a few operations on every prepare, where searching
    the rounds called the tests a score of times.
    """
    if decision.unmet() is None or decision.round <= 0 or decision.growth <= 0:
        return None
    g, r, w = decision.growth, decision.read, decision.write
    per_round = decision.horizon / decision.round * r  # the horizon test's factor, per round
    rounds = max(
        _first_round(0.0, g, decision.prompt - decision.trigger),
        _first_round(
            r * g / 2,
            r * (decision.removed + g / 2),
            decision.carried - decision.batch * decision.rewrite,
        ),
        _first_round(
            per_round * g,
            per_round * (decision.removed + g * decision.round),
            per_round * decision.removed * decision.round - decision.rewrite,
        ),
        _first_round(
            decision.risk * r * g / 2,
            decision.risk * (decision.prompt * r + g * w - r * g / 2),
            decision.risk * decision.billed - decision.rewrite,
        ),
    )
    return None if rounds > PROJECTION_ROUNDS else rounds


def rounds_to_limit(decision: Decision) -> int | None:
    """The first round ahead at which the projected prompt passes the limit, so that the
    compaction is forced (None: the decision compacted, the prompt does not grow, or not
    within ``PROJECTION_ROUNDS``).

    The replay forces a compaction when the prompt is over the limit (less the
    notice once a compaction stands, which the decision does not carry: a few
    dozen tokens sooner then).
    """
    if decision.unmet() is None or decision.growth <= 0:
        return None
    rounds = math.floor((decision.limit - decision.prompt) / decision.growth) + 1
    return None if rounds > PROJECTION_ROUNDS else max(rounds, 0)


class Forecast(NamedTuple):
    """The next compaction, projected: about how many more tokens of prompt until it
    comes, and whether the limit forces it (else it pays)."""

    tokens: int
    forced: bool


def forecast(decision: Decision) -> Forecast | None:
    """The next compaction: the first of a paying one (:func:`rounds_to_pay`) and a forced
    one (:func:`rounds_to_limit`); forced when both come at the same round, as the replay
    then reports it. None when neither comes within ``PROJECTION_ROUNDS``."""
    pays, forced = rounds_to_pay(decision), rounds_to_limit(decision)
    if forced is not None and (pays is None or forced <= pays):
        return Forecast(max(1, round(decision.growth * forced)), True)
    if pays is None:
        return None
    return Forecast(max(1, round(decision.growth * pays)), False)


def _first_round(a: float, b: float, c: float) -> int:
    """The least whole ``j >= 0`` with ``a*j*j + b*j + c >= 0``, for a quadratic that grows
    over ``j >= 0`` (``a >= 0``); past ``PROJECTION_ROUNDS`` when it never does."""
    if c >= 0:
        return 0
    if a > 0:
        root = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    elif b > 0:
        root = -c / b
    else:
        return PROJECTION_ROUNDS + 1
    if root > PROJECTION_ROUNDS:
        return PROJECTION_ROUNDS + 1
    found = math.ceil(root)  # 0 when the float root rounds to 0, though c < 0
    # the root, rounded, may land a round off when it is a whole round to within the
    # floats' precision: checked on both sides, by the quadratic itself
    if found and a * (found - 1) ** 2 + b * (found - 1) + c >= 0:
        return found - 1
    return found if a * found**2 + b * found + c >= 0 else found + 1
