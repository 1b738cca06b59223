"""The prompt delta codec (scoutd/delta.py): forgetting, full prompts, and copies.

The round trip over generated prompts is in tests/test_incremental.py; these
are the paths it does not take: a sender that forgot its prompt, a receiver
given a full prompt, and the lists each side hands out or takes in, which
the caller may change afterwards.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from scoutd.delta import DeltaDecoder, DeltaEncoder, DeltaMismatch, PromptDelta


def _m(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _crc(messages: list[Any]) -> int:
    """CRC-32 of each message's compact JSON, one after the other (docs/PROTOCOL.md)."""
    return zlib.crc32(b"".join(json.dumps(m, separators=(",", ":")).encode() for m in messages))


def test_a_sender_that_forgot_sends_everything_again() -> None:
    encoder = DeltaEncoder()
    first = [_m("a"), _m("b")]
    encoder.delta(first)
    encoder.forget()
    again = encoder.delta([*first, _m("c")], stable=2)  # a hint about a forgotten prompt
    assert again == PromptDelta(keep=0, append=[*first, _m("c")], checksum=0)
    # and it holds the new prompt from then on
    assert encoder.delta([*first, _m("c"), _m("d")]) == PromptDelta(
        keep=3, append=[_m("d")], checksum=_crc([*first, _m("c")])
    )


def test_a_full_prompt_replaces_what_the_receiver_held() -> None:
    decoder = DeltaDecoder()
    decoder.full([_m("x"), _m("y"), _m("z")])
    given = [_m("a"), _m("b")]
    assert decoder.full(given) == given
    # deltas now apply over the full prompt, not over what came before it
    delta = {"keep": 2, "append": [_m("c")], "checksum": _crc(given)}
    assert decoder.apply(delta) == [*given, _m("c")]
    with pytest.raises(DeltaMismatch):
        decoder.apply({"keep": 3, "append": [], "checksum": _crc([_m("x"), _m("y"), _m("z")])})


def test_the_receiver_keeps_its_own_copies() -> None:
    """Changing a list given to or returned by the decoder does not change its prompt."""
    decoder = DeltaDecoder()
    given = [_m("a")]
    got = decoder.full(given)
    given.append(_m("given"))
    got.append(_m("got"))
    append = [_m("b")]
    delta = {"keep": 1, "append": append, "checksum": _crc([_m("a")])}
    rebuilt = decoder.apply(delta)
    append.append(_m("late"))
    rebuilt.append(_m("rebuilt"))
    assert decoder.apply({"keep": 2, "append": [], "checksum": _crc([_m("a"), _m("b")])}) == [
        _m("a"),
        _m("b"),
    ]


def test_keep_may_be_the_whole_prompt_but_not_more() -> None:
    decoder = DeltaDecoder()
    prompt = [_m("a"), _m("b")]
    decoder.full(prompt)
    assert decoder.apply(PromptDelta(keep=2, append=[], checksum=_crc(prompt))) == prompt
    assert decoder.apply(PromptDelta(keep=0, append=[_m("n")], checksum=0)) == [_m("n")]
    with pytest.raises(DeltaMismatch, match=r"^prompt delta does not apply: keep=2 of 1 messages$"):
        decoder.apply(PromptDelta(keep=2, append=[], checksum=_crc([_m("n"), _m("n")])))
    with pytest.raises(DeltaMismatch, match=r"keep=1 of 1 messages$"):
        decoder.apply(PromptDelta(keep=1, append=[], checksum=_crc([_m("n")]) ^ 1))


def test_a_false_hint_with_other_objects_is_compared_again() -> None:
    """A hint whose messages are not the previous prompt's objects is not trusted."""
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    decoder.apply(encoder.delta([_m("a"), _m("b"), _m("c")]))
    changed = [_m("a"), _m("B"), _m("c"), _m("d")]
    delta = encoder.delta(changed, stable=3)
    assert (delta.keep, delta.append) == (1, changed[1:])
    assert decoder.apply(delta) == changed


def test_the_checksum_chains_over_every_kept_message() -> None:
    encoder = DeltaEncoder()
    prompt = [_m(str(n)) for n in range(5)]
    encoder.delta(prompt[:2])
    encoder.delta(prompt[:4])  # the running CRC continues from the kept prefix
    delta = encoder.delta(prompt)
    assert (delta.keep, delta.checksum) == (4, _crc(prompt[:4]))
    shorter = encoder.delta(prompt[:3])
    assert (shorter.keep, shorter.append, shorter.checksum) == (3, [], _crc(prompt[:3]))
