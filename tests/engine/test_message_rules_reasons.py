"""What the message rule says when it refuses, word for word, and what ``start``
(the messages already checked) spares (docs/PROTOCOL.md, "Messages")."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from scoutd.engine.message_rules import (
    InvalidMessages,
    MessageProblem,
    check_messages,
    check_plain,
    message_problem,
    too_deep,
)


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ("hello", MessageProblem(None, "must be a list of messages, got str")),
        (b"hello", MessageProblem(None, "must be a list of messages, got bytes")),
        ({"role": "user"}, MessageProblem(None, "must be a list of messages, got dict")),
        (5, MessageProblem(None, "must be a list of messages, got int")),
        ([{}, 5], MessageProblem(1, "a message must be an object, got int")),
        ([{}, {1: "x"}], MessageProblem(1, "a message's keys must be strings, got int")),
        ([{}, {"a": 1, b"b": 2}], MessageProblem(1, "a message's keys must be strings, got bytes")),
        (({"role": "user"},), None),  # any sequence
        ([OrderedDict(role="user")], None),  # any mapping
    ],
)
def test_the_problem_named(messages: Any, problem: MessageProblem | None) -> None:
    assert message_problem(messages) == problem


def test_the_messages_already_checked_are_not_checked_again() -> None:
    messages: list[Any] = [5, {}, {1: "x"}]
    assert message_problem(messages, start=1) == MessageProblem(
        2, "a message's keys must be strings, got int"
    )
    assert message_problem(messages[:2], start=1) is None
    check_messages(messages[:2], start=1)
    with pytest.raises(InvalidMessages) as refused:
        check_messages(messages, start=1)
    assert (refused.value.position, refused.value.reason) == (
        2,
        "a message's keys must be strings, got int",
    )


def test_every_message_is_checked_unless_told() -> None:
    with pytest.raises(InvalidMessages) as refused:
        check_messages([5, {}])
    assert refused.value.position == 0


def test_plain_is_a_list_of_dicts_with_string_keys() -> None:
    assert check_plain([{"role": "user"}]) is True
    assert check_plain([5, {"role": "user"}], start=1) is True
    assert check_plain(({"role": "user"},)) is False  # kept, read the careful way
    assert check_plain([OrderedDict(role="user")]) is False


def test_too_deep_names_no_message() -> None:
    refused = too_deep()
    assert isinstance(refused, InvalidMessages)
    assert refused.position is None
    assert refused.reason == "nested too deeply to read (past the recursion limit)"
