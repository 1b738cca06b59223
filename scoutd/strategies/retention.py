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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .tool_kinds import OTHER, READ, SEARCH, CallKind, call_kind
from .tool_messages import ToolIndex

__all__ = ["KEEP_REASONS", "Key", "Kept", "PairCalls", "retain", "retention_key"]

# The reason code of each kept output, by its kind (plain data for the report).
KEEP_REASONS = {READ: "newest whole read of its file", SEARCH: "newest run of its search"}


@dataclass(frozen=True, slots=True)
class Kept:
    """The outputs a compaction keeps whole out of its band, oldest first, and why."""

    numbers: tuple[int, ...] = ()
    reasons: tuple[str, ...] = ()


NOTHING = Kept()
_UNKNOWN = CallKind(OTHER)

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


class PairCalls:
    """What the call of each pair of a (growing) tool index does, looked up when asked.

    Only a paired call gives its pair a kind (a call without an output tells
    nothing about the output of another); each is classified once. An
    output's partner is set when it arrives and never changes, so a growing
    index is read from where the last look stopped.
    """

    def __init__(self, index: ToolIndex) -> None:
        self.index = index
        self.scanned = 0
        self.slots: dict[int, int] = {}  # call slot by pair number
        self.kinds: dict[int, CallKind] = {}
        self.keys: list[Key | None] = [None]  # retention_key of each pair, by number

    def kind(self, number: int) -> CallKind:
        """What the call of pair ``number`` does (``other`` when unknown)."""
        found = self.kinds.get(number)
        if found is not None:
            return found
        index = self.index
        if self.scanned < len(index.indices):
            numbers, partners, is_call = index.numbers, index.partners, index.is_call
            # an output is paired when it arrives, if ever: its partner is final
            for at in range(self.scanned, len(index.indices)):
                if not is_call[at] and partners[at] != -1:
                    self.slots[numbers[at]] = partners[at]
            self.scanned = len(index.indices)
        slot = self.slots.get(number)
        if slot is None:
            found = _UNKNOWN
        else:
            body = index.bodies[slot]
            found = call_kind(body.name, body.arguments)
        self.kinds[number] = found
        return found

    def keys_to(self, number: int) -> list[Key | None]:
        """:func:`retention_key` of pairs ``1..number`` (at their numbers), each found once."""
        keys = self.keys
        if len(keys) <= number:
            keys += [retention_key(self.kind(k)) for k in range(len(keys), number + 1)]
        return keys


def retain(
    keys: Sequence[Key | None],
    size_of: Callable[[int], int],
    number: int,
    band_end: int,
    budget: int,
    lookback: int,
) -> Kept:
    """The outputs among ``1..band_end`` kept whole at a compaction at round ``number``.

    ``keys[k]``: pair ``k``'s :func:`retention_key` (for ``k <= number``);
    ``size_of(k)``: the tokens keeping it whole adds to the prompt;
    ``band_end``: the newest pair the compaction shortens or drops (the ones
    after it stay whole anyway and supersede older ones); ``budget``: tokens
    the kept outputs may hold together; ``lookback``: how many pairs before the
    whole ones are looked at (older ones are never kept).
    """
    if budget <= 0 or band_end <= 0:
        return NOTHING
    newer: set[Key] = set()  # keys of the outputs walked so far (newer ones)
    kept: list[int] = []
    reasons: list[str] = []
    left = budget
    oldest = max(1, band_end - lookback + 1)
    for pair in range(number, oldest - 1, -1):
        key = keys[pair]
        if key is None or key in newer:
            continue  # never kept, or superseded
        newer.add(key)
        if pair > band_end:
            continue
        size = size_of(pair)
        if size <= left:
            left -= size
            kept.append(pair)
            reasons.append(KEEP_REASONS[key[0]])
    return Kept(tuple(reversed(kept)), tuple(reversed(reasons)))
