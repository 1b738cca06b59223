"""Hostile input: whatever the messages hold, an adapter raises nothing but the
mixed-format error, never mutates its input, and a prompt comes back."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd import PromptConfig, prepare
from scoutd.engine.message_rules import InvalidMessages
from scoutd.formats import FormatError
from scoutd.testing.worst import WORST

from .test_adapters import BUILDERS
from .validity import new_problems

TIGHT = PromptConfig(
    epoch_tool_call_threshold=1, epoch_full_tool_calls=1, epoch_compacted_tool_calls=1, epoch_size=1
)
BLOCK_KEYS = (
    *("type", "id", "name", "input", "content", "text", "tool_use_id", "function"),
    *("arguments", "call_id", "output", "role", "tool_calls", "tool_call_id"),
)
MESSAGE_KEYS = (
    *("role", "type", "content", "tool_calls", "tool_call_id", "call_id", "name"),
    *("arguments", "output", "id"),
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=8), st.sampled_from(["c1", "c2"])
)
_words = st.sampled_from(
    [
        "user",
        "assistant",
        "tool",
        "system",
        "function_call",
        "function_call_output",
        "message",
        "reasoning",
        "tool_use",
        "tool_result",
        "text",
        "image",
        "thinking",
        "c1",
        "c2",
    ]
)
_values = st.recursive(
    st.one_of(_scalars, _words),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(BLOCK_KEYS),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)
_message = st.dictionaries(
    st.sampled_from(MESSAGE_KEYS),
    _values,
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(st.one_of(_message, _scalars), max_size=10),
    fmt=st.sampled_from(["auto", "scout", "openai-chat", "openai-responses", "anthropic"]),
    strategy=st.sampled_from(["none", "shorten_tools", "shorten_tools_epoch"]),
)
def test_hostile_messages_never_break_an_adapter(
    messages: list[Any], fmt: str, strategy: str
) -> None:
    snapshot = copy.deepcopy(messages)
    try:
        prepared = prepare(messages, strategy, config=TIGHT, format=fmt, cache_control=True)
    except FormatError:
        assert fmt == "auto"
        return
    except InvalidMessages:  # the one message rule (docs/PROTOCOL.md): objects only
        assert any(not isinstance(message, dict) for message in messages)
        return
    assert messages == snapshot
    assert isinstance(prepared.messages, list)
    if strategy == "none" and prepared.format != "anthropic":
        assert prepared.messages == messages


def _containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value``, itself included."""
    found = [value] if isinstance(value, (dict, list)) else []
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    )
    for child in children:
        found += _containers(child)
    return found


def spoil(data: st.DataObject, messages: list[Any], values: int) -> None:
    """Put ``values`` hostile values at places drawn in ``messages`` (changed in place)."""
    for _ in range(values):
        target = data.draw(st.sampled_from(_containers(messages)))
        value = data.draw(_values)
        if isinstance(target, dict):
            key = data.draw(st.sampled_from([*target.keys(), *BLOCK_KEYS]))
            target[key] = value
        elif target:
            target[data.draw(st.integers(0, len(target) - 1))] = value


@settings(max_examples=200, deadline=None)
@given(
    fmt=st.sampled_from(sorted(BUILDERS)),
    data=st.data(),
    strategy=st.sampled_from(["none", "shorten_tools", "shorten_tools_epoch"]),
)
def test_well_formed_conversations_with_one_hostile_value(
    fmt: str, data: st.DataObject, strategy: str
) -> None:
    messages = BUILDERS[fmt](4)
    spoil(data, messages, data.draw(st.integers(1, 3)))
    snapshot = copy.deepcopy(messages)
    try:
        prepared = prepare(messages, strategy, config=TIGHT, format=fmt)
    except FormatError:
        raise AssertionError("a declared format never raises FormatError") from None
    except InvalidMessages:  # a message replaced by a non-object: the one message rule
        assert any(not isinstance(message, dict) for message in messages)
        return
    assert messages == snapshot
    try:
        problems = new_problems(fmt, messages, prepared.messages)
    except (AttributeError, TypeError, KeyError):
        problems = None  # the test's checker cannot read such a structure; scoutd did
    assert not problems or prepared.report[-1].malformed


def test_an_unhashable_answer_id_after_parallel_calls_is_malformed() -> None:
    calls = [
        {"id": ident, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        for ident in ("a", "b")
    ]
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": ["x"], "content": "out"},
        {"role": "tool", "tool_call_id": "b", "content": "out"},
    ]
    before = copy.deepcopy(messages)
    prepared = prepare(messages, "shorten_tools_epoch", format="openai-chat")
    assert prepared.messages == before == messages
    assert prepared.report[-1].malformed > 0


COMPACTING = [
    ("shorten_tools_cost_aware", PromptConfig(context_window=2000)),
    ("shorten_tools_epoch", TIGHT),
    ("shorten_tools", PromptConfig(max_tool_calls=4, full_tool_outputs=2)),
]


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    fmt=st.sampled_from(sorted(WORST)),
    size=st.integers(1, 60),
    compacting=st.sampled_from(COMPACTING),
    values=st.integers(0, 3),
)
def test_the_most_costly_shapes_with_hostile_values(
    data: st.DataObject,
    fmt: str,
    size: int,
    compacting: tuple[str, PromptConfig],
    values: int,
) -> None:
    """The conversations built to cost the most (scoutd/testing/worst.py), spoiled
    or not, through the strategies that compact them: a valid prompt or a
    refusal of the input, never anything else."""
    builder = data.draw(st.sampled_from(WORST[fmt]))
    messages = builder(size)
    spoil(data, messages, values)
    snapshot = copy.deepcopy(messages)
    strategy, config = compacting
    try:
        prepared = prepare(messages, strategy, config=config, format=fmt)
    except InvalidMessages:
        assert any(not isinstance(message, dict) for message in messages)
        return
    assert messages == snapshot
    if fmt == "scout":
        return
    try:
        problems = new_problems(fmt, messages, prepared.messages)
    except (AttributeError, TypeError, KeyError):
        problems = None  # the test's checker cannot read such a structure; scoutd did
    assert not problems or prepared.report[-1].malformed
