"""The OpenAI Chat view reuses the texts of the previous view only for the very same strings.

An agent sends the same message objects every turn, so the view keeps the
texts of its last one-call groups (docs/PERFORMANCE.md). These tests check
that the reuse happens, and that a message edited in place between two calls
is read afresh: every prepare answers what a first prepare of a fresh copy
answers.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from scoutd import prepare
from scoutd.config import Config
from scoutd.engine.incremental import SessionPrompt
from scoutd.formats import openai_chat
from scoutd.formats.texts import ConversationTexts
from scoutd.formats.view import VIEW_KEY, View
from scoutd.strategies.tool_messages import ToolBody

from .conversations import chat, epoch_window

# Every pair kept, all but the newest output shortened: the answer shows every text.
SHORT = {"max_tool_calls": 100, "full_tool_outputs": 1, "max_tool_chars": 10}
TIGHT = epoch_window(1)
# The texts the tests' agent keeps for its conversation, passed to every view and prepare
KEPT = ConversationTexts()


def _chat_view(messages: list[Any], mark: bool) -> View:
    return openai_chat.view(messages, mark, KEPT)


def _fresh(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a first prepare of a copy of ``messages`` answers (nothing reused)."""
    KEPT.forget()
    return prepare(
        copy.deepcopy(messages), "shorten_tools_epoch", config=TIGHT, texts=KEPT
    ).messages


def _tool_texts(messages: list[dict[str, Any]] | View) -> list[str]:
    """The tool texts of a view, or of the OpenAI Chat view of ``messages``."""
    view = messages if isinstance(messages, View) else openai_chat.view(messages, True, KEPT)
    return [m["content"] for m in view.messages if m.get("role", "").startswith("function_call")]


def _chat(pairs: int, narrated: bool) -> list[dict[str, Any]]:
    """:func:`chat`, or without the assistant's text (as most agents send calls)."""
    messages = chat(pairs)
    if not narrated:
        for message in messages:
            if message["role"] == "assistant":
                message["content"] = None
    return messages


@pytest.mark.parametrize("narrated", [True, False])
def test_the_same_messages_get_the_same_text_objects(narrated: bool) -> None:
    messages = _chat(4, narrated)
    KEPT.forget()
    first = _tool_texts(messages)
    second = _tool_texts(messages)
    assert len(first) == 8
    assert first == second
    assert all(a is b for a, b in zip(first, second, strict=True))
    third = _tool_texts(messages)  # the second view kept what it reused
    assert all(a is b for a, b in zip(first, third, strict=True))
    KEPT.forget()
    third = _tool_texts(messages)
    assert third == first
    assert not any(a is b for a, b in zip(first, third, strict=True))


def test_new_dicts_with_the_same_strings_reuse_and_new_strings_do_not() -> None:
    messages = chat(4)
    KEPT.forget()
    first = _tool_texts(messages)
    copied = _tool_texts(copy.deepcopy(messages))  # new dicts, the same string objects
    assert copied == first
    assert all(a is b for a, b in zip(first, copied, strict=True))
    decoded = _tool_texts(json.loads(json.dumps(messages)))  # new strings, as a daemon reads them
    assert decoded == first
    assert not any(a is b for a, b in zip(first, decoded, strict=True))


def _set_output(messages: list[dict[str, Any]]) -> None:
    messages[3]["content"] = "a new output of the first call"


def _set_tool_call_id(messages: list[dict[str, Any]]) -> None:
    messages[3]["tool_call_id"] = "another"  # now unanswered: the group is malformed


def _set_id(messages: list[dict[str, Any]]) -> None:
    messages[4]["tool_calls"][0]["id"] = "renamed"
    messages[5]["tool_call_id"] = "renamed"


def _set_call_id(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][0]["id"] = "renamed"  # now unanswered: the group is malformed


def _set_name(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][0]["function"]["name"] = "grep"


def _set_arguments(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"cmd": "pwd"})


def _set_arguments_to_a_list(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][0]["function"]["arguments"] = "[1, 2]"


def _replace_function(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][0]["function"] = {"name": "cat", "arguments": "{}"}


def _add_a_second_answer(messages: list[dict[str, Any]]) -> None:
    messages.insert(4, {"role": "tool", "tool_call_id": "c0_0", "content": "again"})


def _answer_as_user(messages: list[dict[str, Any]]) -> None:
    messages[3]["role"] = "user"  # the call is now unanswered: the group is malformed


