"""The ``stable`` hint of ``DeltaEncoder.delta`` (docs/PROTOCOL.md, `delta`).

The hint says how many leading messages are unchanged, so that the encoder
need not compare them. The encoder checks a hint only by the identity of its
last message, against the objects it holds, and those are the *older*
prompt's for a prefix it kept by equality. A false hint whose last message is
an object shared with the previous prompt therefore passes, and the receiver
keeps messages the sender changed. ``SessionPrompt`` only gives true hints,
so no user meets this today; the test below is the contract a stricter check
must meet, and fails (strict) the day the check holds.
"""

from __future__ import annotations

from typing import Any

import msgspec

from scoutd.delta import DeltaDecoder, DeltaEncoder


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _round_trip(rounds: list[tuple[list[Any], int]]) -> list[list[Any]]:
    """The prompts a receiver rebuilds from the deltas of ``rounds`` (prompt, hint)."""
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    return [decoder.apply(msgspec.to_builtins(encoder.delta(p, hint))) for p, hint in rounds]


def test_a_true_hint_over_shared_objects_rebuilds_the_prompt() -> None:
    shared = [_user("a"), _user("b")]
    rounds = [(shared, 0), ([*shared, _user("c")], 2), ([*shared, _user("d")], 2)]
    assert _round_trip(rounds) == [prompt for prompt, _ in rounds]


def test_a_hint_whose_last_message_changed_is_not_trusted() -> None:
    first = [_user("a"), _user("b")]
    second = [_user("a"), _user("B")]  # the hinted prefix ends with a new object
    assert _round_trip([(first, 0), (second, 2)]) == [first, second]


def test_a_false_hint_ending_with_a_shared_object_never_corrupts_the_prompt() -> None:
    tail = _user("same object in both prompts")
    first = [_user("old"), tail]
    second = [_user("new"), tail]  # the first message changed: a hint of 2 is false
    assert _round_trip([(first, 0), (second, 2)]) == [first, second]
