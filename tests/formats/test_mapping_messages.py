"""Messages of a mapping type that is no ``dict``, in every provider format.

A client's or an SDK's own message type is read as a dict with the same keys:
the conversation is compacted exactly as the same one made of dicts
(docs/FORMATS.md, "Any mapping"). Until 6 December 2026 an OpenAI Chat ``tool``
message of such a type was never read as an answer: its group was passed
through whole and counted malformed, so a conversation of them was never
compacted and outgrew the window.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import scoutd
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.mapping import Message

CONFIG = {"context_window": 20_000}


def _conversation(answer: Any, pairs: int = 60) -> list[Any]:
    messages: list[Any] = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix the build."},
    ]
    for n in range(pairs):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"pytest t{n}"})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(answer(role="tool", tool_call_id=f"c{n}", content=f"{n:04d} " + "x" * 3000))
    return messages


def _plain(messages: list[Any]) -> list[Any]:
    return [dict(message) for message in messages]


def test_an_answer_of_another_mapping_type_is_compacted_as_a_dict_is() -> None:
    mapped = scoutd.prepare(_conversation(Message), format="openai-chat", config=CONFIG)
    plain = scoutd.prepare(_conversation(dict), format="openai-chat", config=CONFIG)
    assert _plain(mapped.messages) == plain.messages
    assert len(plain.messages) < 60  # it compacted
    assert mapped.report == plain.report
    assert mapped.report[0].outputs_dropped > 0  # the compaction's
    assert mapped.report[-1].malformed == 0  # the format's count, on the last report


def test_a_session_of_such_answers_prepares_as_the_whole_conversation() -> None:
    """Round by round, the in-process session gives each call's prompt as a whole
    prepare of the same messages does."""
    messages = _conversation(Message, pairs=40)
    session = scoutd.Session(format="openai-chat", config=CONFIG)
    compacted = 0
    for end in range(4, len(messages) + 1, 2):
        got = session.prepare(messages[:end])
        whole = scoutd.prepare(messages[:end], format="openai-chat", config=CONFIG)
        assert _plain(got.messages) == _plain(whole.messages), end
        compacted += len(whole.messages) < end
    assert compacted >= 5


@pytest.mark.parametrize(
    ("format_name", "derive"), [("anthropic", to_anthropic), ("openai-responses", to_responses)]
)
def test_every_message_of_another_mapping_type_in_the_other_formats(
    format_name: str, derive: Any
) -> None:
    plain = derive(_conversation(dict))
    mapped = [Message(**message) if type(message) is dict else message for message in plain]
    got = scoutd.prepare(mapped, format=format_name, config=CONFIG)
    expected = scoutd.prepare(plain, format=format_name, config=CONFIG)
    assert _plain(got.messages) == _plain(expected.messages)
    assert len(expected.messages) < len(plain) and got.report[-1].malformed == 0
