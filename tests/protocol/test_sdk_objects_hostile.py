"""SDK objects from a hostile or careless caller (docs/FORMATS.md, "Objects of a provider's
SDK"; docs/RELIABILITY.md, rule 36).

A model whose dump fails or gives no object, a huge or deep one, an exclusion
given by a property, models among dicts, plain messages nested deep beside an
object, and messages replaced between a session's rounds by equal objects that
send other JSON: each is read as the SDK sends it, refused where the
conversation has it, or noticed by the session.
"""

from __future__ import annotations

import copy
from typing import Any

import pydantic
import pytest
from anthropic.types import TextBlock, ToolUseBlock
from openai.types.chat import ChatCompletionMessage

import scoutd
from scoutd.errors import InvalidMessages

from .sdk_more import sent_by

SMALL = {"context_window": 6000}


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [600, 900])
def test_a_deep_plain_message_beside_an_object_is_read(depth: int) -> None:
    """A plain message scoutd reads alone is read beside an SDK object too: only the
    messages holding one are walked (before: refused as nested too deeply from a
    depth of about 500, whatever message held the object)."""
    deep = {"role": "user", "content": [{"type": "text", "text": "t", "data": _nested(depth)}]}
    conversation: list[Any] = [
        deep,
        {"role": "assistant", "content": [TextBlock(type="text", text="hi")]},
    ]
    prompt = scoutd.prepare_prompt(conversation, format="anthropic")
    assert prompt[0] is deep
    assert prompt[1] == {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    with scoutd.Session(format="anthropic") as session:
        assert session.prepare_prompt(conversation[:1])[0] is deep
        assert session.prepare_prompt(conversation) == prompt


class _NoObject(pydantic.BaseModel):
    role: str = "assistant"

    def model_dump(self, **kwargs: Any) -> Any:
        return "not an object"


class _Raises(pydantic.BaseModel):
    role: str = "assistant"

    def model_dump(self, **kwargs: Any) -> Any:
        raise ValueError("no JSON here")


_START = [
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": "a"},
    {"role": "user", "content": "v"},
]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (_NoObject(), "a message must be an object, got str"),
        (_Raises(), "cannot read a _Raises as JSON: no JSON here"),
    ],
)
def test_a_session_names_a_bad_object_where_the_conversation_has_it(bad: Any, reason: str) -> None:
    """As a whole prepare does (before: the session counted from the round's first new
    message, ``message 0`` for the fourth), and keeps what it held."""
    conversation = [*_START, bad]
    with pytest.raises(InvalidMessages) as whole:
        scoutd.prepare_prompt(conversation)
    assert (whole.value.position, whole.value.reason) == (3, reason)
    with scoutd.Session() as session:
        first = session.prepare_prompt(_START)
        with pytest.raises(InvalidMessages) as raised:
            session.prepare_prompt(conversation)
        assert (raised.value.position, raised.value.reason) == (3, reason)
        assert session.prepare_prompt([*_START, {"role": "assistant", "content": "b"}])[:3] == first


def _turn(refusal_set: bool) -> ChatCompletionMessage:
    """An assistant turn as the SDK parses it; with ``refusal`` set or not, the objects
    are equal (pydantic's ``==`` ignores which fields were set) but send other JSON."""
    fields: dict[str, Any] = {"role": "assistant", "content": "Reading it."}
    if refusal_set:
        fields["refusal"] = None
    return ChatCompletionMessage(**fields)


def test_an_equal_object_that_sends_other_json_is_noticed() -> None:
    """A turn replaced by an equal object that sends other JSON: the session's prompt is
    the SDK's JSON of the conversation, as a whole prepare's (before: the old JSON)."""
    user = {"role": "user", "content": "start"}
    conversation: list[Any] = [user, _turn(False), {"role": "user", "content": "go on"}]
    replaced = [user, _turn(True), conversation[2], {"role": "assistant", "content": "ok"}]
    assert replaced[1] == conversation[1]
    assert sent_by("openai-chat", [replaced[1]]) != sent_by("openai-chat", [conversation[1]])
    with scoutd.Session(format="openai-chat") as session:
        session.prepare_prompt(conversation)
        prompt = session.prepare_prompt(replaced)
    assert prompt == scoutd.prepare_prompt(replaced, "none", format="openai-chat")
    assert prompt == sent_by("openai-chat", replaced)
    assert prompt[1] == {"role": "assistant", "content": "Reading it.", "refusal": None}


