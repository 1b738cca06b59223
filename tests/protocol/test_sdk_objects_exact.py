"""Where and how an SDK's objects are read, each case's JSON written out by hand.

The SDKs send a model as ``model_dump(mode="json", exclude_unset=True,
by_alias=True)`` without its ``__api_exclude__`` fields (docs/FORMATS.md,
"Objects of a provider's SDK"): each of those four shows in what a small
model of its own becomes. Where models are looked for (a message, a value,
an item of a list value; a mapping of any type) and what is left as the very
same object are stated for each shape.
"""

from __future__ import annotations

import datetime
from typing import Any

import pydantic
import pytest

import scoutd
from scoutd.protocol.sdk_objects import sent_forms

from ..support.mapping import Message


class Said(pydantic.BaseModel):
    """A message as an SDK may return one: an aliased field, a field never sent."""

    model_config = pydantic.ConfigDict(populate_by_name=True)
    __api_exclude__ = {"parsed"}  # as the SDKs declare it

    role: str = "assistant"
    content: str | None = None
    kind: str = pydantic.Field(default="text", alias="type")
    parsed: dict[str, Any] | None = None
    at: datetime.datetime | None = None


USER = {"role": "user", "content": "go"}


def test_a_model_is_sent_as_json_by_alias_without_its_own_fields() -> None:
    when = datetime.datetime(2026, 12, 6, 1, 2, 3, tzinfo=datetime.UTC)
    said = Said(content="hi", type="note", parsed={"x": 1}, at=when)
    assert sent_forms([USER, said]) == [
        USER,
        {"content": "hi", "type": "note", "at": "2026-12-06T01:02:03Z"},
    ]
    assert sent_forms([USER, Said(role="assistant")]) == [USER, {"role": "assistant"}]
    assert sent_forms(["no message", Said()]) == ["no message", {}]


def test_a_model_in_a_mapping_of_another_type_is_read() -> None:
    messages = [USER, Message(role="assistant", content=[Said(content="a")], n=1)]
    assert sent_forms(messages) == [
        USER,
        {"role": "assistant", "content": [{"content": "a"}], "n": 1},
    ]
    value = [USER, Message(role="assistant", content=Said(content="b"))]
    assert sent_forms(value) == [USER, {"role": "assistant", "content": {"content": "b"}}]


def test_mappings_of_another_type_without_models_are_left_alone() -> None:
    messages = [Message(role="user", content="a"), Message(role="user", content=["b"])]
    assert sent_forms(messages) is None
    assert sent_forms([USER, (1, 2), Message(role="user", content=(USER,))]) is None


def test_what_holds_no_model_in_a_message_that_holds_one_stays_the_very_object() -> None:
    extra = {"trace": [1, 2]}
    pair = ("kept", {"n": 1})
    message = {"role": "assistant", "content": [Said(content="a"), extra], "meta": pair}
    converted = sent_forms([USER, message])
    assert converted is not None and converted[0] is USER
    sent = converted[1]
    assert sent == {"role": "assistant", "content": [{"content": "a"}, extra], "meta": pair}
    assert sent["content"][1] is extra and sent["meta"] is pair
    assert message["content"][0] == Said(content="a")  # the input as it was


def test_models_deeper_in_a_message_that_holds_one_are_read_too() -> None:
    """Deeper models of a message already read are converted, in a tuple too (as a list)."""
    message = {
        "role": "assistant",
        "content": [Said(content="a")],
        "more": ({"inner": Said(content="b")}, "x"),
    }
    converted = sent_forms([message])
    assert converted == [
        {
            "role": "assistant",
            "content": [{"content": "a"}],
            "more": [{"inner": {"content": "b"}}, "x"],
        }
    ]


def test_a_conversation_of_mappings_is_prepared_as_its_json() -> None:
    """Through ``prepare``: the provider receives JSON values, the same as the dicts give."""
    messages: list[Any] = [
        Message(role="user", content="go"),
        Message(role="assistant", content=[Said(content="done", type="text")]),
    ]
    prepared = scoutd.prepare(messages, "none", format="anthropic")
    assert prepared.messages[1] == {
        "role": "assistant",
        "content": [{"content": "done", "type": "text"}],
    }
    assert prepared.messages[0] is messages[0]


@pytest.mark.parametrize(
    "bad", [iter([USER]), {USER["role"]}, iter([Said()]), iter([{"content": Said()}])]
)
def test_what_is_no_sequence_is_not_read(bad: Any) -> None:
    assert sent_forms(bad) is None


def test_values_of_every_type_beside_a_model() -> None:
    plain = {"role": "user", "content": "u", "n": 1, "x": None, "f": 0.5, "ok": True}
    converted = sent_forms([plain, Said(content="a")])
    assert converted == [plain, {"content": "a"}] and converted[0] is plain
