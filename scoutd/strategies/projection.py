"""When the default's compaction will pay: a projection from the last decision's figures.

The report's reason says "it will pay at about K more tokens of prompt"
(docs/ECONOMY.md, "Why it did not compact"). That is a projection, not part of
the rule: each later round is taken to add the average round so far
(:func:`growth`) to the prompt and to what a compaction would take out of it.
Of that, the share the compaction weighed now keeps whole (the retention,
:mod:`.retention`) stays kept and is rewritten; the rest is removed.
:func:`projected_unmet` runs the rule's own tests
(:func:`~.cost_plan.unmet_test`) on the figures projected that far;
:func:`rounds_to_pay` finds the first round at which they all pass.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .cost_plan import Decision, unmet_test

__all__ = ["growth", "more_tokens", "projected_unmet", "rounds_to_pay"]

# The projection looks this many rounds ahead at most.
PROJECTION_ROUNDS = 100_000


def growth(decision: Decision) -> float:
    """The tokens an average round so far added to the prompt."""
    return (decision.whole - decision.head) / decision.round if decision.round > 0 else 0.0


class _Rates(NamedTuple):
    """How the figures grow per projected round: ``g`` tokens of prompt, of which
    ``kept`` stay whole (each rewritten at ``premium`` a token) and ``removed`` go."""

    g: float
    kept: float
    removed: float
    premium: float


def _rates(decision: Decision) -> _Rates:
    g = growth(decision)
    taken = decision.removed + decision.kept  # what the bands take out, the kept included
    share = decision.kept / taken if taken > 0 else 0.0
    premium = max(decision.write - decision.read, 0.0)
    return _Rates(g, g * share, g * (1.0 - share), premium)


def projected_unmet(decision: Decision, rounds: int) -> str | None:
    """:meth:`~.cost_plan.Decision.unmet` ``rounds`` later, if each round added
    :func:`growth` tokens to the prompt and to what the bands would take out, of
    which the share kept now stays kept."""
    return _unmet_at(decision, _rates(decision), rounds)


def _unmet_at(decision: Decision, rates: _Rates, rounds: int) -> str | None:
    g, read = rates.g, decision.read
    # the read cost carried grows with all the bands take out, the kept included
    taken = decision.removed + decision.kept
    carried = decision.carried + read * (taken * rounds + g * rounds * (rounds + 1) / 2)
    billed = (
        decision.billed
        + rounds * (decision.prompt * read + g * decision.write)
        + read * g * rounds * (rounds - 1) / 2
    )
    return unmet_test(
        decision,
        decision.prompt + g * rounds,
        carried,
        decision.removed + rates.removed * rounds,
        decision.horizon * (decision.round + rounds) / decision.round,
        billed,
        decision.rewrite + rates.kept * rates.premium * rounds,
    )


def rounds_to_pay(decision: Decision) -> int | None:
    """The first round ahead at which :func:`projected_unmet` is None (None: the
    decision compacted, or it would not within ``PROJECTION_ROUNDS``).

    Each test, projected, is a quadratic in the rounds ahead (``a*j*j + b*j +
    c >= 0``). The rounds at which all of them pass form a few intervals, and
    the first whole round of the first one is 0 or next to a root of one of
    them: those few candidates are tried in order with the tests themselves,
    where searching the rounds one by one called them a score of times.
    """
    if decision.unmet() is None or decision.round <= 0 or growth(decision) <= 0:
        return None
    rates = _rates(decision)
    g, grown_kept, grown_removed, premium = rates
    r, w = decision.read, decision.write
    rewritten = grown_kept * premium  # the rewrite's growth per round
    taken = decision.removed + decision.kept
    per_round = decision.horizon / decision.round * r  # the horizon test's factor, per round
    tests = (
        (0.0, g, decision.prompt - decision.trigger),
        (
            r * g / 2,
            r * (taken + g / 2) - decision.batch * rewritten,
            decision.carried - decision.batch * decision.rewrite,
        ),
        (
            per_round * grown_removed,
            per_round * (decision.removed + grown_removed * decision.round) - rewritten,
            per_round * decision.removed * decision.round - decision.rewrite,
        ),
        (
            decision.risk * r * g / 2,
            decision.risk * (decision.prompt * r + g * w - r * g / 2) - rewritten,
            decision.risk * decision.billed - decision.rewrite,
        ),
    )
    candidates = {0}
    for a, b, c in tests:
        for root in _roots(a, b, c):
            if 0 <= root <= PROJECTION_ROUNDS:
                # the rounds around it too: a root a hair off its float value
                whole = math.ceil(root)
                candidates.update(range(max(0, whole - 1), whole + 2))
    for rounds in sorted(candidates):
        if _unmet_at(decision, rates, rounds) is None:
            return rounds
    return None


def _roots(a: float, b: float, c: float) -> tuple[float, ...]:
    """The real roots of ``a*x*x + b*x + c`` (of ``b*x + c`` when ``a`` is 0)."""
    if a == 0:
        return (-c / b,) if b != 0 else ()
    discriminant = b * b - 4 * a * c
    if discriminant < 0:
        return ()
    root = math.sqrt(discriminant)
    return ((-b - root) / (2 * a), (-b + root) / (2 * a))


def more_tokens(decision: Decision) -> int | None:
    """About how many more tokens of prompt until the rule's tests all pass."""
    rounds = rounds_to_pay(decision)
    return None if rounds is None else max(1, round(growth(decision) * rounds))
