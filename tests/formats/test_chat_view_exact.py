"""The OpenAI Chat view, written out by hand, and what the provider then receives.

A strategy given as a function sees the view the strategies see (counted:
an assistant's text before the last of its calls, docs/FORMATS.md); what it
returns is rebuilt into the messages sent. Each case below states the exact
view of a small conversation, the malformed count, and the messages sent when
a group is dropped or kept, for each way the adapter reads a group: the one-call
way, the plain parallel way and the general way (custom calls, media, answers
sending more than their content, groups it cannot read). The oracle is the
expected view written out, never the adapter's own helpers; what is sent is
also checked by the validity checker (tests/formats/validity.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from scoutd import prepare
from scoutd.formats import openai_chat, scout_view

from ..support.mapping import Message
from .validity import chat_problems

MARK = "scoutd.view"  # the key the view marks the messages it made with

USER = {"role": "user", "content": "fix the bug"}


def _call(ident: str, name: str = "bash", arguments: str = '{"cmd":"ls"}') -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


def _custom(ident: str, text: str = "*** patch") -> dict[str, Any]:
    return {"id": ident, "type": "custom", "custom": {"name": "apply", "input": text}}


def _said(content: Any, *calls: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def _tool(ident: str, content: Any = "done") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": ident, "content": content}


def fc(body: str) -> dict[str, Any]:
    return {"role": "function_call", "content": body}


def out(body: str) -> dict[str, Any]:
    return {"role": "function_call_output", "content": body}


def text(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


class Seen:
    """A strategy that records the view it is given and returns it, or what ``edit``
    makes of it."""

    def __init__(self, edit: Callable[[list[Any]], list[Any]] | None = None) -> None:
        self.views: list[list[Any]] = []
        self.edit = edit

    def __call__(self, view: list[Any]) -> list[Any]:
        self.views.append(view)
        return self.edit(view) if self.edit else view

    def plain(self, which: int = -1) -> list[Any]:
        """View ``which`` without the marks, each mark checked to be its position."""
        view = self.views[which]
        shown = []
        for at, message in enumerate(view):
            if type(message) is dict and MARK in message:
                assert message[MARK] == at
                message = {k: v for k, v in message.items() if k != MARK}
            shown.append(message)
        return shown


def _seen(
    messages: list[Any], edit: Callable[[list[Any]], list[Any]] | None = None
) -> tuple[Seen, Any]:
    seen = Seen(edit)
    prepared = prepare(messages, seen, format="openai-chat")
    return seen, prepared


# --- the counted view of each way of reading a group ---------------------------------


def test_one_call_with_text_the_text_first() -> None:
    messages = [USER, _said("looking", _call("c1")), _tool("c1", "a b")]
    seen, prepared = _seen(messages)
    assert seen.plain() == [
        USER,
        text("looking"),
        fc('{"name":"bash","id":"c1","arguments":{"cmd":"ls"}}'),
        out('{"id":"c1","content":"a b"}'),
    ]
    assert prepared.report[-1].malformed == 0
    assert all(a is b for a, b in zip(prepared.messages, messages, strict=True))


def test_parallel_calls_plain_the_text_before_the_last_call() -> None:
    messages = [
        USER,
        _said("three", _call("c1"), _call("c2", "grep", '{"q":"x"}'), _call("c3")),
        _tool("c2", "two"),
        _tool("c1", "one"),
        _tool("c3", "three"),
    ]
    seen, prepared = _seen(messages)
    assert seen.plain() == [
        USER,
        fc('{"name":"bash","id":"c1","arguments":{"cmd":"ls"}}'),
        fc('{"name":"grep","id":"c2","arguments":{"q":"x"}}'),
        text("three"),
        fc('{"name":"bash","id":"c3","arguments":{"cmd":"ls"}}'),
        out('{"id":"c2","content":"two"}'),
        out('{"id":"c1","content":"one"}'),
        out('{"id":"c3","content":"three"}'),
    ]
    assert prepared.report[-1].malformed == 0
    assert scout_view(messages, "openai-chat")[1] == text("three")  # shown: as said, first


@pytest.mark.parametrize("said", ["patching", None])
def test_custom_calls_the_general_way_the_text_before_the_last_call(said: Any) -> None:
    messages = [
        USER,
        _said(said, _call("c1"), _custom("p1")),
        _tool("c1", "one"),
        _tool("p1", "two"),
    ]
    seen, prepared = _seen(messages)
    calls = [
        fc('{"name":"bash","id":"c1","arguments":{"cmd":"ls"}}'),
        fc('{"name":"apply","id":"p1","arguments":{"input":"*** patch"}}'),
    ]
    head = [calls[0], text(said), calls[1]] if said else calls
    assert seen.plain() == [
        USER,
        *head,
        out('{"id":"c1","content":"one"}'),
        out('{"id":"p1","content":"two"}'),
    ]
    assert prepared.report[-1].malformed == 0
    shown = scout_view(messages, "openai-chat")
    assert shown[1] == (text(said) if said else calls[0])


def test_a_custom_call_alone_with_text() -> None:
    messages = [USER, _said("patching", _custom("p1")), _tool("p1", "ok")]
    seen, _ = _seen(messages)
    assert seen.plain() == [
        USER,
        text("patching"),
        fc('{"name":"apply","id":"p1","arguments":{"input":"*** patch"}}'),
        out('{"id":"p1","content":"ok"}'),
    ]


@pytest.mark.parametrize("calls", [1, 2])
def test_an_answer_sending_its_name_is_counted_in_its_call(calls: int) -> None:
    """A ``tool`` message's ``name`` is sent: the view counts it in its call's body."""
    ids = [f"c{k}" for k in range(1, calls + 1)]
    answers = [_tool(ident, f"out {ident}") for ident in ids]
    answers[0]["name"] = "bash"
    messages = [USER, _said(None, *map(_call, ids)), *answers]
    seen, prepared = _seen(messages)
    bodies = [f'{{"name":"bash","id":"{ident}","arguments":{{"cmd":"ls"}}' for ident in ids]
    bodies[0] += ',"fields":{"name":"bash"}'
    assert seen.plain() == [
        USER,
        *(fc(body + "}") for body in bodies),
        *(out(f'{{"id":"{ident}","content":"out {ident}"}}') for ident in ids),
    ]
    assert prepared.report[-1].malformed == 0


@pytest.mark.parametrize("calls", [1, 2])
def test_media_of_an_output_are_kept_beside_its_text(calls: int) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    answers = [_tool("c0", [{"type": "text", "text": "shot"}, image]), _tool("c1", "plain")]
    messages = [USER, _said(None, *[_call("c0"), _call("c1")][:calls]), *answers[:calls]]
    seen, prepared = _seen(messages)
    outputs = seen.plain()[1 + calls :]
    assert outputs[0] == {
        **out('{"id":"c0","content":"shot\\n[image]"}'),
        "scoutd.media": [image],
    }
    assert outputs[1:] == [out('{"id":"c1","content":"plain"}')][: calls - 1]
    assert prepared.messages[-1] is messages[-1] and prepared.report[-1].malformed == 0


# --- malformed and pending groups: passed through, counted exactly --------------------


def _malformed(messages: list[Any]) -> tuple[int, list[Any]]:
    seen, prepared = _seen(messages)
    assert all(a is b for a, b in zip(prepared.messages, messages, strict=True))
    return prepared.report[-1].malformed, seen.plain()


def test_an_orphan_tool_message_is_one_malformed() -> None:
    count, view = _malformed([USER, _tool("c9", "lost"), {"role": "user", "content": "go"}])
    assert count == 1
    lost = [{"type": "text", "text": "lost"}, {"tool_call_id": "c9"}]  # its id counted too
    assert view[1:] == [{"role": "tool", "content": lost}, {"role": "user", "content": "go"}]


@pytest.mark.parametrize("calls", [1, 2])
def test_an_extra_answer_makes_the_whole_group_malformed(calls: int) -> None:
    ids = [f"c{k}" for k in range(calls)]
    messages = [USER, _said("x", *map(_call, ids)), *map(_tool, ids), _tool(ids[0], "again")]
    count, view = _malformed([*messages, {"role": "user", "content": "next"}])
    assert count == calls + 2  # the assistant message and every tool message after it
    assert view[-1] == {"role": "user", "content": "next"}


def test_calls_still_waiting_at_the_end_are_not_malformed() -> None:
    count, _ = _malformed([USER, _said("x", _call("c1"), _call("c2"))])
    assert count == 0
    count, _ = _malformed([USER, _said("x", _call("c1")), {"role": "user", "content": "no"}])
    assert count == 1


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {}}},
        {"id": 7, "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "c1", "type": "function", "function": "f"},
        {"id": "c1", "type": "custom", "custom": {"name": "f", "input": ["x"]}},
        {"id": "c1", "type": "custom", "custom": "f"},
        {"id": None, "type": "custom", "custom": {"name": "f", "input": "x"}},
        "c1",
    ],
)
def test_a_call_it_cannot_read_makes_its_group_malformed(entry: Any) -> None:
    messages = [USER, _said("x", entry), _tool("c1"), {"role": "user", "content": "go"}]
    count, view = _malformed(messages)
    assert count == 2
    assert view[-1] == {"role": "user", "content": "go"}


@pytest.mark.parametrize("calls", ["c1", {"id": "c1"}, 7, ({"id": "c1"},)])
def test_tool_calls_that_are_no_list_are_malformed(calls: Any) -> None:
    """``tool_calls`` that is not a list (nor null): the message cannot be read, and
    the report says so, with or without an answer after it (before: 0 without)."""
    said = {"role": "assistant", "content": "x", "tool_calls": calls}
    assert _malformed([USER, said, {"role": "user", "content": "go"}])[0] == 1
    assert _malformed([USER, said, _tool("c1"), {"role": "user", "content": "go"}])[0] == 2
    nothing: tuple[Any, ...] = (None, [])
    for none in nothing:  # no calls: nothing malformed
        empty = {"role": "assistant", "content": "x", "tool_calls": none}
        assert _malformed([USER, empty, {"role": "user", "content": "go"}])[0] == 0


def test_answers_out_of_place_make_the_group_malformed() -> None:
    wrong_id = [USER, _said(None, _call("c1"), _call("c2")), _tool("c1"), _tool("c3")]
    assert _malformed(wrong_id)[0] == 3
    twice = [USER, _said(None, _call("c1"), _call("c2")), _tool("c1"), _tool("c1")]
    assert _malformed(twice)[0] == 3
    one_short = [USER, _said(None, _call("c1"), _call("c2")), _tool("c1"), USER]
    assert _malformed(one_short)[0] == 2
    unhashable = [USER, _said(None, _call("c1"), _call("c2")), _tool("c1"), _tool([1])]  # type: ignore[arg-type]
    assert _malformed(unhashable)[0] == 3
    other_id = [USER, _said(None, _call("c1")), _tool("c2")]
    assert _malformed(other_id)[0] == 2


# --- narration: a group dropped whole ------------------------------------------------


def _drop_calls(view: list[Any]) -> list[Any]:
    """Keep only what is no tool traffic (and no assistant text beside calls)."""
    return [m for m in view if type(m) is dict and MARK not in m]


@pytest.mark.parametrize(
    "group",
    [
        [_said("one", _call("c1")), _tool("c1")],
        [_said("two", _call("c1"), _call("c2")), _tool("c1"), _tool("c2")],
        [_said("custom", _custom("c1"), _call("c2")), _tool("c1"), _tool("c2")],
    ],
)
def test_a_group_dropped_whole_drops_its_text_and_counts_it(group: list[Any]) -> None:
    after = {"role": "user", "content": "thanks"}
    messages = [USER, *group, after]
    _, prepared = _seen(messages, _drop_calls)
    assert prepared.messages == [USER, after]
    assert prepared.report[-1].narration_dropped == 1
    silent = [USER, {**group[0], "content": None}, *group[1:], after]
    assert prepare(silent, _drop_calls).report[-1].narration_dropped == 0


def test_a_group_keeping_one_call_keeps_its_text() -> None:
    messages = [USER, _said("two", _call("c1"), _call("c2")), _tool("c1", "1"), _tool("c2", "2")]

    def keep_c2(view: list[Any]) -> list[Any]:
        return [m for m in view if '"c1"' not in str(m.get("content"))]

    _, prepared = _seen(messages, keep_c2)
    assert prepared.messages == [USER, _said("two", _call("c2")), _tool("c2", "2")]
    assert not chat_problems(prepared.messages)
    assert prepared.report[-1].narration_dropped == 0


def test_the_view_is_marked_unless_told_otherwise() -> None:
    """The adapter's view marks the messages it makes by default (``prepare`` matches a
    strategy's result by them); ``mark=False`` is the shown view, without marks."""
    messages = [USER, _said("x", _call("c1"), _call("c2")), _tool("c1"), _tool("c2")]
    assert [m.get(MARK) for m in openai_chat.view(messages).messages] == [None, *range(1, 6)]
    shown = openai_chat.view(messages, False).messages
    assert [MARK in m for m in shown] == [False] * 6
    assert shown[1] == text("x")


