"""The Anthropic adapter's way back: which blocks and turns a compacted prompt keeps.

Each case states the expected turns by hand (docs/FORMATS.md): a turn keeps
the calls that stay, a turn left with nothing but blank text goes, turns the
agent sent side by side stay apart and the same objects, and new text joins
the user turn before it as a text block.
"""

from __future__ import annotations

import itertools
import json
from types import MappingProxyType
from typing import Any

import pytest

from scoutd import Config, prepare
from scoutd.formats import anthropic as adapter
from scoutd.formats.view import PASSTHROUGH, TEXT_PART, VIEW_KEY, blocks_text
from scoutd.strategies.inbox import write_notice

from .conversations import anthropic, epoch_window
from .validity import new_problems

# The newest pair whole, the two before it shortened, the rest dropped.
KEEP_THREE = epoch_window(2)
# Everything but the two newest pairs dropped.
KEEP_TWO = epoch_window(0)


def _ids(messages: list[dict[str, Any]], kind: str, key: str) -> list[str]:
    return [
        block[key]
        for message in messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == kind
    ]


def test_a_turn_keeps_the_calls_that_stay_and_drops_the_others() -> None:
    messages = anthropic(5)
    extra = {"type": "tool_use", "id": "toolu_x", "name": "bash", "input": {"cmd": "pwd"}}
    messages[3]["content"].append(extra)  # the second turn calls twice
    messages[4]["content"].append({"type": "tool_result", "tool_use_id": "toolu_x", "content": "/"})
    out = prepare(messages, "shorten_tools_epoch", config=KEEP_THREE).messages
    assert _ids(out, "tool_use", "id") == ["toolu_x", "toolu_2", "toolu_3", "toolu_4"]
    assert _ids(out, "tool_result", "tool_use_id") == ["toolu_x", "toolu_2", "toolu_3", "toolu_4"]
    turn = next(m for m in out if m["role"] == "assistant")
    assert [b["type"] for b in turn["content"]] == ["thinking", "text", "tool_use"]
    assert turn["content"][0] is messages[3]["content"][0]  # thinking kept as it was
    assert not new_problems("anthropic", messages, out)


def test_turns_sent_side_by_side_stay_apart_and_the_same_objects() -> None:
    first = {"role": "user", "content": [{"type": "text", "text": "context"}]}
    messages = [first, *anthropic(6)]  # two user turns in a row, as the agent sent them
    out = prepare(messages, "shorten_tools_epoch", config=KEEP_THREE).messages
    assert out[0] is first  # not merged with the task after it (which takes the notice)
    assert out[1]["role"] == "user" and out[1]["content"][0]["text"] == "fix the bug"
    assert out[-1] is messages[-1] and out[-2] is messages[-2]


def test_new_text_joins_the_users_text_turn_as_a_block() -> None:
    messages = anthropic(6)
    out = prepare(messages, "shorten_tools_epoch", config=KEEP_TWO).messages
    assert _ids(out, "tool_use", "id") == ["toolu_4", "toolu_5"]
    task, notice = out[0]["content"]  # the task, a string, became a text block
    assert task == {"type": "text", "text": "fix the bug"}
    assert notice["type"] == "text" and notice["text"].strip()
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant", "user"]


@pytest.mark.parametrize("blank", ["", "   \n", None])
def test_a_result_turn_left_with_blank_text_goes(blank: str | None) -> None:
    messages = anthropic(6)
    text: dict[str, Any] = {"type": "text"}
    if blank is not None:
        text["text"] = blank
    messages[2]["content"].append(text)  # beside the first result, which is dropped
    out = prepare(messages, "shorten_tools_epoch", config=KEEP_THREE).messages
    assert not any(text is b for m in out if isinstance(m["content"], list) for b in m["content"])
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(out))
    assert not new_problems("anthropic", messages, out)


def test_a_result_turn_keeps_the_users_words_beside_a_dropped_result() -> None:
    messages = anthropic(6)
    words = {"type": "text", "text": "also check the logs"}
    messages[2]["content"].append(words)
    out = prepare(messages, "shorten_tools_epoch", config=KEEP_THREE).messages
    assert sum(words is b for m in out if isinstance(m["content"], list) for b in m["content"]) == 1
    assert not new_problems("anthropic", messages, out)


def dropping_plugin(messages: list[Any], format: str) -> list[Any]:
    """A plugin strategy that drops the call ``toolu_x`` and its result, wherever they are."""
    return [m for m in messages if "toolu_x" not in str(m.get("content"))]


