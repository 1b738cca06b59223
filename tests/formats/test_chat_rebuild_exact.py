"""OpenAI Chat messages rebuilt from a strategy's result, written out by hand.

A strategy given as a function drops, rewrites or adds view messages; the
messages the provider then receives are stated exactly: which objects come
back as themselves, how a rewritten call or output is sent, where a notice
goes, and that the result stays valid for the provider (tests/formats/validity.py).
Also by hand: the view of a group whose strings the previous view of the same
conversation had (the known way, ``prepare(texts=...)``), and what the view shows
of the fields a message sends beside its content (so that the estimate counts them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from scoutd import prepare
from scoutd.formats import openai_chat
from scoutd.formats.texts import ConversationTexts

from .test_chat_view_exact import (
    MARK,
    USER,
    Message,
    Seen,
    _call,
    _custom,
    _malformed,
    _said,
    _tool,
    fc,
    text,
)
from .validity import chat_problems

NOTICE = {"role": "user", "content": "notice"}


def _sent(messages: list[Any], strategy: Callable[[list[Any]], list[Any]]) -> list[Any]:
    prepared = prepare(messages, strategy, format="openai-chat")
    assert not chat_problems(prepared.messages) - chat_problems(messages)
    return prepared.messages


def _rewrite(match: str, body: Callable[[dict[str, Any]], Any]) -> Callable[[list[Any]], list[Any]]:
    """A strategy rewriting the body of each view message whose content holds ``match``."""

    def strategy(view: list[Any]) -> list[Any]:
        result = []
        for message in view:
            if type(message) is dict and MARK in message and match in message["content"]:
                changed = json.loads(message["content"])
                message = {**message, "content": json.dumps(body(changed))}
            result.append(message)
        return result

    return strategy


def _arguments(value: Any) -> Callable[[dict[str, Any]], Any]:
    def body(call: dict[str, Any]) -> Any:
        return {**call, "arguments": value} if "arguments" in call else call

    return body


def test_a_rewritten_call_alone_sends_its_new_arguments() -> None:
    messages = [USER, _said(None, _call("c1", "bash", '{"cmd":"ls -la"}')), _tool("c1")]
    sent = _sent(messages, _rewrite('"c1","arguments"', _arguments({"cmd": "ls"})))
    assert sent == [USER, _said(None, _call("c1", "bash", '{"cmd":"ls"}')), _tool("c1")]
    assert sent[0] is USER and sent[2] is messages[2]
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"cmd":"ls -la"}'


def test_a_rewritten_call_beside_others_changes_only_itself() -> None:
    messages = [
        USER,
        _said("two", _call("c1"), _call("c2", "bash", '{"cmd":"cat big"}')),
        _tool("c1"),
        _tool("c2"),
    ]
    sent = _sent(messages, _rewrite('"c2","arguments"', _arguments({"cmd": "cat"})))
    expected = _said("two", _call("c1"), _call("c2", "bash", '{"cmd":"cat"}'))
    assert sent == [USER, expected, *messages[2:]]
    assert sent[1]["tool_calls"][0] is messages[1]["tool_calls"][0]


@pytest.mark.parametrize("calls", [1, 2])
def test_a_rewritten_custom_input_stays_a_text(calls: int) -> None:
    entries = [_custom("p1", "*** long patch"), _call("c2")][:calls]
    messages = [USER, _said(None, *entries), *(_tool(e["id"]) for e in entries)]
    sent = _sent(messages, _rewrite('"p1","arguments"', _arguments({"input": "*** short"})))
    assert sent[1]["tool_calls"] == [_custom("p1", "*** short"), *entries[1:]]
    assert messages[1]["tool_calls"][0] == _custom("p1", "*** long patch")


@pytest.mark.parametrize("arguments", [{"input": 5}, "text", None])
def test_a_custom_call_rewritten_into_no_text_input_is_sent_as_it_was(arguments: Any) -> None:
    messages = [USER, _said(None, _custom("p1")), _tool("p1")]
    sent = _sent(messages, _rewrite('"p1","arguments"', _arguments(arguments)))
    assert sent[1]["tool_calls"] == [_custom("p1")]


def test_a_call_rewritten_into_no_object_is_sent_as_it_was() -> None:
    messages = [USER, _said(None, _call("c1"), _call("c2")), _tool("c1"), _tool("c2")]
    sent = _sent(messages, _rewrite('"c2","arguments"', _arguments("not an object")))
    assert sent == messages


@pytest.mark.parametrize(
    ("content", "sent_content"),
    [
        ("a long output", "short"),
        ([{"type": "text", "text": "a long output"}], [{"type": "text", "text": "short"}]),
    ],
)
def test_a_rewritten_output_keeps_its_shape(content: Any, sent_content: Any) -> None:
    for calls in (1, 2):
        entries = [_call("c1"), _call("c2")][:calls]
        answers = [_tool(e["id"], content) for e in entries]
        messages = [USER, _said(None, *entries), *answers]

        def body(output: dict[str, Any]) -> Any:
            return {**output, "content": "short"} if "content" in output else output

        sent = _sent(messages, _rewrite('"c1","content"', body))
        assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": sent_content}
        assert sent[1] is messages[1] and sent[3:] == answers[1:]
        assert answers[0]["content"] == content


def test_an_output_rewritten_unreadably_is_sent_as_it_was() -> None:
    messages = [USER, _said(None, _call("c1")), _tool("c1", "out")]

    def strategy(view: list[Any]) -> list[Any]:
        return [*view[:-1], {**view[-1], "content": "not json"}]

    assert _sent(messages, strategy) == messages


# --- where a notice goes -----------------------------------------------------------


def _notice_last(view: list[Any]) -> list[Any]:
    return [*view, NOTICE]


def test_a_notice_after_everything_goes_last_when_every_call_is_answered() -> None:
    messages = [USER, _said(None, _call("c1"), _call("c2")), _tool("c1"), _tool("c2")]
    assert _sent(messages, _notice_last) == [*messages, NOTICE]


def test_a_notice_after_everything_goes_before_calls_still_waiting() -> None:
    waiting = [USER, _said(None, _call("c1"), _call("c2")), _tool("c1")]
    assert _sent(waiting, _notice_last) == [USER, NOTICE, *waiting[1:]]
    none_answered = [USER, _said("x", _call("c1"))]
    assert _sent(none_answered, _notice_last) == [USER, NOTICE, none_answered[1]]


def test_a_notice_after_a_legacy_function_call() -> None:
    legacy = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "f", "arguments": "{}"},
    }
    assert _sent([USER, legacy], _notice_last) == [USER, NOTICE, legacy]
    answered = [USER, legacy, {"role": "function", "name": "f", "content": "ok"}]
    assert _sent(answered, _notice_last) == [*answered, NOTICE]
    said = {"role": "assistant", "content": "hi", "tool_calls": []}
    assert _sent([USER, said], _notice_last) == [USER, said, NOTICE]
    assert _sent([USER], _notice_last) == [USER, NOTICE]
    orphan = _tool("c9")
    assert _sent([orphan], _notice_last) == [orphan, NOTICE]


def test_a_new_message_carrying_a_mark_it_does_not_own_is_sent_without_it() -> None:
    messages = [USER, _said(None, _call("c1")), _tool("c1")]

    def strategy(view: list[Any]) -> list[Any]:
        marked = {"role": "user", "content": "n", MARK: "x"}
        return [view[0], marked, *view[1:], {**marked, "content": "m"}]

    sent = _sent(messages, strategy)
    assert sent == [
        USER,
        {"role": "user", "content": "n"},
        *messages[1:],
        {"role": "user", "content": "m"},
    ]


# --- the known way: the strings of the previous view ---------------------------------


def _rounds(second: Callable[[str], list[Any]]) -> tuple[list[Any], list[Any]]:
    """Two prepares sharing one conversation's texts; ``second`` builds the second
    round's messages around the very output string of the first."""
    output = "output " * 20
    first = [USER, _said(None, _call("c1")), _tool("c1", output)]
    texts = ConversationTexts()
    seen = Seen()
    prepare(first, seen, format="openai-chat", texts=texts)
    messages = second(output)
    prepared = prepare(messages, seen, format="openai-chat", texts=texts)
    assert prepared.messages == messages
    assert texts.kept is not None  # kept for the next view
    return seen.plain(0), [seen.plain(1), prepared.report[-1].malformed]