# --- shapes read another way ---------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [("[1, 2]", '"[1, 2]"'), ('"ls"', '"\\"ls\\""'), ("not json", '"not json"'), ("{ }", "{ }")],
)
@pytest.mark.parametrize("said", [None, "look"])
def test_arguments_that_are_no_object_are_shown_as_a_string(
    arguments: str, shown: str, said: Any
) -> None:
    messages = [USER, _said(said, _call("c1", "f", arguments)), _tool("c1", "r")]
    seen, prepared = _seen(messages)
    assert seen.plain() == [
        USER,
        *([text(said)] if said else []),
        fc(f'{{"name":"f","id":"c1","arguments":{shown}}}'),
        out('{"id":"c1","content":"r"}'),
    ]
    assert prepared.report[-1].malformed == 0
    _, dropped = _seen([*messages, USER], _drop_calls)
    assert dropped.messages == [USER, USER]
    assert dropped.report[-1].narration_dropped == (1 if said else 0)


@pytest.mark.parametrize("calls", [1, 2])
def test_a_call_without_a_name_shows_null(calls: int) -> None:
    entries = [
        {"id": f"c{k}", "type": "function", "function": {"arguments": "{}"}} for k in range(calls)
    ]
    messages = [USER, _said(None, *entries), *(_tool(f"c{k}") for k in range(calls))]
    seen, _ = _seen(messages)
    assert seen.plain()[1] == fc('{"name":null,"id":"c0","arguments":{}}')