@pytest.mark.parametrize("where", [0, 1])
def test_a_call_a_plugin_dropped_goes_from_its_turn(where: int) -> None:
    config = Config(plugins={"drop_x": "tests.formats.test_anthropic:dropping_plugin"})
    messages = anthropic(3)
    extra = {"type": "tool_use", "id": "toolu_x", "name": "bash", "input": {"cmd": "pwd"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_x", "content": "/"}
    uses, results = messages[1]["content"], messages[2]["content"]
    uses.insert(len(uses) - 1 + where, extra)  # before or after the turn's own call
    results.insert(where, result)
    out = prepare(messages, "drop_x", config=config).messages
    assert _ids(out, "tool_use", "id") == ["toolu_0", "toolu_1", "toolu_2"]
    assert _ids(out, "tool_result", "tool_use_id") == ["toolu_0", "toolu_1", "toolu_2"]
    assert not new_problems("anthropic", messages, out)


REPLACED = {"role": "user", "content": "the task, restated"}


def replacing_plugin(messages: list[Any], format: str) -> list[Any]:
    """A plugin strategy that replaces the first message with one of its own."""
    return [REPLACED, *messages[1:]]


def test_a_message_a_plugin_put_in_comes_back_as_a_turn() -> None:
    config = Config(plugins={"restate": "tests.formats.test_anthropic:replacing_plugin"})
    messages = anthropic(3)
    out = prepare(messages, "restate", config=config).messages
    assert out[0] == {"role": "user", "content": [{"type": "text", "text": "the task, restated"}]}
    assert all(a is b for a, b in zip(out[1:], messages[1:], strict=True))


@pytest.mark.parametrize(
    ("added", "expected"),
    [
        (
            {"role": "user", "content": "note", VIEW_KEY: 3},
            {"role": "user", "content": [{"type": "text", "text": "note"}]},
        ),
        (
            {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
        ),
        (
            {"role": "system", "content": "  "},
            {"role": "user", "content": [{"type": "text", "text": "(notice)"}]},
        ),
        ({"content": 7}, {"role": "user", "content": [{"type": "text", "text": "(notice)"}]}),
        ("not a message", {"role": "user", "content": [{"type": "text", "text": "(notice)"}]}),
    ],
)
def test_a_message_a_strategy_added_becomes_a_turn(added: Any, expected: Any) -> None:
    assert adapter.new_message(added) == expected


def _use(ident: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": "bash", "input": arguments}


def _result(ident: str, content: Any = "out") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": ident, "content": content}


def _call_text(ident: str, arguments: str) -> str:
    return f'{{"name":"bash","id":"{ident}","arguments":{arguments}}}'


def test_the_view_of_a_turn_and_its_results() -> None:
    messages = [
        {"role": "user", "content": "the task"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "Let me look."},
                _use("a", cmd="ls"),
                {"type": "text", "text": "And count."},
                _use("b", cmd="wc"),
            ],
        },
        {
            "role": "user",
            "content": [
                _result("b", [{"type": "text", "text": "3"}, {"type": "image", "source": {}}]),
                _result("a"),
                {"type": "text", "text": "also"},
                {"type": "text", "text": "this"},
            ],
        },
    ]
    view = adapter.view(messages, True)
    assert [{k: v for k, v in m.items() if k != VIEW_KEY} for m in view.messages] == [
        messages[0],
        {"role": "function_call", "content": _call_text("a", '{"cmd":"ls"}')},
        {
            "role": "assistant",
            "content": "Let me look.\nAnd count.",
            # sent back with its turn: counted, not shown, with the turn's newest pair
            # (the last to be dropped: the turn is sent while any of its calls is)
            "scoutd.media": [{"type": "thinking", "thinking": "hm", "signature": "s"}],
        },
        {"role": "function_call", "content": _call_text("b", '{"cmd":"wc"}')},
        {
            "role": "function_call_output",
            "content": '{"id":"b","content":"3\\n[image]"}',
            "scoutd.media": [{"type": "image", "source": {}}],  # counted while whole
        },
        {"role": "function_call_output", "content": '{"id":"a","content":"out"}'},
        {"role": "user", "content": "also\nthis"},
    ]
    assert view.messages[0] is messages[0]
    assert view.refs == [PASSTHROUGH, 2, TEXT_PART, 4, 0, 1, TEXT_PART]
    assert view.starts == [0, 1, 4, 7]
    assert view.malformed == 0


class _LooksLikeText(str):
    """A string subclass: equal to a block type, but no string as JSON knows it."""


def _alone(turn: dict[str, Any], results: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "go"}, turn, results]


@pytest.mark.parametrize(
    ("messages", "malformed", "viewed"),
    [
        pytest.param(
            _alone({"role": "assistant", "content": [_use("a")]}, {"role": "user", "content": []}),
            1,
            False,
            id="results turn without results",
        ),
        pytest.param(
            [{"role": "user", "content": [_result("a")]}], 1, False, id="results without a call"
        ),
        pytest.param(
            [{"role": "assistant", "content": [{"type": 5}]}], 0, False, id="odd block, no call"
        ),
        pytest.param(
            [{"role": "user", "content": [{"type": 5}, _result("a")]}],
            1,
            False,
            id="odd block beside results",
        ),
        pytest.param(
            [{"role": "user", "content": ["text", {"type": "text", "text": "x"}]}],
            0,
            False,
            id="odd block, no results",
        ),
        pytest.param(
            _alone(
                {"role": "assistant", "content": [_use("a"), "junk"]},
                {"role": "user", "content": [_result("a")]},
            ),
            2,
            False,
            id="odd block beside a call",
        ),
        pytest.param(
            _alone(
                {"role": "assistant", "content": [{**_use("a"), "input": "ls"}]},
                {"role": "user", "content": [_result("a")]},
            ),
            2,
            False,
            id="input not an object",
        ),
        pytest.param(
            [{"role": "user", "content": "go"}, {"role": "assistant", "content": [_use("a")]}],
            0,
            False,
            id="a call still waiting",
        ),
        pytest.param(
            _alone(
                {"role": "assistant", "content": [_use("a"), _use("a")]},
                {"role": "user", "content": [_result("a"), _result("a")]},
            ),
            2,
            False,
            id="one id twice, answered twice",
        ),
        pytest.param(
            [{"role": "assistant", "content": [{**_use("a"), "type": _LooksLikeText("tool_use")}]}],
            1,
            False,
            id="a type that only looks like text",
        ),
        pytest.param(
            [{"role": "assistant", "content": None}, {"role": "user", "content": 5}],
            0,
            False,
            id="turns without blocks",
        ),
        pytest.param(
            [
                {"role": "user", "content": [_result("x")]},
                {"role": "assistant", "content": [_use("a")]},
                {"role": "user", "content": [_result("a", "\ud800")]},
            ],
            3,
            False,
            id="text JSON cannot hold, after a result without a call",
        ),
        pytest.param(
            _alone(
                {"role": "assistant", "content": [MappingProxyType(_use("a", cmd="ls"))]},
                {"role": "user", "content": [MappingProxyType(_result("a"))]},
            ),
            0,
            True,
            id="read-only mappings",
        ),
        pytest.param(
            _alone(
                {"role": "assistant", "content": [{**_use("a"), "input": MappingProxyType({})}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
            ),
            0,
            True,
            id="read-only input, result without content",
        ),
    ],
)
def test_what_the_view_takes_and_what_it_counts_as_malformed(
    messages: list[Any], malformed: int, viewed: bool
) -> None:
    view = adapter.view(messages, True)
    assert view.malformed == malformed
    assert any(ref != PASSTHROUGH for ref in view.refs) is viewed
    for at, ref in enumerate(view.refs):  # what passes through is the message itself,
        given = messages[view.owner(at)]  # or a stand-in for a turn holding calls
        if ref == PASSTHROUGH and view.messages[at] is not given:
            assert given["role"] == "assistant" and "tool_use" in str(given["content"])
            assert view.messages[at] == {"role": "passthrough", "content": given["content"]}
    if viewed:
        assert view.messages[1]["content"].startswith('{"name":"bash","id":"a","arguments":{')
        output = view.messages[2]["content"]
        assert output in ('{"id":"a","content":"out"}', '{"id":"a","content":""}')


def test_a_result_that_is_neither_text_nor_blocks_is_shown_as_json() -> None:
    messages = _alone(
        {"role": "assistant", "content": [_use("a")]},
        {"role": "user", "content": [_result("a", [{"type": "chart", "points": [1, 2]}])]},
    )
    view = adapter.view(messages, True)
    text = '[{"type":"chart","points":[1,2]}]'
    assert view.messages[2]["content"] == '{"id":"a","content":' + json.dumps(text) + "}"


@pytest.mark.parametrize("parts", [False, True])
def test_a_shortened_result_keeps_the_shape_of_its_content(parts: bool) -> None:
    messages = anthropic(4)
    first = messages[2]["content"][0]
    if parts:
        first["content"] = [{"type": "text", "text": "y" * 900}]
    out = prepare(messages, "shorten_tools_epoch", config=KEEP_THREE).messages
    result = out[2]["content"][0]
    assert result["tool_use_id"] == "toolu_0" and result is not first
    assert set(result) == set(first)  # is_error and the rest kept
    if parts:
        assert result["content"] == [{"type": "text", "text": result["content"][0]["text"]}]
        assert result["content"][0]["text"].startswith("Truncated (900)")
    else:
        assert type(result["content"]) is str and result["content"].startswith("Truncated")


def test_notices_after_the_last_turn_join_it_as_text(tmp_path: Any) -> None:
    save_file = str(tmp_path / "agent.chat")
    write_notice(save_file, "Please wrap up.")
    write_notice(save_file, "And write the summary.")
    messages = anthropic(2)
    prepared = prepare(messages, "inbox", save_file=save_file)
    out = prepared.messages
    assert prepared.report[-1].inbox_delivered == 2
    assert out[:-1] == messages[:-1] and out[-1] is not messages[-1]
    last = out[-1]
    assert last["role"] == "user" and last["content"][0] is messages[-1]["content"][0]
    added = last["content"][1:]
    assert [b["type"] for b in added] == ["text", "text"]
    assert "Please wrap up." in added[0]["text"] and "And write the summary." in added[1]["text"]


def test_a_read_only_turn_is_read_like_a_dict() -> None:
    turn = MappingProxyType({"role": "assistant", "content": [_use("a", cmd="ls")]})
    results = MappingProxyType({"role": "user", "content": [_result("a")]})
    view = adapter.view([{"role": "user", "content": "go"}, turn, results], True)
    assert view.malformed == 0 and view.refs == [PASSTHROUGH, 0, 0]


PDF = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x" * 200},
    "title": "report.pdf",
}
SEARCH = {
    "type": "search_result",
    "source": "https://example.com/guide",
    "title": "Guide",
    "content": [{"type": "text", "text": "alpha " * 150}, {"type": "text", "text": "omega"}],
}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ([{"type": "text", "text": "a"}, PDF], "a\n[document]"),
        ([SEARCH], "alpha " * 150 + "\nomega"),
        (
            [{"type": "text", "text": "a"}, SEARCH, PDF],
            "a\n" + "alpha " * 150 + "\nomega\n[document]",
        ),
        ([{**SEARCH, "content": [{"type": "image"}]}], None),  # not its text blocks: unread
        ([{**SEARCH, "content": "plain"}], None),
    ],
)
def test_the_text_of_documents_and_search_results(content: list[Any], expected: Any) -> None:
    """A document is a placeholder; a search result is its text blocks, nothing else."""
    assert blocks_text(content) == expected


