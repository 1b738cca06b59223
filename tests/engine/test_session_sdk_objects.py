"""``scoutd.Session`` over conversations that hold an SDK's objects (pydantic models):
they are compared by the JSON they send, not by ``==``, and an error names the
position the whole conversation gives (docs/PROTOCOL.md, "Messages")."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

import scoutd
from scoutd import Session
from scoutd.errors import InvalidMessages

from .test_session_failures import scout_run


class Said(pydantic.BaseModel):
    """A message as an SDK's model: ``==`` ignores which fields were set, the sent
    form (the fields set) does not."""

    role: str
    content: str
    name: str | None = None


class Unreadable(pydantic.BaseModel):
    """A model whose sent form cannot be made."""

    role: str = "user"

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("no dump")


def test_a_round_of_models_that_only_adds_reindexes_nothing(resets: list[int]) -> None:
    session = Session()
    messages = scout_run(4)
    session.prepare_prompt(messages)
    said = [*messages, Said(role="user", content="go on")]
    session.prepare_prompt(said)
    session.prepare_prompt([*said, Said(role="user", content="and on")])
    assert resets == []


def test_an_invalid_new_message_is_named_where_the_conversation_has_it() -> None:
    session = Session()
    first = scout_run(2)
    session.prepare_prompt(first)
    with pytest.raises(InvalidMessages) as raised:
        session.prepare_prompt([*first, Said(role="user", content="hi"), 3])
    assert raised.value.position == len(first) + 1
    assert "a message must be an object, got int" in str(raised.value)


def test_a_conversation_of_models_reindexes_nothing_while_it_only_adds(
    resets: list[int],
) -> None:
    session = Session()
    messages: list[Any] = [*scout_run(2), Said(role="user", content="go on")]
    session.prepare_prompt(messages)
    messages = [*messages, *scout_run(3)[-2:]]
    session.prepare_prompt(messages)
    # a held dict the caller replaced with an equal copy is the same message
    copied = [dict(m) if isinstance(m, dict) else m for m in messages]
    session.prepare_prompt(copied)
    assert resets == []


def test_an_equal_model_that_sends_other_json_starts_the_round_over(
    resets: list[int],
) -> None:
    """pydantic's ``==`` ignores which fields were set; the SDK sends only those.
    A model replaced by an equal one that sends another field is a changed
    message, wherever it stands after a replaced plain one."""
    first: list[Any] = [*scout_run(2), Said(role="user", content="go on")]
    session = Session()
    session.prepare_prompt(first)
    replaced = [dict(first[0]), *first[1:-1], Said(role="user", content="go on", name=None)]
    assert replaced == first
    assert session.prepare_prompt(replaced) == scoutd.prepare_prompt(replaced)
    assert resets == [len(first)]
    # started over, it goes on from there: the next round only adds
    session.prepare_prompt([*replaced, *scout_run(3)[-2:]])
    assert resets == [len(first)]


def test_a_model_replaced_by_one_that_cannot_be_read_is_refused() -> None:
    first: list[Any] = [*scout_run(1), Said(role="user", content="go on")]
    session = Session()
    session.prepare_prompt(first)

    class Equal(Unreadable):
        def __eq__(self, other: object) -> bool:
            return True

    with pytest.raises(InvalidMessages) as raised:
        session.prepare_prompt([*first[:-1], Equal()])
    assert raised.value.position == len(first) - 1
