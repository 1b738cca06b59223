"""The parts of the scout view that every adapter shares (scoutd/formats/view.py):
the stand-in of a message passed through, the text of an output's blocks, the
bodies a rewrite is read back from, what a value JSON cannot hold raises, and how
a strategy's result is matched with the view it was given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scoutd.formats.view import (
    KEPT,
    PASSTHROUGH,
    VIEW_KEY,
    Malformed,
    View,
    blocks_text,
    call_text,
    encode_arguments,
    outcome,
    output_text,
    rewritten_arguments,
    rewritten_output,
    with_body_fields,
)
from scoutd.strategies.text import json_text


def test_a_message_passed_through_keeps_its_place_and_hides_a_scout_role() -> None:
    view = View()
    foreign = {"role": "function_call", "content": "x" * 100, "name": "ls"}
    grouped = {"role": "assistant", "content": "text", "tool_calls": [{"id": 1}]}
    odd = ["not", "a", "mapping"]
    plain = {"role": "user", "content": "hi"}
    for message, calls in ((foreign, False), (grouped, True), (odd, False), (plain, False)):
        view.passthrough(message, calls)
    assert view.messages[0] == {
        "role": "passthrough",
        "content": [{"content": "x" * 100, "name": "ls"}],  # counted, never a tool message
    }
    assert view.messages[1] == {"role": "passthrough", "content": "text"}
    assert view.messages[2] is odd and view.messages[3] is plain
    assert view.refs == [PASSTHROUGH] * 4
    assert view.starts == [0, 1, 2, 3, 4]
    assert foreign["role"] == "function_call"  # the caller's message is not changed


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
        ([{"type": "input_image"}, {"type": "image_url"}], "[image]\n[image]"),
        ([{"type": "input_file"}, {"type": "file"}], "[file]\n[file]"),
        ([{"type": "document", "source": {}}], "[document]"),
        (
            [{"type": "search_result", "content": [{"type": "text", "text": "found"}]}],
            "found",
        ),
        ([{"type": "search_result", "content": ["found"]}], None),
        ([{"type": "search_result", "content": "found"}], None),
        ([{"type": "tool_reference"}], None),
        ([{"type": 5}], None),
        (["text"], None),
        ({"type": "text", "text": "a"}, None),
        (None, None),
    ],
)
def test_the_text_of_an_outputs_blocks(content: Any, text: str | None) -> None:
    assert blocks_text(content) == text


def test_an_image_placeholder_of_the_adapters_choice() -> None:
    assert blocks_text([{"type": "image"}], image="[screenshot]") == "[screenshot]"


def test_a_rewrite_is_read_back_from_its_body_or_not_at_all() -> None:
    call = {"role": "function_call", "content": '{"name":"ls","arguments":{"a":1}}'}
    assert rewritten_arguments(call) == {"a": 1}
    output = {"role": "function_call_output", "content": '{"content":"ok"}'}
    assert rewritten_output(output) == "ok"
    assert rewritten_output({"content": '{"content":{"k":[1]}}'}) == '{"k":[1]}'
    assert rewritten_output({"content": '{"id":"1"}'}) is None
    for unreadable in ("not a message", 5, {"content": 5}, {"content": "[1]"}, {"content": "{"}):
        assert rewritten_arguments(unreadable) is None
        assert rewritten_output(unreadable) is None


def test_what_json_cannot_hold_is_malformed_and_says_why() -> None:
    makers: list[Callable[[], str]] = [
        lambda: encode_arguments({"a": "\ud800"}),
        lambda: call_text("ls", "1", {"a": "\ud800"}),
        lambda: call_text("ls", "\ud800", '{"a": 1}'),  # the arguments text as it is
        lambda: output_text("1", "\ud800"),
    ]
    for make in makers:
        with pytest.raises(Malformed) as raised:
            make()
        assert "surrogates not allowed" in str(raised.value)
    with pytest.raises(Malformed, match="keys"):
        encode_arguments({(1, 2): "x"})
    assert call_text("ls", "1", "not json") == '{"name":"ls","id":"1","arguments":"not json"}'
    assert call_text("ls", "1", '{"a": 1}') == '{"name":"ls","id":"1","arguments":{"a": 1}}'


def test_fields_json_cannot_hold_are_counted_as_json_writes_them() -> None:
    fields = {(1, 2): "x", "s": "\ud800"}
    assert with_body_fields('{"id":"1"}', fields) == '{"id":"1","fields":' + json_text(fields) + "}"
    assert with_body_fields('{"id":"1"}', {"name": "ls"}) == '{"id":"1","fields":{"name":"ls"}}'


def _view(*provider: Any) -> View:
    """A view of provider messages each placed as it is."""
    view = View()
    for message in provider:
        view.passthrough(message)
    return view


def test_the_providers_own_messages_are_found_by_identity_from_the_first() -> None:
    a, b, c = ({"role": "user", "content": n} for n in "abc")
    view = _view(a, b, c)
    matched = outcome(view, [a, b, c])
    assert matched.fates == [KEPT, KEPT, KEPT] and matched.unchanged
    notice = {"role": "user", "content": "notice"}
    matched = outcome(view, [notice, a, c, a])  # a again after c: a new message there
    assert matched.fates == [KEPT, None, KEPT]
    assert matched.before == {0: [notice]}
    assert matched.after == [a]


def test_a_mark_names_a_view_message_only_within_the_view() -> None:
    view = View()
    made: dict[str, Any] = {"role": "function_call", "content": "{}"}
    view.add(made, 0)
    view.close()
    assert made[VIEW_KEY] == 0
    rewritten = {**made, "content": '{"x":1}'}
    matched = outcome(view, [rewritten])
    assert matched.fates == [rewritten]
    for forged in (1, -1, "0", True):  # past the view, before it, or not a count
        stranger = {"role": "user", VIEW_KEY: forged}
        matched = outcome(view, [made, stranger])
        assert matched.fates == [KEPT]
        assert matched.after == [stranger]


def test_an_own_message_carrying_a_mark_is_found_by_identity() -> None:
    marked = {"role": "user", "content": "a", VIEW_KEY: 1}  # the agent's own key, forged
    other = {"role": "user", "content": "b"}
    view = _view(marked, other)
    assert outcome(view, [marked, other]).fates == [KEPT, KEPT]