def test_the_same_strings_give_the_same_view() -> None:
    first, (second, malformed) = _rounds(
        lambda output: [USER, _said(None, _call("c1")), _tool("c1", output)]
    )
    assert first == second and malformed == 0
    after = Message(role="user", content="next")  # a mapping of another type after it
    _, (second, malformed) = _rounds(
        lambda output: [USER, _said(None, _call("c1")), _tool("c1", output), after]
    )
    assert second == [*first, after] and malformed == 0
    # the answer itself of another mapping type, the very output string: as the dict
    _, (second, malformed) = _rounds(
        lambda output: [USER, _said(None, _call("c1")), Message(**_tool("c1", output))]
    )
    assert second == first and malformed == 0


def test_an_output_string_seen_before_in_a_group_it_cannot_read() -> None:
    def entry_no_object(output: str) -> list[Any]:
        return [USER, _said(None, "c1"), _tool("c1", output)]

    assert _rounds(entry_no_object)[1][1] == 2


@pytest.mark.parametrize(
    ("call", "body"),
    [
        (_call("c2"), '{"name":"bash","id":"c2","arguments":{"cmd":"ls"}}'),
        (_call("c1", "grep"), '{"name":"grep","id":"c1","arguments":{"cmd":"ls"}}'),
        (
            _call("c1", "bash", '{"cmd":"pwd"}'),
            '{"name":"bash","id":"c1","arguments":{"cmd":"pwd"}}',
        ),
    ],
)
@pytest.mark.parametrize("said", [None, "now"])
def test_an_output_string_seen_before_with_another_call(
    call: dict[str, Any], body: str, said: Any
) -> None:
    def second(output: str) -> list[Any]:
        return [USER, _said(said, call), _tool(call["id"], output)]

    _, (view, malformed) = _rounds(second)
    assert view[1:-1] == [*([text(said)] if said else []), fc(body)]
    assert json.loads(view[-1]["content"])["id"] == call["id"]
    assert malformed == 0


