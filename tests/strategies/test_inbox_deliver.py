"""The ``inbox`` strategy proper: :func:`deliver` turns one pickup into messages, purely."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd import Aborted
from scoutd.inbox import Pickup
from scoutd.strategies.inbox import deliver

MESSAGES = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": st.text()}),
    max_size=5,
)


@given(MESSAGES, st.lists(st.text(), max_size=5))
def test_notices_are_appended_in_pickup_order_and_the_input_is_untouched(
    messages: list[Any], notices: list[str]
) -> None:
    before = copy.deepcopy(messages)
    out, report = deliver(messages, Pickup(list(notices)))
    assert messages == before
    assert out[: len(messages)] == messages
    assert out[len(messages) :] == [{"role": "user", "content": text} for text in notices]
    assert report.strategy == "inbox" and report.inbox_delivered == len(notices)
    added = sum(len(text) for text in notices)
    assert report.chars_after - report.chars_before == added


def test_an_abort_raises_its_reason() -> None:
    with pytest.raises(Aborted) as caught:
        deliver([{"role": "user", "content": "x"}], Pickup([], "budget exhausted"))
    assert caught.value.reason == "budget exhausted"


def test_an_empty_pickup_changes_nothing() -> None:
    messages = [{"role": "user", "content": "x"}]
    out, report = deliver(messages, Pickup([]))
    assert out == messages and out is not messages and report.inbox_delivered == 0
