"""Which old outputs a compaction keeps whole: the ones the agent is likely to use again.

On recorded real runs almost every fact an agent copies from an old tool
output comes from a file it read or a search it ran, 21 to 80 outputs back;
test logs, builds, git, web pages and task bookkeeping give it little
(docs/ECONOMY.md, "Where the hidden facts come from"), and a read of a few
lines (``sed -n a,bp``, ``Read`` with an offset) gives a third as many facts
per character as a whole file. So at a compaction, walking from the newest
output back, :func:`retain` keeps whole, within a budget of tokens, every
output of the band being compacted that is

- the newest whole read of its file (a later whole read supersedes it), or
- the newest run of its search or listing (the same command run later
  supersedes it),

newest first, skipping one that no longer fits the budget. Everything else is
shortened or dropped as before. The choice is taken only at a compaction, so
the prompt stays byte-stable until the next one.
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from .tool_kinds import READ, SEARCH, CallKind, call_kind
from .tool_messages import ToolBody, ToolIndex

__all__ = ["KEEP_REASONS", "NEVER", "Key", "Keys", "Kept", "PairCalls", "retain", "retention_key"]

# The reason code of each kept output, by its kind (plain data for the report).
KEEP_REASONS = {READ: "newest whole read of its file", SEARCH: "newest run of its search"}


@dataclass(frozen=True, slots=True)
class Kept:
    """The outputs a compaction keeps whole out of its band, oldest first, and why."""

    numbers: tuple[int, ...] = ()
    reasons: tuple[str, ...] = ()


NOTHING = Kept()
# Keys.later of a pair that no later pair supersedes (yet).
NEVER = sys.maxsize

# What a newer output supersedes: (READ, file) for a whole read, (SEARCH, command)
# for a search or listing.
Key = tuple[str, str]


def retention_key(kind: CallKind) -> Key | None:
    """The key of an output the retention may keep (a newer one of the same key
    supersedes it); None for one it never keeps."""
    if kind.kind == READ and kind.lines is None and kind.target is not None:
        return (READ, kind.target)
    if kind.kind == SEARCH:
        return (SEARCH, kind.key)
    return None


class Keys:
    """The :func:`retention_key` of pairs 1, 2, ... as they are found, and what
    supersedes what: what :func:`retain` reads instead of walking every pair.

    ``keys[k]``: pair ``k``'s key; ``retainable``: the pairs with a key, in
    order; ``later[k]``: the next pair with pair ``k``'s key (:data:`NEVER`
    while there is none), so that pair ``k`` is superseded at round ``n``
    exactly when ``later[k] <= n``.
    """

    def __init__(self) -> None:
        self.keys: list[Key | None] = [None]
        self.later: list[int] = [NEVER]
        self.retainable: list[int] = []
        self.newest: dict[Key, int] = {}  # the newest pair of each key so far

    def extend(self, keys: list[Key | None]) -> None:
        """Add the keys of the next pairs."""
        later, retainable, newest = self.later, self.retainable, self.newest
        first = len(self.keys)
        self.keys += keys
        later += [NEVER] * len(keys)
        for pair, key in enumerate(keys, first):
            if key is not None:
                retainable.append(pair)
                before = newest.get(key)
                if before is not None:
                    later[before] = pair
                newest[key] = pair

    def kept(self, numbers: tuple[int, ...]) -> Kept:
        """The pairs ``numbers`` kept whole, with why."""
        keys = self.keys
        return Kept(numbers, tuple(KEEP_REASONS[keys[pair][0]] for pair in numbers))  # type: ignore[index]


class PairCalls:
    """The :class:`Keys` of the pairs of a (growing) tool index, found when asked.

    Only a paired call gives its pair a key (a call without an output tells
    nothing about the output of another); each is classified once. An
    output's partner is set when it arrives and never changes, so a growing
    index is read from where the last look stopped.
    """

    def __init__(self, index: ToolIndex) -> None:
        self.index = index
        # slot 0 is never a paired output: its call would come before it
        self.scanned = 0  # pragma: no mutate (starting at slot 1 reads the same)
        self.slots: dict[int, int] = {}  # call slot by pair number
        self.found = Keys()

    def keys_to(self, number: int) -> Keys:
        """The keys of pairs ``1..number`` at least: of every pair the index has
        an output for, as each of those is final."""
        found = self.found
        if len(found.keys) > number:
            return found
        index, slots = self.index, self.slots
        if self.scanned < len(index.indices):  # pragma: no mutate (when equal the loop is empty)
            numbers, partners, is_call = index.numbers, index.partners, index.is_call
            # an output is paired when it arrives, if ever: its partner is final
            for at in range(self.scanned, len(index.indices)):
                if not is_call[at] and partners[at] != -1:
                    slots[numbers[at]] = partners[at]
            self.scanned = len(index.indices)
        bodies, get = index.bodies, slots.get
        # an unpaired call tells nothing of its pair's output: no key
        found.extend(
            [
                None if (slot := get(pair)) is None else _call_key(bodies[slot])
                for pair in range(len(found.keys), max(number, index.outputs) + 1)
            ]
        )
        return found


def _call_key(body: ToolBody) -> Key | None:
    return retention_key(call_kind(body.name, body.arguments))


def retain(
    keys: Keys,
    counts: tuple[Sequence[int], Sequence[int], Sequence[int]],
    number: int,
    bands: tuple[int, int],
    budget: int,
    lookback: int,
) -> tuple[tuple[int, ...], int]:
    """The outputs a compaction at round ``number`` keeps whole, and the tokens they add.

    Returns the kept pairs' numbers, oldest first (:meth:`Keys.kept` says
    why). ``keys``: those of pairs ``1..number`` at least; ``counts``: the
    prefix sums ``(whole, shortened, bare)`` by pair, from which keeping a pair
    of the shortened band adds its whole size less its shortened one, and one of
    the dropped band its size without remarks (they go with the dropped
    traffic around it); ``bands``: ``(dropped, band_end)``, ``band_end`` being
    the newest pair the compaction shortens or drops (the ones after it stay
    whole anyway, and supersede older ones); ``budget``: tokens the kept outputs
    may add together; ``lookback``: how many pairs before the whole ones are
    looked at (older ones are never kept).

    The replay asks at many rounds, so instead of walking back from ``number``
    collecting the keys seen, it looks only at the pairs with a key inside the
    lookback, and skips a superseded one by ``keys.later`` (docs/PERFORMANCE.md).
    """
    dropped, band_end = bands
    if budget <= 0:  # no retention (an output may cost nothing)
        return (), 0
    retainable, later = keys.retainable, keys.later
    whole, short, bare = counts
    first = bisect_left(retainable, max(1, band_end - lookback + 1))
    left = budget
    kept: list[int] = []
    for pair in reversed(retainable[first : bisect_right(retainable, band_end)]):
        if later[pair] <= number:
            continue  # superseded
        if pair > dropped:
            size = whole[pair] - whole[pair - 1] - short[pair] + short[pair - 1]
        else:
            size = bare[pair] - bare[pair - 1]
        if size <= left:
            left -= size
            kept.append(pair)
    kept.reverse()
    return tuple(kept), budget - left