@pytest.mark.parametrize("block", [PDF, SEARCH], ids=["document", "search_result"])
def test_a_shortened_result_with_a_document_or_search_result_is_text(block: Any) -> None:
    """Only the text is truncated: no raw block, no base64 data, in what is sent."""
    messages = anthropic(4, output=[{"type": "text", "text": "y" * 900}, block])
    prepared = prepare(messages, "shorten_tools_epoch", config=KEEP_THREE)
    assert not new_problems("anthropic", messages, prepared.messages)
    results = [b for m in prepared.messages for b in m["content"] if b.get("type") == "tool_result"]
    shortened = [r for r in results if r["content"][0]["text"].startswith("Truncated")]
    assert len(shortened) == 2 and all(len(r["content"]) == 1 for r in shortened)
    for result in shortened:
        text = result["content"][0]["text"]
        assert "JVBER" not in text and '"type"' not in text and "example.com" not in text
        # the length of the text read: "y" * 900, a line break, the block's text
        assert text.startswith("Truncated (911): " if block is PDF else "Truncated (1807): ")
        assert len(text) < 500
    if block is PDF:  # the placeholder is at the end, kept by the truncation
        assert all(r["content"][0]["text"].endswith("\n[document]") for r in shortened)
    assert results[-1]["content"][1] is block  # the newest is verbatim
