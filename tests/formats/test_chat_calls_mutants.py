"""The OpenAI Chat view at the edges of its ways of reading a group, written out by hand.

A one-call group whose strings the previous view had (the known way) followed by a
message of an odd type, and the refs of a group read the general or the plain way: what each
view message is within its provider message (a call's index, an output's 0).
"""

from __future__ import annotations

from typing import Any

from scoutd.formats import openai_chat
from scoutd.formats.texts import ConversationTexts
from scoutd.formats.view import PASSTHROUGH, TEXT_PART, View

from ..support.mapping import Message
from .test_chat_view_exact import USER, _call, _custom, _said, _tool

BODY = '{"name":"bash","id":"c1","arguments":{"cmd":"ls"}}'


def _second_view(after: list[Any], output: str) -> View:
    """The view of a one-call group answered by ``output`` followed by ``after``,
    when the previous view of the conversation held that very group."""
    texts = ConversationTexts()
    openai_chat.view([USER, _said(None, _call("c1")), _tool("c1", output)], kept=texts)
    assert texts.kept is not None
    return openai_chat.view(
        [USER, _said(None, _call("c1")), _tool("c1", output), *after], kept=texts
    )


def _plain(view: View) -> list[Any]:
    return [
        {k: v for k, v in m.items() if k != "scoutd.view"} if type(m) is dict else m
        for m in view.messages
    ]


def test_a_known_group_followed_by_what_is_no_mapping() -> None:
    output = "output " * 20
    view = _second_view([7], output)
    assert _plain(view) == [
        USER,
        {"role": "function_call", "content": BODY},
        {"role": "function_call_output", "content": f'{{"id":"c1","content":"{output}"}}'},
        7,
    ]
    assert view.malformed == 0
    assert view.starts == [0, 1, 2, 3, 4]


def test_a_known_group_followed_by_an_answer_of_another_mapping_type() -> None:
    # an extra answer, of a mapping type that is no dict: the group is passed through
    output = "output " * 20
    extra = Message(role="tool", tool_call_id="c1", content="again")
    view = _second_view([extra], output)
    assert view.malformed == 3
    assert view.refs == [PASSTHROUGH] * 4
    assert view.messages[-1]["role"] == "tool"  # shown with the call id it sends


def test_the_refs_of_a_group_read_the_general_way() -> None:
    # a custom call takes the general way: a call's ref is its index, an output's 0
    messages = [
        USER,
        _said("both", _call("c1"), _custom("c2")),
        _tool("c2", "two"),
        _tool("c1", "one"),
    ]
    view = openai_chat.view(messages)
    assert view.refs == [PASSTHROUGH, 0, TEXT_PART, 1, 0, 0]
    assert view.starts == [0, 1, 4, 5, 6]
    one = openai_chat.view([USER, _said(None, _custom("c1")), _tool("c1", "one")])
    assert one.refs == [PASSTHROUGH, 0, 0]


def test_a_known_output_answering_the_old_id_of_a_call_renamed() -> None:
    # the answer names the call of the previous view, the call now has another id
    output = "output " * 20
    texts = ConversationTexts()
    openai_chat.view([USER, _said(None, _call("c1")), _tool("c1", output)], kept=texts)
    messages = [USER, _said(None, _call("c2")), _tool("c1", output)]
    view = openai_chat.view(messages, kept=texts)
    assert view.malformed == 2
    assert view.refs == [PASSTHROUGH] * 3
    assert view.messages[0] is USER


def test_a_known_output_in_a_message_that_is_no_longer_a_tool_message() -> None:
    # the very output string, call id and all, now sent by a user message
    output = "output " * 20
    texts = ConversationTexts()
    openai_chat.view([USER, _said(None, _call("c1")), _tool("c1", output)], kept=texts)
    moved = {"role": "user", "tool_call_id": "c1", "content": output}
    view = openai_chat.view([USER, _said(None, _call("c1")), moved], kept=texts)
    assert view.malformed == 1  # the call left without its answer
    assert view.refs == [PASSTHROUGH] * 3
    assert view.messages[2] == {
        "role": "user",
        "content": [{"type": "text", "text": output}, {"tool_call_id": "c1"}],
    }


def test_the_refs_of_a_group_read_the_plain_way() -> None:
    # plain parallel calls: the same refs as the general way gives
    messages = [
        USER,
        _said("both", _call("c1"), _call("c2")),
        _tool("c2", "two"),
        _tool("c1", "one"),
    ]
    view = openai_chat.view(messages)
    assert view.refs == [PASSTHROUGH, 0, TEXT_PART, 1, 0, 0]
    assert view.starts == [0, 1, 4, 5, 6]
    shown = openai_chat.view(messages, mark=False)
    assert shown.refs == [PASSTHROUGH, TEXT_PART, 0, 1, 0, 0]


def test_a_call_id_used_again_by_a_later_group() -> None:
    # each group is answered by the tool message right after it, not by an earlier one
    messages = [
        USER,
        _said(None, _call("c1")),
        _tool("c1", "first"),
        _said(None, _call("c1", "bash", '{"cmd":"pwd"}')),
        _tool("c1", "second"),
    ]
    view = openai_chat.view(messages)
    assert [m["content"] for m in _plain(view)[1:]] == [
        BODY,
        '{"id":"c1","content":"first"}',
        '{"name":"bash","id":"c1","arguments":{"cmd":"pwd"}}',
        '{"id":"c1","content":"second"}',
    ]
    assert view.malformed == 0
