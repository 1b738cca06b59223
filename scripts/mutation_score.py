"""Print the mutation score of each module from mutmut's results (scripts/mutation).

The score counts killed and timed-out mutants over every generated mutant of
the module: a mutant no test reaches counts as a survivor. Lines excluded with
``# pragma: no mutate`` generate no mutant (docs/TESTING.md says when that is
allowed).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, defaultdict

CAUGHT = frozenset(("killed", "timeout", "caught by type check"))


def _module(mutant: str) -> str:
    """``scoutd.strategies.text.x_truncate_string__mutmut_3`` -> ``scoutd.strategies.text``."""
    return mutant.split("__mutmut_")[0].rsplit(".", 1)[0]


def main() -> int:
    listing = subprocess.run(
        [".venv/bin/mutmut", "results", "--all", "true"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    for line in listing.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if "__mutmut_" in name:
            statuses[_module(name)][status] += 1
    if not statuses:
        print("no mutmut results: run scripts/mutation first", file=sys.stderr)
        return 1
    print(f"{'module':36} {'mutants':>7} {'caught':>7} {'survived':>8} {'other':>6} {'score':>7}")
    for module, counts in sorted(statuses.items()):
        total = sum(counts.values())
        caught = sum(counts[s] for s in CAUGHT)
        survived = counts["survived"]
        other = total - caught - survived  # no tests, not checked, suspicious, ...
        if counts["not checked"] == total:
            print(f"{module:36} {total:7} {'(not run yet)':>31}")
            continue
        print(
            f"{module:36} {total:7} {caught:7} {survived:8} {other:6} {100 * caught / total:6.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
