"""Format detection from the messages themselves, and the mixed-list error."""

from __future__ import annotations

from typing import Any

import pytest

from scoutd.formats import detect_format, resolve_format, scout_view

from .conversations import anthropic, chat, responses


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (chat(2), "openai-chat"),
        (anthropic(2), "anthropic"),
        (responses(2), "openai-responses"),
        ([{"role": "user", "content": "hi"}], "scout"),
        ([{"role": "function_call", "content": "{}"}], "scout"),
        ([], "scout"),
        ([{"role": "tool", "tool_call_id": "a", "content": "x"}], "openai-chat"),
        ([{"role": "assistant", "content": "hi", "tool_calls": None}], "scout"),
    ],
)
def test_detects_the_format(messages: list[Any], expected: str) -> None:
    assert detect_format(messages) == expected


def test_an_anthropic_response_dumped_whole_is_anthropic() -> None:
    messages = anthropic(2)
    messages[1] = {"id": "msg_1", "type": "message", "model": "claude", **messages[1]}
    messages.append(
        {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "done"}]}
    )
    assert detect_format(messages) == "anthropic"
    assert detect_format([{"type": "message", "role": "user", "content": "hi"}]) == (
        "openai-responses"
    )


def test_a_mixed_list_names_the_first_conflicting_messages() -> None:
    mixed = [*chat(1), *anthropic(1)[1:]]
    with pytest.raises(ValueError, match=r"message 2 is openai-chat .* message 4 is anthropic"):
        detect_format(mixed)


def test_hostile_messages_do_not_break_detection() -> None:
    hostile: list[Any] = [None, 3, "text", {"content": [None, 4, {"type": 5}]}, {"type": ["x"]}]
    assert detect_format(hostile) == "scout"


def test_a_declared_format_warns_about_foreign_tool_traffic() -> None:
    name, warning = resolve_format(chat(1), "anthropic")
    assert name == "anthropic"
    assert warning is not None and "openai-chat" in warning and "message 2" in warning
    assert resolve_format(chat(1), "openai-chat") == ("openai-chat", None)


def test_unknown_format_names_are_refused() -> None:
    with pytest.raises(ValueError, match="known formats"):
        resolve_format([], "gemini")


def test_scout_view_of_each_format() -> None:
    for messages in (chat(2), anthropic(2), responses(2)):
        roles = [m.get("role") for m in scout_view(messages)]
        assert roles.count("function_call") == 2
        assert roles.count("function_call_output") == 2
        assert all("scoutd.view" not in m for m in scout_view(messages) if isinstance(m, dict))
