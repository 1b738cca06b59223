"""Recall's cases that mutation testing found untested (docs/TESTING.md): what a search
finds in a call's arguments, which outputs a prompt shows whole, the first call of a
conversation, the answers' texts and flags, the tool's definitions and a framework's
arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scoutd.recall import (
    NOT_AN_OBJECT,
    RECALL_DESCRIPTION,
    Recalled,
    arguments_of,
    find_output,
    recall_output,
    recall_parameters,
    recall_tool,
)

USER = {"role": "user", "content": "fix the bug"}


def pair(ident: str, name: str, arguments: Any, output: str) -> list[dict[str, Any]]:
    """An OpenAI Chat call and its output; ``arguments`` a JSON value, or a text sent as is."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    function = {"name": name, "arguments": text}
    call = {"id": ident, "type": "function", "function": function}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": ident, "content": output},
    ]


def chat(*pairs: tuple[str, Any, str]) -> list[dict[str, Any]]:
    """A conversation of ``(tool, arguments, output)`` pairs, numbered #1, #2, ..."""
    messages: list[dict[str, Any]] = [USER]
    for number, (name, arguments, output) in enumerate(pairs, start=1):
        messages += pair(f"c{number}", name, arguments, output)
    return messages


@pytest.mark.parametrize(
    ("arguments", "search"),
    [
        ({"note": 'say "hi"\nthere'}, 'say "hi"\nthere'),  # a leaf JSON would escape
        ({"paths": ["x.py", 'a "b" c']}, 'a "b" c'),  # a leaf in a list
        ({"line": 1234}, "1234"),  # no string: the JSON text
        ("grep needle -r", "needle -r"),  # arguments that are no JSON: the text itself
    ],
)
def test_a_search_finds_an_output_by_its_calls_arguments(arguments: Any, search: str) -> None:
    messages = chat(("read", arguments, "nothing of it here"), ("read", {"p": "z"}, "other"))
    assert find_output(messages, search=search) == Recalled("#1\nnothing of it here", 1, True)


def test_the_first_call_of_a_conversation_counts_like_any_other() -> None:
    """Slot 0 of the index: its arguments are searched, and a recall there is passed over."""
    messages = chat(("read", {"path": "src/needle.py"}, "contents"))
    assert find_output(messages, search="needle.py") == Recalled("#1\ncontents", 1, True)
    asked = chat(("recall", {"search": "needle"}, "no tool output ... contains 'needle'"))
    answer = find_output(asked, search="needle")
    assert answer == Recalled(
        "no tool output shortened or removed from the prompt contains 'needle'"
        " (this conversation has 1 tool output, #1)"
    )


ONE, TWO = "needle one", "needle two"


@pytest.mark.parametrize(
    ("shown", "search", "found"),
    [
        # a search answer (first in the prompt) shows its output whole after the #N line
        (("recall", {"search": "needle"}, f"#2\n{TWO}"), "needle", 1),
        (("recall", {"handle": "", "search": "needle"}, f"#2\n{TWO}"), "needle", 1),
        # a handle answer shows the output's own text, even one that starts like #1
        (("recall", {"handle": "#2", "search": "zzz"}, f"#1\n{ONE}"), ONE, 1),
        # another tool's output that reads like a search answer shows nothing else
        (("grep", {"search": "needle"}, f"#2\n{TWO}"), TWO, 2),
        # a search answer without its #N line shows only its own text
        (("recall", {"search": "needle"}, f"note\n{TWO}"), TWO, 2),
    ],
)
def test_a_search_passes_over_exactly_what_the_prompt_shows_whole(
    shown: tuple[str, Any, str], search: str, found: int
) -> None:
    messages = chat(("read", {"p": "a"}, ONE), ("read", {"p": "b"}, TWO), shown)
    visible = [USER, *pair("c3", *shown)]  # the prompt: the older pairs were dropped
    texts = {1: ONE, 2: TWO}
    answer = find_output(messages, search=search, visible=visible)
    assert answer == Recalled(f"#{found}\n{texts[found]}", found, True)