@pytest.mark.parametrize("equal", [True, False])
def test_a_block_replaced_between_rounds(equal: bool) -> None:
    """A message of objects replaced by another: an equal one (same JSON) keeps the
    session's conversation, an unequal one starts it over; the prompt is always the
    whole prepare's."""
    block = ToolUseBlock(type="tool_use", id="t1", name="bash", input={"n": 1})
    other = ToolUseBlock(type="tool_use", id="t1", name="bash", input={"n": 1 if equal else 2})
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x" * 4000}
    first: list[Any] = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": [result]},
    ]
    second = [first[0], {"role": "assistant", "content": [other]}, first[2]]
    second.append({"role": "assistant", "content": [TextBlock(type="text", text="done")]})
    before = copy.deepcopy(second)
    with scoutd.Session(config=SMALL, format="anthropic") as session:
        session.prepare_prompt(first)
        state = session._state
        prompt = session.prepare_prompt(second)
        assert (session._state is state) is equal
    assert prompt == scoutd.prepare_prompt(second, config=SMALL, format="anthropic")
    assert prompt == scoutd.prepare_prompt(
        sent_by("anthropic", second), config=SMALL, format="anthropic"
    )
    assert second == before


class _Excluding(pydantic.BaseModel):
    """An exclusion given by a property, as ``ParsedResponseOutputMessage`` gives it."""

    role: str = "assistant"
    content: str = ""
    secret: str = ""

    @property
    def __api_exclude__(self) -> set[str]:
        return {"secret"}


class _Huge(pydantic.BaseModel):
    role: str = "user"
    content: str = ""


class _DeepBlock(pydantic.BaseModel):
    type: str = "text"
    text: str = "t"
    data: Any = None


def test_hostile_but_dumpable_models() -> None:
    """An exclusion property, a huge dump, a deep one and models mixed with dicts are
    read as the SDK's serializer writes them; session and whole prepare agree."""
    deep = _DeepBlock(data=_nested(200))
    conversation: list[Any] = [
        _Huge(content="word " * 200_000),
        _Excluding(content="shown", secret="hidden"),
        {"role": "user", "content": [deep, {"type": "text", "text": "plain"}]},
        {
            "role": "assistant",
            "content": [TextBlock(type="text", text="mixed"), {"type": "text", "text": "d"}],
        },
    ]
    before = copy.deepcopy(conversation)
    prompt = scoutd.prepare_prompt(conversation, "none")
    assert prompt[1] == {"content": "shown"}
    assert len(prompt[0]["content"]) == 1_000_000
    assert prompt[2]["content"][0] == {"data": _nested(200)}
    assert prompt[3]["content"] == [
        {"type": "text", "text": "mixed"},
        {"type": "text", "text": "d"},
    ]
    with scoutd.Session() as session:
        for held in range(1, len(conversation) + 1):
            assert session.prepare_prompt(conversation[:held]) == prompt[:held]
    assert conversation == before


def test_a_dump_too_deep_for_pydantic_is_refused_where_it_stands() -> None:
    """A model nested deeper than pydantic serializes: refused with its position, in a
    whole prepare and in a session alike, never a crash."""
    conversation: list[Any] = [
        *_START,
        {"role": "user", "content": [_DeepBlock(data=_nested(5000))]},
    ]
    for prepare in (scoutd.prepare_prompt, scoutd.Session().prepare_prompt):
        with pytest.raises(InvalidMessages) as raised:
            prepare(conversation)
        assert raised.value.position == 3
