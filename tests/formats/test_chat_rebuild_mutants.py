"""Where the OpenAI Chat rebuild puts a notice after every message, for last messages
of odd shapes, and what it makes of a notice it is given as it is.

The expected messages are written out by hand: a notice goes last unless the last
assistant message still waits for answers to its calls (then it goes before that
message, so the answers follow their calls).

Also a property over drawn, damaged conversations: a message passed through and a
``tool`` message own exactly one view message each, which is why the rebuild's
branches for several view messages of such a message are never reached.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scoutd import prepare
from scoutd.formats import openai_chat
from scoutd.formats.openai_chat_rebuild import is_tool, new_message
from scoutd.formats.view import PASSTHROUGH

from ..support.mapping import Message
from .awkward_conversations import chat
from .drawn import SETTINGS

USER = {"role": "user", "content": "fix the bug"}
NOTICE = {"role": "user", "content": "notice"}


def _notice_last(view: list[Any]) -> list[Any]:
    return [*view, NOTICE]


def _sent(messages: list[Any]) -> list[Any]:
    return prepare(messages, _notice_last, format="openai-chat").messages


def test_a_notice_goes_after_a_last_assistant_message_without_calls() -> None:
    said = {"role": "assistant", "content": "done"}
    assert _sent([USER, said]) == [USER, said, NOTICE]


def test_a_notice_goes_after_a_user_message_naming_a_function_call() -> None:
    # only an assistant's calls wait for answers, whatever another role carries
    odd = {"role": "user", "content": "x", "function_call": {"name": "f", "arguments": "{}"}}
    assert _sent([USER, odd]) == [USER, odd, NOTICE]


def test_a_notice_goes_before_an_empty_call_list_beside_a_legacy_call() -> None:
    legacy: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [],
        "function_call": {"name": "f", "arguments": "{}"},
    }
    assert _sent([USER, legacy]) == [USER, NOTICE, legacy]


def test_a_notice_goes_before_calls_of_no_list() -> None:
    # calls that are no list (malformed, passed through) are not taken as answered
    for odd in (7, {"id": "c1", "type": "function"}):
        message = {"role": "assistant", "content": None, "tool_calls": odd}
        assert _sent([USER, message]) == [USER, NOTICE, message]


def test_a_single_call_of_no_list_answered_right_after() -> None:
    # one call given as itself rather than in a list, answered: nothing waits
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": call}
    answer = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert _sent([USER, message, answer]) == [USER, message, answer, NOTICE]


def test_a_new_message_without_a_mark_is_itself() -> None:
    notice = {"role": "user", "content": "n"}
    assert new_message(notice) is notice
    for other in ("a scoutd.view text", 3, None):
        assert new_message(other) is other


# --- which provider messages own several view messages ------------------------------


def _damaged(data: st.DataObject, messages: list[Any]) -> list[Any]:
    """``messages`` with a few drawn damages: an answer lost, doubled or given as a
    mapping of another type, calls of no list, a scout role, a legacy call."""
    messages = list(messages)
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(messages) - 1))
        message = messages[at]
        kind = data.draw(st.sampled_from(["lose", "double", "mapping", "no list", "other"]))
        if kind == "lose" and len(messages) > 1:
            del messages[at]
        elif kind == "double":
            messages.insert(at, message)
        elif kind == "mapping" and type(message) is dict:
            messages[at] = Message(**message)
        elif kind == "no list" and type(message) is dict and "tool_calls" in message:
            messages[at] = {**message, "tool_calls": message["tool_calls"][0]}
        elif kind == "other":
            odd = data.draw(st.sampled_from(ODD))
            messages.insert(at, odd)
    return messages


ODD: list[Any] = [
    {"role": "function_call", "content": "x"},
    {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
    {"role": "tool", "tool_call_id": "c0", "content": "stray", "name": "bash"},
    {"role": "user", "content": "u", "audio": {"id": "a"}},
]


def test_only_an_assistant_message_of_a_group_owns_several_view_messages() -> None:
    """A message passed through, and a ``tool`` message, own one view message each, so
    the rebuild's ways for several view messages of those never run."""
    reached: Counter[str] = Counter()

    @SETTINGS
    @given(st.data())
    def check(data: st.DataObject) -> None:
        messages = _damaged(data, chat(data, data.draw(st.integers(1, 4))))
        for mark in (True, False):
            shape = openai_chat.view(messages, mark=mark)
            assert len(shape.starts) == len(messages) + 1
            for position, message in enumerate(messages):
                start, end = shape.starts[position], shape.starts[position + 1]
                assert end > start
                if end - start > 1:
                    reached["several"] += 1
                    assert shape.refs[start] != PASSTHROUGH
                    assert not is_tool(message)
                    assert message.get("role") == "assistant"
                elif shape.refs[start] == PASSTHROUGH:
                    reached["passed"] += 1
                    reached["tool passed"] += is_tool(message)

    check()
    assert reached["several"] >= 100
    assert reached["passed"] >= 100
    assert reached["tool passed"] >= 20