def test_a_search_answer_of_an_empty_output_hides_no_empty_output() -> None:
    messages = chat(("read", {"path": "needle.py"}, ""), ("recall", {"search": "zzz"}, "#1"))
    visible = [USER, *pair("c2", "recall", {"search": "zzz"}, "#1")]
    assert find_output(messages, search="needle.py", visible=visible) == Recalled("#1\n", 1, True)


def test_the_answers_say_what_they_found_and_why_not() -> None:
    messages = chat(("read", {"p": "a"}, "only output"))
    assert find_output(messages, handle="#1") == Recalled("only output", 1, True)
    assert find_output(messages, handle=2) == Recalled(
        "no output #2: this conversation has 1 tool output, #1"
    )
    long = "q" * 100
    assert find_output(messages, search=long).text == (
        f"no tool output shortened or removed from the prompt contains {'q' * 80!r}"
        " (this conversation has 1 tool output, #1)"
    )
    mixed = [*messages, {"type": "function_call", "call_id": "z", "name": "x", "arguments": "{}"}]
    assert find_output(mixed, handle=1).text.startswith(
        "the conversation cannot be read: messages mix formats: message 1 is openai-chat"
    )


def test_the_format_named_is_the_one_read() -> None:
    """OpenAI Chat messages read as Anthropic turns hold no tool output."""
    messages = chat(("read", {"p": "a"}, "only output"))
    said = "no output #1: this conversation has no tool outputs"
    assert find_output(messages, handle=1, format="anthropic") == Recalled(said)
    assert recall_output(messages, 1, format="anthropic") == said


def test_recall_output_is_the_text_of_find_output() -> None:
    messages = chat(("read", {"p": "a"}, ONE), ("read", {"p": "b"}, TWO))
    visible = [USER, *pair("c2", "read", {"p": "b"}, TWO)]
    assert recall_output(messages, search="needle", visible=visible) == f"#1\n{ONE}"
    assert recall_output(messages, search="needle") == f"#2\n{TWO}"


def test_each_format_gets_its_definition_of_the_tool() -> None:
    parameters = recall_parameters()
    assert recall_tool("openai-responses") == {
        "type": "function",
        "name": "recall",
        "description": RECALL_DESCRIPTION,
        "parameters": parameters,
        "strict": False,
    }
    assert recall_tool() == {
        "type": "function",
        "function": {"name": "recall", "description": RECALL_DESCRIPTION, "parameters": parameters},
    }
    assert recall_tool("anthropic") == {
        "name": "recall",
        "description": RECALL_DESCRIPTION,
        "input_schema": parameters,
    }
    with pytest.raises(ValueError, match="no recall tool definition for format 'scout'"):
        recall_tool("scout")


def test_a_frameworks_arguments_are_read_or_refused_by_one_rule() -> None:
    assert arguments_of({"handle": "#3"}) == ("#3", None)
    assert arguments_of({"search": "abc", "handle": None}) == (None, "abc")
    assert arguments_of({}) == (None, None)
    for given in (["#3"], "#3", None, 3):
        assert arguments_of(given) == NOT_AN_OBJECT
    assert arguments_of({"handle": "#3", "b" * 50: 1, "a": 2, "\ud800x": 3}) == (
        f"unknown recall arguments: \\ud800x, a, {'b' * 40} (handle, search)"
    )
    many = {f"k{n}": n for n in range(10)}
    assert arguments_of(many) == (
        "unknown recall arguments: k0, k1, k2, k3, k4, k5, k6, k7 and 2 more (handle, search)"
    )
    nine = {f"k{n}": n for n in range(9)}
    assert arguments_of(nine) == (
        "unknown recall arguments: k0, k1, k2, k3, k4, k5, k6, k7 and 1 more (handle, search)"
    )
    eight = {f"k{n}": n for n in range(8)}
    assert arguments_of(eight) == (
        "unknown recall arguments: k0, k1, k2, k3, k4, k5, k6, k7 (handle, search)"
    )