@pytest.mark.parametrize("calls", [1, 2])
@pytest.mark.parametrize("where", ["output", "arguments"])
def test_a_text_json_cannot_hold_makes_the_group_malformed(calls: int, where: str) -> None:
    lone = "\ud800"
    entries = [_call(f"c{k}") for k in range(calls)]
    answers = [_tool(f"c{k}") for k in range(calls)]
    if where == "output":
        answers[-1]["content"] = lone
    else:
        entries[-1]["function"]["arguments"] = json.dumps({"cmd": "x"})[:-1] + f',"y":"{lone}"}}'
    messages = [USER, _said("x", *entries), *answers, {"role": "user", "content": "go"}]
    count, view = _malformed(messages)
    assert count == calls + 1
    assert view[1]["role"] == "passthrough" and view[-1] == {"role": "user", "content": "go"}
    assert all(type(m) is not dict or MARK not in m for m in view)


def test_a_custom_group_json_cannot_hold_is_malformed() -> None:
    messages = [USER, _tool("c0"), _said(None, _custom("p1", "\ud800")), _tool("p1"), USER]
    count, view = _malformed(messages)
    assert count == 3 and len(view) == 5  # added to the orphan's count before it


def test_calls_it_passes_through_stand_in_as_passthrough() -> None:
    legacy = {
        "role": "assistant",
        "content": "calling",
        "function_call": {"name": "f", "arguments": "{}"},
    }
    answer = {"role": "function", "name": "f", "content": "r"}
    odd = {"role": "assistant", "content": "odd", "tool_calls": "c1"}
    empty = {"role": "assistant", "content": "hi", "tool_calls": []}
    none = {"role": "assistant", "content": "hi", "tool_calls": None, "function_call": None}
    messages = [USER, legacy, answer, odd, empty, none]
    count, view = _malformed(messages)
    assert count == 1  # the odd calls: passed through, and counted as unread
    assert view == [
        USER,
        {
            "role": "passthrough",
            "content": [
                {"type": "text", "text": "calling"},
                {"function_call": legacy["function_call"]},
            ],
        },
        {"role": "function", "content": [{"type": "text", "text": "r"}, {"name": "f"}]},
        {"role": "passthrough", "content": [{"type": "text", "text": "odd"}, {"tool_calls": "c1"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}, {"tool_calls": []}]},
        none,
    ]
    assert view[-1] is none