def _add_a_second_call(messages: list[dict[str, Any]]) -> None:
    entry = copy.deepcopy(messages[2]["tool_calls"][0])
    entry["id"] = "extra"
    messages[2]["tool_calls"].append(entry)


EDITS: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "output": _set_output,
    "tool_call_id": _set_tool_call_id,
    "id": _set_id,
    "call id": _set_call_id,
    "name": _set_name,
    "arguments": _set_arguments,
    "arguments not an object": _set_arguments_to_a_list,
    "function": _replace_function,
    "second answer": _add_a_second_answer,
    "answer role": _answer_as_user,
    "second call": _add_a_second_call,
}


def check_read_afresh(
    messages: list[Any],
    edit: Callable[[list[Any]], object],
    view: Callable[[list[Any], bool], View] = _chat_view,
) -> None:
    """After ``edit`` in place, the view equals that of a fresh copy, and the texts changed."""
    KEPT.forget()
    before = _tool_texts(view(messages, True))  # the texts are now kept
    edit(messages)
    after = view(messages, True)
    KEPT.forget()
    fresh = view(copy.deepcopy(messages), True)
    assert after.messages == fresh.messages
    assert (after.refs, after.starts, after.malformed) == (
        fresh.refs,
        fresh.starts,
        fresh.malformed,
    )
    assert _tool_texts(after) != before


@pytest.mark.parametrize("narrated", [True, False])
@pytest.mark.parametrize("edit", EDITS)
def test_a_message_edited_in_place_is_read_afresh(edit: str, narrated: bool) -> None:
    messages = _chat(5, narrated)
    check_read_afresh(messages, EDITS[edit])


@pytest.mark.parametrize("narrated", [True, False])
@pytest.mark.parametrize("edit", EDITS)
def test_a_prepare_after_an_edit_in_place_answers_what_a_fresh_one_does(
    edit: str, narrated: bool
) -> None:
    messages = _chat(5, narrated)
    KEPT.forget()
    prepare(messages, "shorten_tools", config=SHORT, texts=KEPT)  # the texts are now kept
    EDITS[edit](messages)
    got = prepare(messages, "shorten_tools", config=SHORT, texts=KEPT).messages
    KEPT.forget()
    assert (
        got == prepare(copy.deepcopy(messages), "shorten_tools", config=SHORT, texts=KEPT).messages
    )


def test_text_given_in_place_to_a_kept_call_is_read_afresh() -> None:
    messages = _chat(5, narrated=False)
    KEPT.forget()
    openai_chat.view(messages, True, KEPT)  # the texts are now kept
    messages[2]["content"] = "Let me look."
    after = openai_chat.view(messages, True, KEPT)
    KEPT.forget()
    fresh = openai_chat.view(copy.deepcopy(messages), True, KEPT)
    # the text read afresh, beside the reasoning the message sends (counted with it)
    text = [{"type": "text", "text": "Let me look."}, {"reasoning_content": "thinking 0"}]
    assert {"role": "assistant", "content": text, VIEW_KEY: 2} in after.messages
    assert (after.messages, after.refs, after.starts) == (fresh.messages, fresh.refs, fresh.starts)


@pytest.mark.parametrize("narrated", [True, False])
def test_a_growing_conversation_answers_what_a_fresh_one_does(narrated: bool) -> None:
    messages = _chat(8, narrated)
    KEPT.forget()
    for end in range(3, len(messages) + 1):
        prefix = messages[:end]
        got = prepare(prefix, "shorten_tools_epoch", config=TIGHT, texts=KEPT)
        assert got.messages == _fresh(prefix)
        assert all(VIEW_KEY not in m for m in got.messages)


def test_parallel_calls_reuse_their_texts_too() -> None:
    messages = chat(3, parallel=3)
    KEPT.forget()
    first = _tool_texts(messages)
    second = _tool_texts(messages)
    assert len(first) == 18
    assert all(a is b for a, b in zip(first, second, strict=True))


def _edit_parallel_id(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][1]["id"] = "renamed"
    messages[4]["tool_call_id"] = "renamed"


def _edit_parallel_output(messages: list[dict[str, Any]]) -> None:
    messages[5]["content"] = "a new output"


def _edit_parallel_name(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][2]["function"]["name"] = "grep"


def _edit_parallel_arguments(messages: list[dict[str, Any]]) -> None:
    messages[2]["tool_calls"][0]["function"]["arguments"] = '"a string"'


PARALLEL_EDITS: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "id": _edit_parallel_id,
    "output": _edit_parallel_output,
    "name": _edit_parallel_name,
    "arguments": _edit_parallel_arguments,
}


