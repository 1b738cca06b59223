"""A failed round of ``scoutd.Session`` leaves its conversation as it was.

Random runs of rounds, some of them failing (a message that breaks the rule,
formats mixed, nesting past the recursion limit, an unknown strategy, a
registered strategy that raises, a replaced conversation that fails), are fed
to one session; a second session is fed only the rounds that succeed. After
every round the two answer every ``recall`` alike, hold as many bytes, and give
the same next prompt: the failed rounds left no trace (as a daemon session's
failed calls leave none, docs/PROTOCOL.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.engine.registry import register_strategy, unregister_strategy
from scoutd.errors import FormatError, InvalidMessages, UnknownStrategy
from tests.support.daemon import conversation
from tests.support.nesting import nested, too_deep

FULL = conversation(pairs=30, user_every=0, output_size=300)
CONFIG = {"recall": True, "context_window": 4000, "cost_full_tool_outputs": 3}
DEFAULT = ["shorten_tools_cost_aware", "inbox"]
RAISING = "raises_on_boom"
KINDS = ("invalid", "formats", "deep", "unknown", "raises", "replaced")
ANTHROPIC = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "x"}}],
}


def _raising(messages: list[Any]) -> list[Any]:
    """A strategy that fails on a message saying BOOM."""
    if any("BOOM" in str(message.get("content")) for message in messages):
        raise ValueError("the strategy met BOOM")
    return messages


def failing(kind: str, conversation: list[Any]) -> tuple[list[Any], list[str], type[Exception]]:
    """A round of ``kind`` that fails: its messages, strategies and error."""
    if kind == "invalid":
        return [*conversation, "not a message"], DEFAULT, InvalidMessages
    if kind == "formats":
        return [*conversation, ANTHROPIC], DEFAULT, FormatError
    if kind == "deep":
        return (
            [*conversation, {"role": "user", "content": nested(too_deep())}],
            DEFAULT,
            InvalidMessages,
        )
    if kind == "unknown":
        return conversation, ["shorten_tools_cost_aware", "no_such_strategy"], UnknownStrategy
    if kind == "raises":
        boom = {"role": "user", "content": "BOOM"}
        return [*conversation, boom], ["shorten_tools_cost_aware", RAISING], ValueError
    other = {"role": "system", "content": "You are another agent."}
    return [other, *conversation[1:], ANTHROPIC], DEFAULT, FormatError


def questions(messages: Sequence[Any]) -> Iterator[tuple[str | None, str | None]]:
    """Every handle up to one past the outputs of ``messages``, and a search for
    each output's own text."""
    outputs = [
        m for m in messages if isinstance(m, dict) and m.get("role") == "function_call_output"
    ]
    for number in range(1, len(outputs) + 2):
        yield f"#{number}", None
    for output in outputs:
        content = output["content"]
        start = content.index('"content": "') + len('"content": "')
        yield None, content[start : start + 6]


@pytest.fixture
def raising_strategy() -> Iterator[None]:
    register_strategy(RAISING, _raising)
    try:
        yield
    finally:
        unregister_strategy(RAISING)


ROUNDS = st.lists(
    st.tuples(st.integers(min_value=0, max_value=4), st.sampled_from((None, *KINDS))),
    min_size=2,
    max_size=10,
)


def run_rounds(rounds: list[tuple[int, str | None]], reached: Counter[str]) -> None:
    """Each round grows the conversation by some pairs and either succeeds or fails;
    ``reached`` counts the failed rounds that brought new messages, by kind."""
    subject = scoutd.Session(config=CONFIG)
    reference = scoutd.Session(config=CONFIG)
    held: list[Any] = []  # the conversation of the last round that succeeded
    pairs = 1
    for grow, kind in rounds:
        pairs = min(pairs + grow, 30)
        current = FULL[: 2 + 2 * pairs]
        if kind is None:
            subject.strategies = reference.strategies = DEFAULT
            assert subject.prepare_prompt(current) == reference.prepare_prompt(current)
            held = current
        else:
            messages, subject.strategies, error = failing(kind, current)
            with pytest.raises(error):
                subject.prepare_prompt(messages)
            if held and len(messages) > len(held):
                reached[kind] += 1
        for handle, search in questions(current):
            assert subject.recall(handle, search) == reference.recall(handle, search), (
                kind,
                handle,
                search,
            )
        assert subject.held_bytes() == reference.held_bytes(), kind


def test_a_failed_round_leaves_no_trace(raising_strategy: None) -> None:
    """Random runs of rounds; every kind of failure is met, after a round that
    succeeded, a few times at least (so the property cannot test nothing)."""
    reached: Counter[str] = Counter()

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(rounds=ROUNDS)
    def property_holds(rounds: list[tuple[int, str | None]]) -> None:
        run_rounds(rounds, reached)

    property_holds()
    assert set(reached) == set(KINDS), reached
    assert min(reached.values()) >= 10, reached