def test_media_are_counted_only_in_the_counted_view() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [
        USER,
        _said(None, _call("c1")),
        _tool("c1", [{"type": "text", "text": "shot"}, image]),
    ]
    shown = scout_view(messages, "openai-chat")
    assert shown[2] == out('{"id":"c1","content":"shot\\n[image]"}')  # no media beside


def test_a_group_of_mappings_of_another_type_is_read_as_dicts_are() -> None:
    call = Message(**_said("x", _call("c1")))
    answer = Message(**_tool("c1", "r"))
    seen, prepared = _seen([USER, call, _tool("c1", "r")])
    assert seen.plain() == [
        USER,
        text("x"),
        fc('{"name":"bash","id":"c1","arguments":{"cmd":"ls"}}'),
        out('{"id":"c1","content":"r"}'),
    ]
    assert prepared.messages[1] is call and prepared.report[-1].malformed == 0
    # the answer alone of another type: read as a dict answer is
    count, view = _malformed([USER, _said("x", _call("c1")), answer, USER])
    assert count == 0
    assert view == _malformed([USER, _said("x", _call("c1")), _tool("c1", "r"), USER])[1]


def test_a_group_passed_through_shows_its_calls_and_answers_as_sent() -> None:
    """Malformed: stand-ins counting the calls and call ids; pending at the end: the
    assistant message as it is sent, its calls counted."""
    calls = [_call("c1"), _call("c2")]
    answer = _tool("c1", "r")
    count, view = _malformed([USER, _said("x", *calls), answer, USER])
    assert count == 2
    assert view[1:] == [
        {"role": "passthrough", "content": [{"type": "text", "text": "x"}, {"tool_calls": calls}]},
        {"role": "tool", "content": [{"type": "text", "text": "r"}, {"tool_call_id": "c1"}]},
        USER,
    ]
    count, view = _malformed([USER, _said("x", *calls)])
    assert count == 0
    assert view[1:] == [
        {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"tool_calls": calls}]}
    ]


