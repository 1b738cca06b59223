"""Anthropic and Responses views reuse the texts of the previous view, never stale.

The same reuse as the OpenAI Chat view (tests/formats/test_view_reuse.py), by
the shared :class:`scoutd.formats.texts.Texts`: an output (and a Responses
call, whose arguments are a string) with the very same strings gets the same
text object; an Anthropic call, whose ``input`` is an object that may have
changed in place, is encoded every time and handed back as the earlier text
object only when equal. Every view and prepare after an edit in place
answers what a first one of a fresh copy answers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from scoutd import PromptConfig, prepare
from scoutd.formats import adapter
from scoutd.formats.view import View
from scoutd.strategies.tool_messages import ToolBody
from scoutd.testing.derive import to_anthropic, to_responses

from .conversations import chat
from .test_view_reuse import KEPT, check_read_afresh

# Every pair kept, all but the newest output shortened: the answer shows every text.
SHORT = PromptConfig(max_tool_calls=100, full_tool_outputs=1, max_tool_chars=10)
CONVERT = {"anthropic": to_anthropic, "openai-responses": to_responses}
Edit = Callable[[list[dict[str, Any]]], None]


def _conversation(fmt: str, pairs: int, plain: bool) -> list[dict[str, Any]]:
    """:func:`chat` in ``fmt``; ``plain``: calls without text or reasoning beside them."""
    messages = chat(pairs, parallel=2 if not plain and pairs % 2 else 1)
    if plain:
        for message in messages:
            message.pop("reasoning_content", None)
            if message["role"] == "assistant":
                message["content"] = None
    return CONVERT[fmt](messages)


def _view(fmt: str, messages: list[dict[str, Any]]) -> View:
    found = adapter(fmt)
    assert found is not None
    return found.view(messages, True, KEPT)


def _tool_texts(view: View) -> list[str]:
    return [m["content"] for m in view.messages if m.get("role", "").startswith("function_call")]


@pytest.mark.parametrize("plain", [True, False])
@pytest.mark.parametrize("fmt", CONVERT)
def test_the_same_messages_get_the_same_text_objects(fmt: str, plain: bool) -> None:
    messages = _conversation(fmt, 4, plain)
    KEPT.forget()
    first = _tool_texts(_view(fmt, messages))
    second = _tool_texts(_view(fmt, messages))
    assert len(first) >= 8 and first == second
    assert all(a is b for a, b in zip(first, second, strict=True))
    third = _tool_texts(_view(fmt, messages))  # the second view kept what it reused
    assert all(a is b for a, b in zip(first, third, strict=True))
    KEPT.forget()
    third = _tool_texts(_view(fmt, messages))
    assert third == first and not any(a is b for a, b in zip(first, third, strict=True))


def _anthropic_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks, in order."""
    return [
        block
        for message in messages
        if message["role"] == "user"
        for block in message["content"]
        if block["type"] == "tool_result"
    ]


def _anthropic_output(messages: list[dict[str, Any]]) -> None:
    _anthropic_results(messages)[0]["content"] = "a new output"


def _anthropic_input(messages: list[dict[str, Any]]) -> None:
    turns = [m for m in messages if m["role"] == "assistant"]
    use = next(b for b in turns[0]["content"] if b["type"] == "tool_use")
    use["input"]["cmd"] = "pwd"  # the same dict, changed in place


def _anthropic_name(messages: list[dict[str, Any]]) -> None:
    turns = [m for m in messages if m["role"] == "assistant"]
    next(b for b in turns[1]["content"] if b["type"] == "tool_use")["name"] = "grep"


def _anthropic_ids(messages: list[dict[str, Any]]) -> None:
    turns = [m for m in messages if m["role"] == "assistant"]
    use = next(b for b in turns[0]["content"] if b["type"] == "tool_use")
    use["id"] = _anthropic_results(messages)[0]["tool_use_id"] = "renamed"


def _responses_item(messages: list[dict[str, Any]], kind: str, number: int = 0) -> dict[str, Any]:
    return [m for m in messages if m.get("type") == kind][number]


def _responses_output(messages: list[dict[str, Any]]) -> None:
    _responses_item(messages, "function_call_output")["output"] = "a new output"


def _responses_arguments(messages: list[dict[str, Any]]) -> None:
    _responses_item(messages, "function_call")["arguments"] = '{"cmd": "pwd"}'


def _responses_name(messages: list[dict[str, Any]]) -> None:
    _responses_item(messages, "function_call", 1)["name"] = "grep"


def _responses_ids(messages: list[dict[str, Any]]) -> None:
    _responses_item(messages, "function_call")["call_id"] = "renamed"
    _responses_item(messages, "function_call_output")["call_id"] = "renamed"


EDITS: dict[str, tuple[str, Edit]] = {
    "anthropic output": ("anthropic", _anthropic_output),
    "anthropic input in place": ("anthropic", _anthropic_input),
    "anthropic name": ("anthropic", _anthropic_name),
    "anthropic ids": ("anthropic", _anthropic_ids),
    "responses output": ("openai-responses", _responses_output),
    "responses arguments": ("openai-responses", _responses_arguments),
    "responses name": ("openai-responses", _responses_name),
    "responses ids": ("openai-responses", _responses_ids),
}


@pytest.mark.parametrize("plain", [True, False])
@pytest.mark.parametrize("edit", EDITS)
def test_a_message_edited_in_place_is_read_afresh(edit: str, plain: bool) -> None:
    fmt, change = EDITS[edit]
    check_read_afresh(_conversation(fmt, 5, plain), change, lambda m, mark: _view(fmt, m))


@pytest.mark.parametrize("plain", [True, False])
@pytest.mark.parametrize("edit", EDITS)
def test_a_prepare_after_an_edit_in_place_answers_what_a_fresh_one_does(
    edit: str, plain: bool
) -> None:
    fmt, change = EDITS[edit]
    messages = _conversation(fmt, 5, plain)
    KEPT.forget()
    # the texts are now kept (a copy: kept messages are the very objects edited below)
    first = copy.deepcopy(prepare(messages, "shorten_tools", config=SHORT, texts=KEPT).messages)
    change(messages)
    got = prepare(messages, "shorten_tools", config=SHORT, texts=KEPT).messages
    KEPT.forget()
    assert (
        got == prepare(copy.deepcopy(messages), "shorten_tools", config=SHORT, texts=KEPT).messages
    )
    assert got != first


def _bodies_handed_over(view: View) -> int:
    """Every body handed over is that of its text; how many of the view's texts have one."""
    for key, (text, body) in view.bodies.items():
        assert key == id(text) and body == msgspec.json.decode(text, type=ToolBody)
    return sum(id(text) in view.bodies for text in _tool_texts(view))


@pytest.mark.parametrize("plain", [True, False])
@pytest.mark.parametrize("fmt", CONVERT)
def test_what_a_prepare_parsed_is_handed_to_the_next(fmt: str, plain: bool) -> None:
    messages = _conversation(fmt, 4, plain)
    KEPT.forget()
    count = len(_tool_texts(_view(fmt, messages)))
    assert _bodies_handed_over(_view(fmt, messages)) == 0  # no prepare parsed them yet
    prepare(messages, "shorten_tools", config=SHORT, texts=KEPT)
    assert _bodies_handed_over(_view(fmt, messages)) == count  # calls and outputs alike
    assert _bodies_handed_over(_view(fmt, messages)) == 0  # no prepare in between
