"""The replacing form of the prompt delta (docs/PROTOCOL.md, incremental sessions):
single messages replaced by index, checked by the CRC of per-message CRCs."""

from __future__ import annotations

import json
import zlib
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.delta import DeltaDecoder, DeltaEncoder, DeltaMismatch, PromptDelta


def _message(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"message {n}"}


def _wire(delta: PromptDelta) -> dict[str, Any]:
    """The delta as a client receives it: through JSON."""
    decoded: dict[str, Any] = json.loads(msgspec.json.encode(delta))
    return decoded


def _documented_checksum(messages: list[Any]) -> int:
    """The checksum as docs/PROTOCOL.md defines it, computed independently."""
    parts = b""
    for message in messages:
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        parts += zlib.crc32(text).to_bytes(4, "little")
    return zlib.crc32(parts)


# A prompt's next version: some messages replaced, the end cut, new ones appended.
edits = st.tuples(
    st.lists(st.integers(min_value=0, max_value=60), max_size=4),  # positions replaced
    st.integers(min_value=0, max_value=8),  # messages cut from the end
    st.integers(min_value=0, max_value=6),  # messages appended
)


@settings(max_examples=200, deadline=None)
@given(first=st.integers(min_value=0, max_value=40), steps=st.lists(edits, max_size=8))
def test_applying_each_delta_gives_exactly_the_prompt(
    first: int, steps: list[tuple[list[int], int, int]]
) -> None:
    encoder, decoder = DeltaEncoder(), DeltaDecoder(replacing=True)
    counter = iter(range(10_000))
    prompt = [_message(next(counter)) for _ in range(first)]
    rounds = [prompt]
    for replaced, cut, appended in steps:
        prompt = list(prompt)
        for position in replaced:
            if position < len(prompt):
                prompt[position] = _message(next(counter))
        del prompt[len(prompt) - min(cut, len(prompt)) :]
        prompt += [_message(next(counter)) for _ in range(appended)]
        rounds.append(prompt)
    previous: list[Any] = []
    for prompt in rounds:
        delta = encoder.delta(prompt, replace=True)
        assert delta.checksum == _documented_checksum(previous[: delta.keep])
        assert all(index < delta.keep for index, _ in delta.replace or ())
        # only what changed travels: every message sent differs from the one it replaces
        for index, message in delta.replace or ():
            assert previous[index] != message
        assert decoder.apply(_wire(delta)) == prompt
        previous = prompt


def test_one_changed_message_travels_alone() -> None:
    encoder, decoder = DeltaEncoder(), DeltaDecoder(replacing=True)
    prompt = [_message(n) for n in range(100)]
    decoder.apply(_wire(encoder.delta(prompt, replace=True)))
    changed = list(prompt)
    changed[3] = {"role": "user", "content": "a notice that changed"}
    changed.append(_message(100))
    delta = encoder.delta(changed, replace=True)
    assert (delta.keep, delta.replace, delta.append) == (100, [(3, changed[3])], [_message(100)])
    assert decoder.apply(_wire(delta)) == changed
    # the running form of the same change resends the whole tail from there
    running_encoder, running = DeltaEncoder(), DeltaDecoder()
    running.apply(_wire(running_encoder.delta(prompt)))
    old = running_encoder.delta(changed)
    assert (old.keep, old.replace, len(old.append)) == (3, None, 98)
    assert running.apply(_wire(old)) == changed


def test_a_changed_end_is_appended_not_replaced() -> None:
    encoder = DeltaEncoder()
    prompt = [_message(n) for n in range(10)]
    encoder.delta(prompt, replace=True)
    changed = [*prompt[:8], _message(80), _message(90)]
    delta = encoder.delta(changed, replace=True)
    assert (delta.keep, delta.replace, delta.append) == (8, [], changed[8:])


def test_switching_forms_starts_over() -> None:
    encoder = DeltaEncoder()
    prompt = [_message(n) for n in range(5)]
    encoder.delta(prompt)
    delta = encoder.delta(prompt, replace=True)
    assert (delta.keep, delta.replace, delta.append) == (0, [], prompt)
    back = encoder.delta(prompt)
    assert (back.keep, back.replace, back.append) == (0, None, prompt)


@pytest.mark.parametrize(
    "bad",
    [
        {"checksum_delta": 1},  # a prefix the receiver does not hold
        {"replace": [[5, {"role": "user", "content": "x"}]]},  # index not below keep
        {"replace": [[-1, {"role": "user", "content": "x"}]]},
        {"replace": None},  # the running form to a replacing decoder
    ],
)
def test_a_delta_that_does_not_fit_is_refused_and_changes_nothing(bad: dict[str, Any]) -> None:
    encoder, decoder = DeltaEncoder(), DeltaDecoder(replacing=True)
    prompt = [_message(n) for n in range(5)]
    decoder.apply(_wire(encoder.delta(prompt, replace=True)))
    delta = _wire(encoder.delta([*prompt, _message(5)], replace=True))
    bad = dict(bad)  # the parameter is shared between runs: leave it whole
    delta["checksum"] += bad.pop("checksum_delta", 0)
    delta.update(bad)
    with pytest.raises(DeltaMismatch):
        decoder.apply(delta)
    assert decoder.prompt == prompt


def test_a_running_decoder_refuses_the_replacing_form() -> None:
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    with pytest.raises(DeltaMismatch):
        decoder.apply(_wire(encoder.delta([_message(0)], replace=True)))


def _twin(message: dict[str, Any], how: int) -> dict[str, Any]:
    """A message ``==`` to ``message`` whose JSON differs: 1 for True, 1.0 for 1, or its
    keys in another order."""
    if how == 0:
        return {**message, "flag": 1 if message["flag"] is True else True}
    if how == 1:
        return {**message, "n": float(message["n"]) if type(message["n"]) is int else 1}
    return dict(reversed(message.items()))


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=12),
    changes=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 2)), min_size=1, max_size=6),
    replacing=st.booleans(),
)
def test_a_message_equal_but_sent_otherwise_travels_again(
    size: int, changes: list[tuple[int, int]], replacing: bool
) -> None:
    """Python's ``==`` takes 1, 1.0 and True, and dicts in another key order, for one
    another; the JSON sent does not: the rebuilt prompt must be the prepared one, byte
    for byte (the oracle is the standard library's JSON of each message)."""
    prompt = [{"role": "user", "content": f"m{i}", "flag": True, "n": 1} for i in range(size)]
    encoder, decoder = DeltaEncoder(), DeltaDecoder(replacing=replacing)
    decoder.apply(_wire(encoder.delta(prompt, replace=replacing)))
    for position, how in changes:
        prompt = list(prompt)
        prompt[position % size] = _twin(prompt[position % size], how)
        rebuilt = decoder.apply(_wire(encoder.delta(prompt, replace=replacing)))
        assert [json.dumps(m) for m in rebuilt] == [json.dumps(m) for m in prompt]
