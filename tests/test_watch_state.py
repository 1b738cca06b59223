"""The watcher's pure helpers against plain oracles."""

from __future__ import annotations

from collections import Counter

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scoutd.watch_state import beneath

# Absolute paths over a few names, so that nesting, siblings sharing a prefix
# ("/a" and "/ab") and the root itself all come up often.
_NAMES = st.sampled_from(["a", "ab", "b", "a.b"])
_PATHS = st.lists(_NAMES, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _inside(directory: str, top: str) -> bool:
    """The oracle: ``directory`` lies strictly inside ``top``, by its text."""
    return directory != top and directory.startswith(top.rstrip("/") + "/")


_REACHED: Counter[str] = Counter()


@settings(max_examples=400, derandomize=True, database=None)
@given(tops=st.sets(_PATHS, max_size=4), directories=st.lists(_PATHS, max_size=8))
def test_beneath_finds_what_lies_inside_a_top_in_order(
    tops: set[str], directories: list[str]
) -> None:
    expected = [d for d in directories if any(_inside(d, top) for top in tops)]
    assert beneath(tops, directories) == expected
    for d in directories:
        if any(_inside(d, top) for top in tops):
            _REACHED["inside" if "/" not in tops else "under the root"] += 1
        elif any(d.startswith(top) and d != top for top in tops):
            _REACHED["a sibling sharing a prefix"] += 1  # "/ab" is not inside "/a"
        elif d in tops:
            _REACHED["a top itself"] += 1
    event(f"{len(expected)} found")


def test_beneath_reaches_every_interesting_case() -> None:
    _REACHED.clear()
    test_beneath_finds_what_lies_inside_a_top_in_order()
    for case in ("inside", "under the root", "a sibling sharing a prefix", "a top itself"):
        assert _REACHED[case] >= 20, (case, dict(_REACHED))
