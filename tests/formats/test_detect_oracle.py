"""Format detection against a plain reading of its rule (docs/FORMATS.md, "Detection").

The oracle below reads one message the way the documentation states the
rule, in its order: a Responses item type, then a ``message`` item with
Responses content, role ``tool`` or a ``tool_calls`` list (OpenAI Chat), a
scout tool role, an Anthropic tool block. Drawn messages mix every signal
with the values that look like one but are not (a ``tool_calls`` of
``None``, a ``message`` item with Anthropic blocks, a type that is no
string, parts that are no mappings), as plain dicts and other mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from scoutd.formats import FormatError, detect, detect_format
from scoutd.formats.detect import Known, first_signal, signals
from scoutd.strategies.columns import columns_of

RESPONSES_ITEMS = ("function_call", "function_call_output", "reasoning", "item_reference")
RESPONSES_PARTS = (
    "input_text",
    "input_image",
    "input_file",
    "output_text",
    "refusal",
    "summary_text",
)
ANTHROPIC_BLOCKS = ("tool_use", "tool_result")
SCOUT_ROLES = ("function_call", "function_call_output")


def _expected(message: Any) -> str | None:
    """The format one message shows, or None: the documented rule, read plainly."""
    if not isinstance(message, Mapping):
        return None
    kind = message.get("type")
    if isinstance(kind, str) and kind in RESPONSES_ITEMS:
        return "openai-responses"
    content = message.get("content")
    if kind == "message":
        if isinstance(content, str):
            return "openai-responses"
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") in RESPONSES_PARTS:
                    return "openai-responses"
    role = message.get("role")
    if role == "tool" or isinstance(message.get("tool_calls"), list):
        return "openai-chat"
    if role in SCOUT_ROLES:
        return "scout"
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") in ANTHROPIC_BLOCKS:
                return "anthropic"
    return None


def _first_of_each(messages: list[Any]) -> dict[str, int]:
    first: dict[str, int] = {}
    for position, message in enumerate(messages):
        shown = _expected(message)
        if shown is not None:
            first.setdefault(shown, position)
    return first


_TYPE = st.sampled_from([*RESPONSES_ITEMS, "message", "text", "tool_use", 5, ["message"], None])
_ROLE = st.sampled_from(["user", "assistant", "tool", *SCOUT_ROLES, "system", None, 3])
_PART = st.one_of(
    st.builds(
        lambda kind, mapping: MappingProxyType({"type": kind}) if mapping else {"type": kind},
        # the blocks thrice: a message shows them only when nothing before decides
        st.sampled_from([*RESPONSES_PARTS, *ANTHROPIC_BLOCKS * 3, "text", "image", 7, None]),
        st.booleans(),
    ),
    st.sampled_from([None, 4, "input_text", ["tool_use"]]),
)
_CONTENT = st.one_of(
    st.sampled_from(["text", None, 3, {"type": "tool_use"}]), st.lists(_PART, max_size=3)
)
_TOOL_CALLS = st.sampled_from([None, [], [{"id": "a"}], "calls", {"id": "a"}])
_ABSENT = object()


@st.composite
def _message(draw: st.DrawFn) -> Any:
    fields = {
        "type": draw(st.one_of(st.just(_ABSENT), _TYPE)),
        "role": draw(st.one_of(st.just(_ABSENT), _ROLE)),
        "content": draw(st.one_of(st.just(_ABSENT), _CONTENT)),
        "tool_calls": draw(st.one_of(st.just(_ABSENT), st.just(_ABSENT), _TOOL_CALLS)),
    }
    message = {key: value for key, value in fields.items() if value is not _ABSENT}
    shape = draw(st.sampled_from(["dict", "dict", "dict", "mapping", "not a mapping"]))
    if shape == "mapping":
        return MappingProxyType(message)
    if shape == "not a mapping":
        return draw(st.sampled_from([None, 3, "tool", ["role", "tool"]]))
    return message


def _some_plain() -> st.SearchStrategy[list[Any]]:
    """Lists of plain dicts with roles and string contents only: the quick path's lists."""
    plain = st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", *SCOUT_ROLES, "system"])},
        optional={"content": st.sampled_from(["x", None]), "name": st.just("n")},
    )
    return st.lists(plain, max_size=6)


