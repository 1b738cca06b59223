"""The Responses adapter: its view, what it counts as malformed, and the way back.

Expected views and item lists are written by hand from the shapes of
docs/FORMATS.md: a call and its output become view messages only as a pair;
the items of a model turn (reasoning, assistant text, calls) go together when
every call of the turn is dropped; new text goes before the turn it precedes.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from scoutd import Config, prepare
from scoutd.formats import openai_responses as adapter
from scoutd.formats.view import PASSTHROUGH, TEXT_PART, VIEW_KEY

from .conversations import epoch_window, responses
from .validity import new_problems

# The epoch strategies with one pair shortened behind the newest (see the tests).
TIGHT = epoch_window(1)


def _call(ident: str, arguments: str = '{"cmd":"ls"}') -> dict[str, Any]:
    return {"type": "function_call", "call_id": ident, "name": "bash", "arguments": arguments}


def _output(ident: str, output: Any = "out") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": ident, "output": output}


USER = {"type": "message", "role": "user", "content": "go"}


def test_the_view_of_calls_and_their_outputs() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    items = [
        USER,
        reasoning,
        _call("a"),
        _call("b", "not json"),
        _output("b", [{"type": "input_text", "text": "x"}, {"type": "input_image"}]),
        _output("a"),
    ]
    view = adapter.view(items, True)
    assert [{k: v for k, v in m.items() if k != VIEW_KEY} for m in view.messages] == [
        USER,
        {"role": "assistant", "content": ""},  # the reasoning item's place
        {"role": "function_call", "content": '{"name":"bash","id":"a","arguments":{"cmd":"ls"}}'},
        # sent back with its turn: a remark that counts the item, never shown, with the
        # turn's newest pair (the last to be dropped: it is sent while any call is)
        {"role": "assistant", "content": "", "scoutd.media": [reasoning]},
        {"role": "function_call", "content": '{"name":"bash","id":"b","arguments":"not json"}'},
        {
            "role": "function_call_output",
            "content": '{"id":"b","content":"x\\n[image]"}',
            "scoutd.media": [{"type": "input_image"}],  # counted while whole
        },
        {"role": "function_call_output", "content": '{"id":"a","content":"out"}'},
    ]
    assert view.messages[0] is USER and view.messages[3]["scoutd.media"][0] is reasoning
    assert view.refs == [PASSTHROUGH, PASSTHROUGH, 0, TEXT_PART, 0, 0, 0]
    assert view.starts == [0, 1, 2, 3, 5, 6, 7]  # call b's view: the remark and the call
    assert view.malformed == 0


def test_read_only_items_and_an_empty_output_are_a_pair() -> None:
    items = [USER, MappingProxyType(_call("a")), MappingProxyType(_output("a", ""))]
    view = adapter.view(items, True)
    assert view.malformed == 0 and view.refs == [PASSTHROUGH, 0, 0]
    assert view.messages[2]["content"] == '{"id":"a","content":""}'


@pytest.mark.parametrize(
    ("items", "malformed"),
    [
        pytest.param([USER, _output("a")], 1, id="an output without its call"),
        pytest.param([USER, _output("a"), _call("a")], 2, id="the output first"),
        pytest.param([USER, _call("a"), _output("a"), _output("a")], 3, id="two outputs"),
        pytest.param([USER, _call("a"), _call("a"), _output("a")], 3, id="two calls"),
        pytest.param([USER, _call("a")], 0, id="a call still waiting"),
        pytest.param([USER, _call("a"), _call("a")], 2, id="two calls still waiting"),
        pytest.param(
            [USER, {**_call("a"), "arguments": {"cmd": "ls"}}, _output("a")],
            2,
            id="arguments not a string",
        ),
        pytest.param(
            [USER, {**_call("a"), "call_id": 7}, _output("a")], 2, id="an id not a string"
        ),
        pytest.param(
            [USER, _call("a"), _output("a", 7)], 1, id="an output of no known shape: still waiting"
        ),
        pytest.param([USER, _call("a"), _output("a", "\ud800")], 2, id="text JSON cannot hold"),
        pytest.param([USER, "junk", {"type": 5}], 0, id="odd items pass through"),
        pytest.param(
            [USER, {**_call("a"), "arguments": 1}, {**_call("b"), "arguments": 2}],
            2,
            id="two calls without text arguments",
        ),
        pytest.param([USER, _output("a", 7), _output("b", 8)], 2, id="two outputs of no shape"),
        pytest.param(
            [USER, {**_call("x"), "arguments": 1}, _call("a"), _output("a", "\ud800")],
            3,
            id="text JSON cannot hold, after a call without text arguments",
        ),
    ],
)
def test_what_the_view_counts_as_malformed(items: list[Any], malformed: int) -> None:
    view = adapter.view(items, True)
    assert view.malformed == malformed
    paired = [ref for ref in view.refs if ref != PASSTHROUGH]
    assert not paired  # nothing of these is used as a pair


def test_a_turn_whose_calls_all_go_takes_its_reasoning_and_text_along() -> None:
    items = responses(5)
    out = prepare(items, "shorten_tools_epoch", config=TIGHT).messages
    calls = [i["call_id"] for i in out if i.get("type") == "function_call"]
    assert calls == ["call_2", "call_3", "call_4"]
    assert [i["id"] for i in out if i.get("type") == "reasoning"] == ["rs_2", "rs_3", "rs_4"]
    texts = [i["content"][0]["text"] for i in out if i.get("role") == "assistant"]
    assert texts == ["step 2", "step 3", "step 4"]
    notice = out[1]  # after the task, before the first kept turn's reasoning
    assert notice["type"] == "message" and notice["role"] == "user"
    assert VIEW_KEY not in notice and out[2]["id"] == "rs_2"
    shortened = next(i for i in out if i.get("type") == "function_call_output")
    assert shortened["output"].startswith("Truncated") and shortened["call_id"] == "call_2"
    assert not new_problems("openai-responses", items, out)


DROPPED: set[str] = set()


def dropping_plugin(messages: list[Any], format: str) -> list[Any]:
    """A plugin strategy that drops the pairs of the call ids in ``DROPPED``."""
    return [m for m in messages if not any(f'"{d}"' in str(m.get("content")) for d in DROPPED)]


@pytest.mark.parametrize("dropped", [{"call_x"}, {"call_1"}, {"call_x", "call_1"}])
def test_a_turn_goes_with_its_reasoning_only_when_all_its_calls_go(dropped: set[str]) -> None:
    items = responses(3)
    at = items.index(next(i for i in items if i.get("call_id") == "call_1"))
    items.insert(at + 1, _call("call_x"))  # the second turn calls twice
    items.insert(at + 3, _output("call_x"))
    DROPPED.clear()
    DROPPED.update(dropped)
    config = Config(plugins={"drop": "tests.formats.test_openai_responses:dropping_plugin"})
    prepared = prepare(items, "drop", config=config)
    out = prepared.messages
    calls = [i["call_id"] for i in out if i.get("type") == "function_call"]
    assert calls == [c for c in ("call_0", "call_1", "call_x", "call_2") if c not in dropped]
    whole_turn = len(dropped) == 2
    assert any(i.get("id") == "rs_1" for i in out) is not whole_turn
    assert any(i.get("role") == "assistant" and "step 1" in str(i) for i in out) is not whole_turn
    assert prepared.report[-1].narration_dropped == whole_turn
    assert not new_problems("openai-responses", items, out)


def _drop(items: list[Any], *idents: str) -> list[Any]:
    DROPPED.clear()
    DROPPED.update(idents)
    config = Config(plugins={"drop": "tests.formats.test_openai_responses:dropping_plugin"})
    out = prepare(items, "drop", config=config).messages
    assert not new_problems("openai-responses", items, out)
    return out


@pytest.mark.parametrize(
    ("passed", "answers"),
    [
        pytest.param([_call("dup"), _call("dup")], [_output("dup")], id="one id twice"),
        pytest.param([_call("late")], [], id="a call never answered"),
        pytest.param([{**_call("obj"), "arguments": {}}], [_output("obj")], id="arguments no text"),
    ],
)
def test_a_call_passed_through_keeps_its_turn(
    passed: list[dict[str, Any]], answers: list[dict[str, Any]]
) -> None:
    turn = [{"type": "reasoning", "id": "rs_9", "summary": []}, _call("call_9"), *passed]
    items = [*responses(2), *turn, _output("call_9"), *answers]
    out = _drop(items, "call_9")
    assert any(i.get("id") == "rs_9" for i in out)  # the turn still has a call
    for item in [*passed, *answers]:
        assert any(item is i for i in out)  # passed through, never taken along


def test_a_reasoning_item_opens_a_turn_of_its_own() -> None:
    second = {"type": "reasoning", "id": "rs_b", "summary": []}
    items = [USER, {"type": "reasoning", "id": "rs_a", "summary": []}, _call("a"), second]
    items += [_call("b"), _output("a"), _output("b"), {**USER, "content": "next"}]
    out = _drop(items, "b")
    assert [i.get("id") for i in out if i.get("type") == "reasoning"] == ["rs_a"]
    out = _drop(items, "a")
    assert [i.get("id") for i in out if i.get("type") == "reasoning"] == ["rs_b"]


def test_a_shortened_output_of_parts_stays_parts() -> None:
    items = responses(4)
    items[4]["output"] = [{"type": "input_text", "text": "y" * 900}]
    out = prepare(
        items,
        "shorten_tools_epoch",
        config=epoch_window(5),
    ).messages
    first = next(i for i in out if i.get("type") == "function_call_output")
    assert first["call_id"] == "call_0"
    assert first["output"][0]["type"] == "input_text"
    assert first["output"][0]["text"].startswith("Truncated")
    assert set(first) == set(items[4])


ADDED = {"role": "user", "content": "a note from the operator"}


def noting_plugin(messages: list[Any], format: str) -> list[Any]:
    """A plugin strategy that puts a message of its own before the last one."""
    return [*messages[:-1], ADDED, messages[-1]]


def test_a_message_a_plugin_put_in_becomes_an_input_message() -> None:
    config = Config(plugins={"note": "tests.formats.test_openai_responses:noting_plugin"})
    items = responses(2)
    out = prepare(items, "note", config=config).messages
    assert out[-2] == {"type": "message", **ADDED}
    assert out[:-2] == items[:-1] and out[-1] is items[-1]


@pytest.mark.parametrize(
    ("added", "expected"),
    [
        (
            {"role": "user", "content": "x", VIEW_KEY: 1},
            {"type": "message", "role": "user", "content": "x"},
        ),
        (
            {"type": "message", "role": "user", "content": "x"},
            {"type": "message", "role": "user", "content": "x"},
        ),
        ({"content": "x"}, {"content": "x"}),
        ("text", "text"),
    ],
)
def test_a_message_a_strategy_added_as_an_item(added: Any, expected: Any) -> None:
    assert adapter.new_message(added) == expected


def test_arguments_text_survives_a_round_trip_unchanged() -> None:
    arguments = json.dumps({"cmd": "ls", "deep": {"a": [1, 2]}})
    items = [USER, _call("a", arguments), _output("a")]
    out = prepare(items, "shorten_tools").messages
    assert out[1] is items[1] and out[1]["arguments"] is arguments


REASONING = {"type": "reasoning", "id": "rs", "summary": []}
SAID = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}


@pytest.mark.parametrize(
    ("items", "position", "starts"),
    [
        pytest.param([USER, _call("a")], 1, True, id="after the user"),
        pytest.param([REASONING, _call("a")], 1, False, id="after its reasoning"),
        pytest.param([SAID, _call("a")], 1, False, id="after its text"),
        pytest.param([_call("a"), _call("b")], 1, False, id="after another call"),
        pytest.param([_call("a"), REASONING], 1, True, id="reasoning opens a turn"),
        pytest.param([_call("a"), _output("a"), _call("b")], 2, True, id="after an output"),
        pytest.param([_call("a"), USER, _call("b")], 2, True, id="two items back"),
        pytest.param([_call("a"), USER], 1, True, id="the user"),
        pytest.param([_call("a"), MappingProxyType(SAID)], 1, False, id="read-only text"),
        pytest.param([USER, "junk"], 1, True, id="junk"),
    ],
)
def test_which_items_join_the_turn_before_them(
    items: list[Any], position: int, starts: bool
) -> None:
    assert adapter.starts_turn(items, position) is starts


@pytest.mark.parametrize(
    ("opening", "kept"),
    [
        pytest.param([SAID], [], id="text first"),
        pytest.param([REASONING, MappingProxyType(SAID)], [], id="reasoning and read-only text"),
        pytest.param([SAID, REASONING], [SAID], id="text, then a turn of its own"),
    ],
)
def test_a_turn_at_the_very_start_goes_whole(opening: list[Any], kept: list[Any]) -> None:
    items = [*opening, _call("a"), _output("a"), USER, _call("b"), _output("b")]
    out = _drop(items, "a")
    assert out == [*kept, USER, _call("b"), _output("b")]