@pytest.mark.parametrize("edit", PARALLEL_EDITS)
def test_parallel_calls_edited_in_place_are_read_afresh(edit: str) -> None:
    messages = chat(3, parallel=3)
    check_read_afresh(messages, PARALLEL_EDITS[edit])


def _check_bodies(view: Any) -> int:
    """Every body handed over is that of its text; how many of the view's texts have one."""
    for key, (text, body) in view.bodies.items():
        assert key == id(text) and body == msgspec.json.decode(text, type=ToolBody)
    return sum(id(m["content"]) in view.bodies for m in view.messages if isinstance(m, dict))


@pytest.mark.parametrize("narrated", [True, False])
def test_the_bodies_of_a_growing_conversation_are_handed_over(narrated: bool) -> None:
    messages = _chat(8, narrated)
    KEPT.forget()
    for end in range(4, len(messages) + 1):
        prepare(
            messages[:end], "shorten_tools", config=SHORT, texts=KEPT
        )  # its strategies parse them
        assert _check_bodies(openai_chat.view(messages[:end], True, KEPT)) == 2 * ((end - 2) // 2)
    prepare(messages[:6], "shorten_tools", config=SHORT, texts=KEPT)  # the last groups left out
    assert _check_bodies(openai_chat.view(messages[:6], True, KEPT)) == 4
    assert _check_bodies(openai_chat.view(messages[:6], True, KEPT)) == 0  # no prepare in between


def test_a_prepare_stores_the_bodies_it_parsed_for_the_next() -> None:
    messages = _chat(4, narrated=False)
    KEPT.forget()
    assert _check_bodies(openai_chat.view(messages, True, KEPT)) == 0  # none parsed yet
    prepare(messages, "shorten_tools", config=SHORT, texts=KEPT)  # the strategies parse them once
    assert _check_bodies(openai_chat.view(messages, True, KEPT)) == 8


@pytest.mark.parametrize("edit", EDITS)
def test_the_bodies_after_an_edit_in_place_are_those_of_the_texts(edit: str) -> None:
    messages = _chat(5, narrated=False)
    KEPT.forget()
    openai_chat.view(messages, True, KEPT)
    prepare(messages, "shorten_tools", config=SHORT, texts=KEPT)
    EDITS[edit](messages)
    _check_bodies(openai_chat.view(messages, True, KEPT))
    got = prepare(messages, "shorten_tools", config=SHORT, texts=KEPT).messages
    KEPT.forget()
    assert (
        got == prepare(copy.deepcopy(messages), "shorten_tools", config=SHORT, texts=KEPT).messages
    )


def test_conversations_kept_apart_stay_warm_when_they_take_turns() -> None:
    first, second = _chat(4, False), _chat(5, True)
    KEPT.forget()
    before = _tool_texts(first)
    _tool_texts(second)
    after = _tool_texts(first)  # one object keeps one conversation's texts: not these
    assert after == before and not any(a is b for a, b in zip(before, after, strict=True))
    mine, theirs = ConversationTexts(), ConversationTexts()
    before = _tool_texts(openai_chat.view(first, True, mine))
    _tool_texts(openai_chat.view(second, True, theirs))
    after = _tool_texts(openai_chat.view(first, True, mine))
    assert all(a is b for a, b in zip(before, after, strict=True))
    mine.forget()
    again = _tool_texts(openai_chat.view(first, True, mine))
    assert not any(a is b for a, b in zip(before, again, strict=True))
    unkept = _tool_texts(openai_chat.view(first, True))  # without an owner: nothing reused
    assert not any(a is b for a, b in zip(again, unkept, strict=True))


def test_sessions_keep_their_own_texts_and_answer_what_a_fresh_prepare_does() -> None:
    conversations = [_chat(6, False), _chat(7, True)]
    ends = (3, 5, 8, 12)
    expected = [[_fresh(messages[:end]) for messages in conversations] for end in ends]
    KEPT.forget()
    sessions = [SessionPrompt(format="openai-chat"), SessionPrompt(format="openai-chat")]
    for end, answers in zip(ends, expected, strict=True):
        for session, messages, answer in zip(sessions, conversations, answers, strict=True):
            session.extend(messages[len(session.messages) : end])
            prepared, _ = session.prepare("shorten_tools_epoch", Config(prompt=TIGHT))
            assert prepared.messages == answer
            assert session.view_texts.kept is not None
    assert KEPT.kept is None  # another owner's texts are not touched
    sessions[0].reset(conversations[0][:2])
    assert sessions[0].view_texts.kept is None
