"""Indexing tool messages (roles, parsing, pairing and repeat keys) against plain references."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scoutd.strategies.tool_messages import (
    CALL,
    OUTPUT,
    ToolIndex,
    call_keys,
    index_tools,
    repeated_pairs,
    role_of,
    roles_of,
)

from ..support.mapping import Message
from ..support.nesting import too_deep
from . import oracle
from .conversations import agent_conversations, call, output

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reference_role(message: Any) -> Any:
    """The role of a message as docs/STRATEGIES.md describes it: a string, else None."""
    if not isinstance(message, Mapping):
        return None
    role = message.get("role")
    return role if isinstance(role, str) else None


_roles = st.sampled_from(["user", "assistant", CALL, OUTPUT, 1, None, ["user"], 2.5, True])
_odd_messages = st.one_of(
    st.builds(lambda role: {"role": role, "content": "c"}, _roles),
    st.builds(lambda role: Message(role=role, content="c"), _roles),
    st.builds(lambda role: MappingProxyType({"role": role}), _roles),
    st.sampled_from([{}, {"content": "no role"}, "text", None, 3, ["role"], ("role", "user")]),
)


@PROPERTY
@given(st.lists(_odd_messages, max_size=8))
def test_roles_of_matches_a_plain_reference(messages: list[Any]) -> None:
    expected = [_reference_role(message) for message in messages]
    event("all plain dicts" if all(type(m) is dict for m in messages) else "some not a dict")
    # a non-string role may come back as itself or as None: no caller tells them apart
    got = [role if isinstance(role, str) else None for role in roles_of(messages)]
    assert got == expected
    for message in messages:
        if isinstance(message, Mapping):
            assert role_of(message) == message.get("role")
        else:
            assert role_of(message) is None


def test_a_mapping_that_is_not_a_dict_has_a_role() -> None:
    assert role_of(Message(role="user")) == "user"
    assert role_of(MappingProxyType({"role": CALL})) == CALL
    assert role_of(Message(content="x")) is None
    assert role_of({"role": "assistant"}) == "assistant"
    assert role_of(["role", "user"]) is None
    assert roles_of([Message(role="user"), {"role": "assistant"}]) == ["user", "assistant"]


def test_tool_messages_that_are_not_dicts_are_indexed() -> None:
    first = call("read", {"p": 1}, "a")
    second = output("read", "text", "a")
    messages = [Message(**first), MappingProxyType(second), {"role": "user", "content": "u"}]
    index = index_tools(messages)
    assert index.indices == [0, 1]
    assert index.partners == [1, 0]
    assert index.roles == [CALL, OUTPUT, "user"]


DEEP = too_deep()
_UNUSABLE = [
    {"role": CALL, "content": None},
    {"role": OUTPUT, "content": 17},
    {"role": OUTPUT, "content": ["{}"]},
    {"role": CALL, "content": "not json"},
    {"role": CALL, "content": "[1, 2]"},  # JSON, not an object
    {"role": OUTPUT, "content": '{"id": "a", "content": "x"'},  # cut short
    {"role": OUTPUT, "content": '{"id": "a", "content": "x\ud800"}'},  # lone surrogate
    # nested past the interpreter's decoder (tests/support/nesting.py)
    {"role": CALL, "content": '{"id": "a", "arguments": ' + "[" * DEEP + "]" * DEEP + "}"},
    {"role": OUTPUT, "content": '{"id": "a", "content": NaN}'},
]


@PROPERTY
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_UNUSABLE),
            st.builds(lambda n: call("read", {"n": n}, f"i{n}"), st.integers(0, 3)),
            st.builds(lambda n: output("read", f"o{n}", f"i{n}"), st.integers(0, 3)),
            st.just({"role": "user", "content": "u"}),
        ),
        max_size=10,
    )
)
def test_unusable_tool_messages_are_skipped_wherever_they_are(messages: list[Any]) -> None:
    """Each unusable message is left out of the index; the usable ones keep their place."""
    usable = [at for at, m in enumerate(messages) if oracle.tool_body(m) is not None]
    unusable = [at for at, m in enumerate(messages) if m.get("role") in (CALL, OUTPUT)]
    event("mixed" if usable and len(usable) < len(unusable) else "uniform")
    index = index_tools(messages)
    assert index.indices == usable
    reference = oracle.pair(messages)
    assert index.partners == [-1 if t.partner is None else t.partner for t in reference.tools]
    assert [body.id for body in index.bodies] == [t.body.get("id") for t in reference.tools]
    assert [body.name for body in index.bodies] == [t.body.get("name") for t in reference.tools]


def test_each_unusable_form_alone_is_skipped() -> None:
    for message in _UNUSABLE:
        good = call("read", {}, "z")
        index = index_tools([good, message, good])
        assert index.indices == [0, 2], message
        assert index_tools([message]).indices == []


_IDS = st.sampled_from(["1", 1, 1.0, True, 2, "a", None, ["a"], {"k": 1}, 0, False, 0.0, ""])


@PROPERTY
@given(st.lists(st.tuples(st.booleans(), _IDS), max_size=12))
def test_pairing_keys_keep_json_types_apart(steps: list[tuple[bool, Any]]) -> None:
    """Ids pair when equal and of the same JSON type; null, arrays and objects never pair."""
    messages = [
        call("read", {}, ident) if is_call else output("read", "x", ident)
        for is_call, ident in steps
    ]
    reference = oracle.pair(messages)
    index = index_tools(messages)
    partners = [-1 if t.partner is None else t.partner for t in reference.tools]
    for slot, partner in enumerate(partners):
        if partner != -1 and slot < partner:
            event(f"paired {type(reference.tools[slot].body['id']).__name__} id")
    assert index.partners == partners
    assert index.numbers == [t.number for t in reference.tools]
    assert [index.is_call[s] for s in range(len(partners))] == [t.is_call for t in reference.tools]


def test_equal_ids_of_different_json_types_do_not_pair() -> None:
    for first, second in [(1, 1.0), (1, True), (1.0, True), ("1", 1), (0, False), (0.0, False)]:
        index = index_tools([call("read", {}, first), output("read", "x", second)])
        assert index.partners == [-1, -1], (first, second)
        index = index_tools([call("read", {}, first), output("read", "x", first)])
        assert index.partners == [1, 0], first
    for ident in (None, ["a"], {"k": 1}):
        assert index_tools([call("r", {}, ident), output("r", "x", ident)]).partners == [-1, -1]


def test_an_output_before_any_call_waits_for_nothing() -> None:
    messages = [output("read", "x", "a"), call("read", {}, "a"), output("read", "y", "a")]
    index = index_tools(messages)
    assert index.partners == [-1, 2, 1]
    assert index.numbers == [1, 2, 2]
    assert index.positions == [2, 1, 1]
    assert index.paired == [1]
    assert not index.waiting


def test_a_call_still_waiting_is_placed_after_the_newest_output() -> None:
    messages = [call("read", {}, "a"), output("read", "x", "a"), call("read", {}, "b")]
    index = index_tools(messages)
    assert index.numbers == [1, 1, 2]
    assert index.positions == [1, 1, 0]
    assert index.outputs == 1
    assert list(index.waiting.values()) == [2]  # the call of id "b"
    assert index.paired == [0]


def test_paired_lists_the_calls_paired_by_the_last_extend_only() -> None:
    messages = [call("r", {}, "a"), call("r", {}, 7), output("r", "x", 7)]
    index = ToolIndex()
    index.extend(messages, 0)
    assert index.paired == [1]
    assert list(index.waiting.values()) == [0]  # the call of id "a"
    messages += [output("r", "y", "a"), output("r", "z", "b")]
    index.extend(messages, 3)
    assert index.paired == [0]
    assert index.partners == [3, 2, 1, 0, -1]
    assert index.numbers == [2, 1, 1, 2, 3]
    assert index.outputs == 3
    index.extend(messages, len(messages))
    assert index.paired == []
    assert index.positions == [2, 3, 3, 2, 1]


@PROPERTY
@given(messages=agent_conversations(max_steps=30))
def test_call_keys_and_repeats_match_the_reference(messages: list[Any]) -> None:
    """Two calls share a key exactly when the reference's canonical keys are equal."""
    index = index_tools(messages)
    reference = oracle.pair(messages)
    calls = [s for s in range(len(index.indices)) if index.is_call[s]]
    keys = call_keys([index.bodies[s] for s in calls])
    expected = [oracle.call_key(reference.tools[s].body) for s in calls]
    for a in range(len(calls)):
        for b in range(a + 1, len(calls)):
            assert (keys[a] == keys[b]) == (expected[a] == expected[b])
    repeats = oracle.repeats(reference)
    event("repeats" if repeats else "no repeat")
    assert sorted(repeated_pairs(index).values()) == sorted(repeats.values())


