"""Code the caller hands scoutd (a registered
function, a plugin object, a callable) is held to the message rule where it
returns, in every format alike, with an error that names it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from scoutd import prepare, register_strategy, unregister_strategy
from scoutd.strategies.base import PrepareContext
from scoutd.strategies.report import StrategyReport, plain_report
from tests.formats import conversations

CONVERSATIONS = {
    "openai-chat": conversations.chat(3),
    "anthropic": conversations.anthropic(3),
    "openai-responses": conversations.responses(3),
    "scout": [{"role": "user", "content": "go"}],
}


def _with_a_string(messages: list[Any]) -> list[Any]:
    return ["not a message", *messages]


class _ObjectStrategy:
    """A strategy object taken as it is (docs/STRATEGIES.md) that returns a bad list."""

    name = "bad_object"
    appends_only = False
    keeps_prefix = False
    rounds = None

    def run(self, messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
        result = [*messages, 42]
        return result, plain_report(self.name, messages, result)


@pytest.mark.parametrize("fmt", sorted(CONVERSATIONS))
def test_a_registered_function_returning_a_non_object_is_named(fmt: str) -> None:
    register_strategy("bad_strings", _with_a_string)
    try:
        with pytest.raises(TypeError, match="'bad_strings' returned str at 0"):
            prepare(CONVERSATIONS[fmt], "bad_strings", format=fmt)
    finally:
        unregister_strategy("bad_strings")


@pytest.mark.parametrize("fmt", sorted(CONVERSATIONS))
def test_a_strategy_object_returning_a_non_object_is_named(fmt: str) -> None:
    register_strategy("bad_object", _ObjectStrategy())
    try:
        with pytest.raises(TypeError, match="'bad_object' returned int at"):
            prepare(CONVERSATIONS[fmt], "bad_object", format=fmt)
    finally:
        unregister_strategy("bad_object")


@pytest.mark.parametrize("fmt", sorted(CONVERSATIONS))
@pytest.mark.parametrize(
    ("returned", "named"),
    [(None, "NoneType, expected a list"), (("x",), "tuple, expected a list")],
)
def test_a_callable_returning_no_list_is_named(fmt: str, returned: Any, named: str) -> None:
    with pytest.raises(TypeError, match=f"'<callable>' returned {named}"):
        prepare(CONVERSATIONS[fmt], lambda messages: returned, format=fmt)


def test_a_callable_returning_messages_still_works() -> None:
    messages = CONVERSATIONS["openai-chat"]
    assert prepare(messages, lambda view: view, format="openai-chat").messages == messages