def _outcome(found: dict[str, int]) -> str:
    return "none" if not found else "one format" if len(found) == 1 else "mixed"


@settings(max_examples=1500, deadline=None)
@given(st.one_of(st.lists(_message(), max_size=6), _some_plain()))
def test_each_format_is_first_shown_where_the_rule_says(messages: list[Any]) -> None:
    expected = _first_of_each(messages)
    event(_outcome(expected))
    for name in expected:
        event(f"shows {name}")
    assert {name: at for name, (at, _) in signals(messages).items()} == expected
    known = _known(messages)
    if known is not None:  # what a prepare has read of a list of plain dicts
        event("known read")
        assert {name: at for name, (at, _) in signals(messages, known).items()} == expected
    assert first_signal(messages) == min(expected.values(), default=len(messages))
    if len(expected) > 1:
        (first, i), (second, j) = sorted(expected.items(), key=lambda item: item[1])[:2]
        with pytest.raises(FormatError, match="messages mix formats") as raised:
            detect_format(messages, known)
        assert f"message {i} is {first} (" in str(raised.value)
        assert f"but message {j} is {second} (" in str(raised.value)
    else:
        assert detect_format(messages, known) == next(iter(expected), "scout")


def _known(messages: list[Any]) -> Known | None:
    """What a prepare reads of a list of plain dicts before it detects (the keys, and
    the roles and contents' types of a list that may be scout), None for another."""
    if not messages or any(type(message) is not dict for message in messages):
        return None
    keys: set[str] = set().union(*messages)
    columns = None if {"type", "tool_calls"} & keys else columns_of(messages, dicts=True)
    return (keys, None, None) if columns is None else (keys, columns.roles, columns.content_types)


def test_a_plain_list_is_read_by_its_roles_and_what_the_caller_read_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A list of plain dicts whose signals can only be roles is not read message by
    message, and the roles a prepare has read already are not read again."""
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "function_call", "content": "{}"},
        {"role": "function_call_output", "content": "{}"},
    ]
    known = _known(messages)
    assert known is not None and known[1] is not None

    def unexpected(*args: object) -> None:
        raise AssertionError("read again")

    monkeypatch.setattr(detect, "_signal", unexpected)
    assert signals(messages) == {"scout": (1, "role 'function_call'")}
    unnamed = [{"role": None, "content": "x"}, *messages]  # a role may be null
    assert signals(unnamed) == {"scout": (2, "role 'function_call'")}
    monkeypatch.setattr(detect, "_get_role", unexpected)
    monkeypatch.setattr(detect, "_get_content", unexpected)
    assert signals(messages, known) == {"scout": (1, "role 'function_call'")}
    assert detect_format(messages, known) == "scout"


def test_the_edges_of_a_responses_message_item() -> None:
    """A ``message`` item is Responses only by a string content or a Responses part;
    any other content leaves it to the other signals (an Anthropic message dumped
    whole has ``type`` ``message`` too)."""
    responses: list[list[Any]] = [
        [{"type": "input_text", "text": "hi"}],
        [4, {"type": "output_text"}],
        [{"type": 5}, {"type": "refusal"}],
    ]
    for content in responses:
        assert detect_format([{"type": "message", "content": content}]) == "openai-responses"
    others: list[Any] = [None, {"type": "input_text"}, [], [{"type": "text"}], [None, 3]]
    for content in others:
        message = {"type": "message", "role": "user", "content": content}
        assert detect_format([message]) == "scout", content
    blocks = {"type": "message", "role": "assistant", "content": [{"type": "tool_use"}]}
    assert detect_format([blocks]) == "anthropic"
    assert signals([{"type": "message", "content": "hi"}]) == {
        "openai-responses": (0, "an item of type 'message'")
    }