def test_call_keys_sort_object_keys_and_keep_value_types() -> None:
    bodies = index_tools(
        [
            call("read", {"b": 1, "a": {"y": 2, "x": 1}}, "1"),
            call("read", {"a": {"x": 1, "y": 2}, "b": 1}, "2"),
            call("read", {"a": {"x": 1, "y": 2}, "b": 1.0}, "3"),
            call("read", {"a": {"x": 1, "y": 2}, "b": True}, "4"),
            call("grep", {"a": {"x": 1, "y": 2}, "b": 1}, "5"),
            call("read", None, "6"),
            call("read", {}, "7"),
        ]
    ).bodies
    del bodies[-2:]  # None and {} compared below
    keys = call_keys(bodies)
    assert keys[0] == keys[1]
    assert len({keys[1], keys[2], keys[3], keys[4]}) == 4
    assert json.loads(keys[0]) == ["read", {"a": {"x": 1, "y": 2}, "b": 1}]
    assert keys[0] == b'["read",{"a":{"x":1,"y":2},"b":1}]'
    missing = index_tools([{"role": CALL, "content": '{"name": "read", "id": "8"}'}]).bodies
    none_and_empty = index_tools([call("read", None, "6"), call("read", {}, "7")]).bodies
    assert len(set(call_keys([*none_and_empty, *missing]))) == 1
    assert call_keys([]) == []


