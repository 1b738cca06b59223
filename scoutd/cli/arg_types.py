"""Option types for the command line: a value out of its bounds is a usage error.

argparse turns the ``ArgumentTypeError`` these raise into one usage line and
exit 2, before anything runs: a count of 0 that would make a run check
nothing, a price of ``inf`` that makes every figure NaN, a timeout of ``nan``,
an empty file name that would otherwise read as no option at all.
Shared by the ``scoutd`` verbs, ``scoutd simulate`` and the operator scripts.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["integer", "path", "real"]


def integer(minimum: int) -> Callable[[str], int]:
    """An integer ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        return value

    parse.__name__ = "integer"  # argparse's "invalid integer value" otherwise names parse
    return parse


def real(
    minimum: float = 0.0,
    *,
    above: bool = False,
    maximum: float = math.inf,
    infinite: bool = False,
) -> Callable[[str], float]:
    """A number ``>= minimum`` (``> minimum`` if ``above``) and ``<= maximum``; finite
    unless ``infinite`` (a lifetime that never ends); never NaN."""
    low = ">" if above else ">="
    kind = "a number" if infinite else "a finite number"
    bounds = f"{low} {minimum:g}" + ("" if maximum == math.inf else f" and <= {maximum:g}")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        fits = (value > minimum if above else value >= minimum) and value <= maximum
        if not fits or not (infinite or math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be {kind} {bounds}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


def path(text: str) -> str:
    """A file name that is not empty: ``--config ''`` (a variable left unset in a
    script) must not quietly mean "no --config", the default file instead."""
    if not text:
        raise argparse.ArgumentTypeError("must name a file, got an empty string")
    return text
