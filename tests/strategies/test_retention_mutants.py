"""The retention's corners that its mutants showed untested (scoutd.strategies.retention).

An output no call asked for has no key (its call tells what it holds, and it
has none), nor has a pair the index does not hold yet; a growing index is read
from where the last look stopped; and the budget is a count of tokens down to
the last one. Expectations are written by hand from the module's docstrings.
"""

from __future__ import annotations

import json
from typing import Any, SupportsIndex

from scoutd.strategies.retention import Keys, PairCalls, retain
from scoutd.strategies.tool_kinds import READ, SEARCH
from scoutd.strategies.tool_messages import index_tools


def call(ident: str, command: str) -> dict[str, Any]:
    """A scout-format shell call."""
    body = {"name": "bash", "arguments": {"command": command}, "id": ident}
    return {"role": "function_call", "content": json.dumps(body)}


def output(ident: str, text: str) -> dict[str, Any]:
    body = {"name": "bash", "content": text, "id": ident}
    return {"role": "function_call_output", "content": json.dumps(body)}


def test_an_output_no_call_asked_for_has_no_key() -> None:
    """Pair 2 is an output under an id no call has; the newest tool is a call still
    waiting for its output: neither gives pair 2, nor the pairs after the index, a key."""
    messages = [
        {"role": "user", "content": "Go."},
        call("c1", "cat a.py"),
        output("c1", "a"),
        output("zz", "stray"),
        call("c3", "grep -rn foo src"),
        output("c3", "src/x.py:1: foo"),
        call("c4", "cat b.py"),
    ]
    index = index_tools(messages)
    assert (index.outputs, index.is_call[-1]) == (3, True)  # the case is what it says
    keys = PairCalls(index).keys_to(5)
    assert keys.keys == [None, (READ, "a.py"), None, (SEARCH, "grep -rn foo src"), None, None]
    assert keys.retainable == [1, 3]


class CountedReads(list[bool]):
    """A list that counts the reads of its items by index."""

    reads = 0

    def __getitem__(self, at: SupportsIndex) -> bool:  # type: ignore[override]
        CountedReads.reads += 1
        return super().__getitem__(at)


def test_a_growing_index_is_read_from_where_the_last_look_stopped() -> None:
    messages = [{"role": "user", "content": "Go."}]
    for number in range(1, 7):
        messages += [call(f"c{number}", f"cat f{number}.py"), output(f"c{number}", "x")]
    index = index_tools(messages[:5])  # two pairs
    index.is_call = CountedReads(index.is_call)
    CountedReads.reads = 0
    pairs = PairCalls(index)
    assert pairs.keys_to(2).keys[1:] == [(READ, "f1.py"), (READ, "f2.py")]
    index.extend(messages, 5)  # four pairs more
    found = pairs.keys_to(6)
    assert found.keys[1:] == [(READ, f"f{number}.py") for number in range(1, 7)]
    assert CountedReads.reads == 12  # each of the 12 tools once


def test_the_budget_counts_down_to_its_last_token() -> None:
    keys = Keys()
    keys.extend([(READ, "a.py"), (READ, "b.py")])
    # pair 1 costs 5 - 4 = 1 token whole (shortened band), pair 2 nothing more
    counts = ([0, 5, 9], [0, 4, 8], [0, 1, 1])
    assert retain(keys, counts, 2, (0, 2), 1, 5) == ((1, 2), 1)
    assert retain(keys, counts, 2, (0, 1), 1, 5) == ((1,), 1)
    # no budget keeps nothing, not even an output that costs nothing
    assert retain(keys, counts, 2, (0, 2), 0, 5) == ((), 0)
    # nothing in the bands: nothing kept, whatever the budget
    assert retain(keys, counts, 2, (0, 0), 10, 5) == ((), 0)