def test_repeated_pairs_in_call_order() -> None:
    messages = [
        call("read", {"p": 1}, "a"),
        call("read", {"p": 1}, "b"),
        output("read", "x", "b"),
        output("read", "y", "a"),
        call("grep", {}, "c"),
        output("grep", "z", "c"),
        call("read", {"p": 1}, "d"),  # not answered: not a pair
    ]
    index = index_tools(messages)
    assert list(repeated_pairs(index).values()) == [[2, 1]]
    assert repeated_pairs(index_tools(messages[:3])) == {}


def _expected_pairing(messages: list[Any]) -> tuple[list[int], list[int], int]:
    """Partners (-1 when alone), numbers and the output count from the reference."""
    reference = oracle.pair(messages)
    partners = [-1 if t.partner is None else t.partner for t in reference.tools]
    return partners, [t.number for t in reference.tools], reference.outputs


def _check_growing(messages: list[Any], cuts: list[int]) -> None:
    """Extend one index at every cut and compare it with the reference each time."""
    index = ToolIndex()
    start = 0
    before: list[int] = []
    for cut in [*cuts, len(messages)]:
        index.extend(messages[:cut], start)
        partners, numbers, outputs = _expected_pairing(messages[:cut])
        assert index.partners == partners
        assert index.numbers == numbers
        assert index.outputs == outputs
        newly = [
            s
            for s, partner in enumerate(partners)
            if partner > s and (s >= len(before) or before[s] == -1)
        ]
        assert sorted(index.paired) == newly
        before = partners
        start = cut


def test_an_alternating_extend_forgets_a_call_it_replaces() -> None:
    """A call waiting from an earlier extend, replaced by a pair of the same id, pairs no more."""
    messages = [
        call("r", {}, "a"),
        call("r", {}, "a"),
        output("r", "x", "a"),
        output("r", "y", "a"),
    ]
    _check_growing(messages, [1, 3])
    index = ToolIndex()
    index.extend(messages[:1], 0)
    index.extend(messages[:3], 1)
    assert index.waiting == {}
    index.extend(messages, 3)
    assert index.partners == [-1, 2, 1, -1]


@PROPERTY
@given(
    messages=agent_conversations(max_steps=30),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=4),
)
def test_an_index_grown_in_steps_pairs_as_the_reference(
    messages: list[Any], cuts: list[int]
) -> None:
    """Whatever the steps, each extend gives the pairing of the messages so far."""
    cuts = sorted({min(cut, len(messages)) for cut in cuts})
    event("several steps" if len(cuts) > 1 else "one or two steps")
    _check_growing(messages, cuts)


def test_tools_that_almost_alternate_pair_as_the_reference() -> None:
    """Near misses of the one-call-at-a-time shape: each pairs as the reference says."""
    cases = [
        [output("r", "x", "a"), output("r", "y", "a")],
        [call("r", {}, "a"), call("r", {}, "a")],
        [output("r", "x", "a"), call("r", {}, "a")],
        [call("r", {}, "a"), output("r", "x", "a"), call("r", {}, "b"), output("r", "y", "c")],
        [call("r", {}, "a"), output("r", "x", "b"), call("r", {}, "b"), output("r", "y", "b")],
        [call("r", {}, "a"), output("r", "x", "a"), output("r", "y", "a"), call("r", {}, "a")],
        [call("r", {}, "a"), call("r", {}, "b"), output("r", "x", "b"), output("r", "y", "a")],
        [call("r", {}, "a"), output("r", "x", "a"), call("r", {}, "b")],
        [call("r", {}, 1), output("r", "x", 1), call("r", {}, "b"), output("r", "y", "b")],
    ]
    for messages in cases:
        for cuts in ([], [2], [1, 3]):
            _check_growing(messages, cuts)