def test_an_output_string_seen_before_in_a_changed_group() -> None:
    def answered_by_another(output: str) -> list[Any]:
        return [USER, _said(None, _call("c1")), _tool("c2", output)]

    assert _rounds(answered_by_another)[1][1] == 2

    def with_text(output: str) -> list[Any]:
        return [USER, _said("now", _call("c1")), _tool("c1", output)]

    view, malformed = _rounds(with_text)[1]
    assert view[1] == text("now") and malformed == 0

    def with_refusal(output: str) -> list[Any]:
        return [USER, {**_said(None, _call("c1")), "refusal": "no"}, _tool("c1", output)]

    view, _ = _rounds(with_refusal)[1]
    assert "refusal" in json.dumps(view[1])

    def answer_named(output: str) -> list[Any]:
        return [USER, _said(None, _call("c1")), {**_tool("c1", output), "name": "bash"}]

    view, _ = _rounds(answer_named)[1]
    assert view[1] == fc(
        '{"name":"bash","id":"c1","arguments":{"cmd":"ls"},"fields":{"name":"bash"}}'
    )

    def answered_twice(output: str) -> list[Any]:
        return [USER, _said(None, _call("c1")), _tool("c1", output), _tool("c1", "more")]

    assert _rounds(answered_twice)[1][1] == 3

    def custom_now(output: str) -> list[Any]:
        return [USER, _said(None, _custom("c1")), _tool("c1", output)]

    view, malformed = _rounds(custom_now)[1]
    assert view[1] == fc('{"name":"apply","id":"c1","arguments":{"input":"*** patch"}}')
    assert malformed == 0


# --- what an assistant's text shows beside its calls, what a message passed shows ----------