def test_messages_of_another_mapping_type_outside_groups() -> None:
    orphan = Message(**_tool("c9", "lost"))
    legacy = Message(role="assistant", content="c", function_call={"name": "f"})
    listed = Message(role="assistant", content="d", tool_calls=[])
    plain = Message(role="user", content="u")
    count, view = _malformed([USER, orphan, legacy, listed, plain])
    assert count == 1
    assert view[1:] == [
        {"role": "tool", "content": [{"type": "text", "text": "lost"}, {"tool_call_id": "c9"}]},
        {
            "role": "passthrough",
            "content": [{"type": "text", "text": "c"}, {"function_call": {"name": "f"}}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "d"}, {"tool_calls": []}]},
        plain,
    ]


@pytest.mark.parametrize("content", [None, 5, {"type": "text", "text": "a"}, [{"type": "refusal"}]])
@pytest.mark.parametrize("calls", [1, 2])
def test_an_answer_without_a_text_to_read_makes_its_group_malformed(
    content: Any, calls: int
) -> None:
    ids = [f"c{k}" for k in range(calls)]
    answers = [_tool(ident) for ident in ids]
    answers[0]["content"] = content
    count, _ = _malformed([USER, _said(None, *map(_call, ids)), *answers, USER])
    assert count == calls + 1
