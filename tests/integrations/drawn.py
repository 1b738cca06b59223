"""What the integrations' property tests draw alike (tests/integrations/test_*_properties.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# The properties' examples: fixed (derandomized), no database, no deadline.
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def output(draw: st.DrawFn, n: int) -> str:
    """A tool output of a drawn size (up to 30,000 characters of numbered lines), now and
    then ending on a lone surrogate (a file name of undecodable bytes)."""
    size = draw(st.sampled_from([0, 1, 40, 400, 2_000, 30_000]))
    text = "".join(f"line {n}.{k}: value {k}\n" for k in range(size // 20 + 1))
    if draw(st.integers(0, 29)) == 29:
        text += "\ud800 lone"
    return text