@pytest.mark.parametrize(
    ("content", "extra", "shown"),
    [
        ("hi", {"refusal": "no"}, [{"type": "text", "text": "hi"}, {"refusal": "no"}]),
        (
            None,
            {"audio": {"id": "a1"}},
            [{"audio": {"id": "a1"}}, {"type": "audio", "audio": {"id": "a1"}}],
        ),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], {}, "a\nb"),
        ([{"type": "refusal", "refusal": "no"}], {}, [{"type": "refusal", "refusal": "no"}]),
        (None, {"name": "bot", "refusal": None}, [{"name": "bot"}]),
        ("", {"refusal": "x"}, [{"type": "text", "text": ""}, {"refusal": "x"}]),
        ("hi", {"provider_specific_fields": {"x": 1}, "scoutd_origin": 3}, "hi"),
        ([], {"refusal": "x"}, [{"refusal": "x"}]),
        (
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            {"refusal": "x"},
            [{"type": "text", "text": "a\nb"}, {"refusal": "x"}],
        ),
        (
            [{"type": "refusal", "refusal": "no"}],
            {"name": "n"},
            [{"type": "refusal", "refusal": "no"}, {"name": "n"}],
        ),
    ],
)
@pytest.mark.parametrize("calls", [1, 2])
def test_an_assistants_text_shows_what_it_sends_beside_its_calls(
    content: Any, extra: dict[str, Any], shown: Any, calls: int
) -> None:
    entries = [_call(f"c{k}") for k in range(calls)]
    messages = [
        USER,
        {**_said(content, *entries), **extra},
        *(_tool(f"c{k}") for k in range(calls)),
    ]
    seen = Seen()
    prepare(messages, seen, format="openai-chat")
    assert seen.plain()[calls] == text(shown)  # before the last call


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        (
            {
                "role": "user",
                "content": "u",
                "provider_specific_fields": {"x": 1},
                "scoutd_origin": 1,
            },
            None,
        ),
        ({"role": "user", "content": "u", "name": None}, None),
        (
            {"role": "user", "content": "u", "name": "ann", "other": None},
            {"role": "user", "content": [{"type": "text", "text": "u"}, {"name": "ann"}]},
        ),
        (
            {"role": "user", "content": {"type": "text", "text": "u"}, "name": "ann"},
            {"role": "user", "content": [{"type": "text", "text": "u"}, {"name": "ann"}]},
        ),
        (
            {"role": "developer", "content": [{"type": "text", "text": "d"}], "tool_calls": "x"},
            {"role": "developer", "content": [{"type": "text", "text": "d"}, {"tool_calls": "x"}]},
        ),
        ({"role": "system", "name": "s"}, {"role": "system", "content": [{"name": "s"}]}),
    ],
)
def test_a_message_passed_through_shows_what_it_sends_beside_its_content(
    message: dict[str, Any], shown: Any
) -> None:
    seen = Seen()
    prepared = prepare([message, USER], seen, format="openai-chat")
    assert seen.plain()[0] == (shown or message)
    assert (seen.views[0][0] is message) == (shown is None)
    assert prepared.messages[0] is message


@pytest.mark.parametrize("odd", [{}, "", 5])
def test_calls_of_no_list_are_calls_passed_through(odd: Any) -> None:
    """``tool_calls`` that is no list (even an empty one) holds calls the adapter cannot
    read: a stand-in the strategies keep with its answers, sent as it was."""
    message = {"role": "assistant", "content": "odd", "tool_calls": odd}
    seen = Seen()
    prepared = prepare([USER, message, USER], seen, format="openai-chat")
    shown = [{"type": "text", "text": "odd"}, {"tool_calls": odd}]
    assert seen.plain()[1] == {"role": "passthrough", "content": shown}
    assert prepared.messages[1] is message


def test_a_message_of_a_scout_role_stands_in_as_passthrough() -> None:
    named = {"role": "function_call", "content": "x", "name": "n"}
    plain = {"role": "function_call_output", "content": "y"}
    count, view = _malformed([USER, named, plain, USER])
    assert count == 0
    assert view[1:3] == [
        {"role": "passthrough", "content": [{"content": "x", "name": "n"}]},
        {"role": "passthrough", "content": [{"content": "y"}]},
    ]


def test_what_is_no_mapping_passes_through_the_view_as_it_is() -> None:
    """``prepare`` refuses it; the adapter's own view still passes it through, unread."""
    odd = ["no", "message"]
    view = openai_chat.view([USER, None, _said(None, _call("c1")), odd, 7])
    assert view.messages[1] is None and view.messages[-2:] == [odd, 7]
    assert view.malformed == 1  # the call whose answer is no tool message
