"""Recall in process, as a hostile or careless model calls it.

What a model sends gets a text, never an exception, whatever its type or size;
and a search asked again passes over the output an earlier search answer
already shows whole, as it passes over one a handle answer shows.
"""

from __future__ import annotations

import json
from typing import Any

import scoutd
from scoutd.recall import MAX_HANDLE_DIGITS, find_output, parse_handle
from tests.test_recall import RECALL, chat_outputs, chat_run


def test_an_integer_handle_of_any_size_is_a_text_like_the_same_digits_as_a_string() -> None:
    """Python will not write an integer of over 4,300 digits as text: the lookup raised
    ``ValueError`` for such a handle instead of answering it; and an integer past 18
    digits was "no output #..." while the same digits as a string were malformed."""
    messages = chat_run(3, user_every=0)
    huge = 10**5000
    with scoutd.Session(config=RECALL) as session:
        session.prepare_prompt(messages)
        for handle in (huge, -huge, huge + 7):
            text = session.recall(handle)
            assert text.startswith("malformed handle <an integer of ")
            assert len(text) < 200
        for digits in (MAX_HANDLE_DIGITS + 1, 30, 4000):
            number = int("9" * digits)
            assert session.recall(number) == session.recall(str(number)), digits
            assert session.recall(number).startswith("malformed handle '9999")
        widest = 10**MAX_HANDLE_DIGITS - 1
        assert parse_handle(widest) == parse_handle(str(widest)) == widest
        assert session.recall(widest).startswith(f"no output #{widest}: ")
        assert session.recall(2) == chat_outputs(messages)[1]


def test_a_lone_surrogate_is_refused_alike_in_handle_and_search() -> None:
    """JSON's ``"\\ud800"`` gives a lone surrogate, which the daemon's client cannot
    encode (it raised ``UnicodeEncodeError`` there); in process it was a no-match text.
    Every path now answers the same text: no output holds one."""
    messages = chat_run(3, user_every=0)
    for handle, search in ((None, "line\udfff"), ("#\ud800", None), (None, "\ud800" * 5000)):
        answer = find_output(messages, handle, search)
        assert not answer.found
        name = "handle" if handle else "search"
        assert answer.text.startswith(f"{name} holds a lone surrogate")
        answer.text.encode()  # the text itself encodes
    assert find_output(messages, None, "value_2_7 é").text.startswith("no tool output")


def _ask(messages: list[Any], arguments: dict[str, Any], answer: str, n: int) -> None:
    """Append a recall call with ``arguments`` and its ``answer``, as an agent would."""
    ident = f"recall_{n}"
    function = {"name": "recall", "arguments": json.dumps(arguments)}
    call = {"id": ident, "type": "function", "function": function}
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": ident, "content": answer},
    ]


def test_a_search_again_passes_over_the_output_a_search_answer_shows_whole() -> None:
    """A search answer (``#43`` and the output) shows output #43 whole in the next prompt:
    the same search asked again returned #43 again, round after round (each time the
    whole output once more), while after a handle answer it went on to #42."""
    messages = chat_run(80, user_every=0)
    outputs = chat_outputs(messages)
    with scoutd.Session(config=RECALL) as session:
        prompt = session.prepare_prompt(messages)
        found = []
        for n in range(3):
            expected = newest_not_shown_whole(prompt, outputs)
            answer = session.recall(search="of the run")
            assert answer == f"#{expected}\n{outputs[expected - 1]}"
            found.append(expected)
            _ask(messages, {"search": "of the run"}, answer, n)
            prompt = session.prepare_prompt(messages)
        assert len(set(found)) == 3  # never the same output again


def newest_not_shown_whole(prompt: list[Any], outputs: list[str]) -> int:
    """The newest output that ``prompt`` (OpenAI Chat) shows whole neither as its own
    tool message nor in a search answer (``#N`` and the output): every output of
    :func:`chat_run` holds the text searched for."""
    contents = {m.get("content") for m in prompt if m.get("role") == "tool"}
    shown = {
        number
        for number, text in enumerate(outputs, start=1)
        if text in contents or f"#{number}\n{text}" in contents
    }
    return max(number for number in range(1, len(outputs) + 1) if number not in shown)


def test_a_handle_answer_starting_like_a_search_answer_hides_nothing() -> None:
    """Only a search answer's ``#N`` line is read as one: an output recalled by handle
    whose own text starts with ``#7`` and a newline does not hide another output."""
    messages = chat_run(80, user_every=0)
    tools = [m for m in messages if m.get("role") == "tool"]
    tools[0]["content"] = "#7\n" + tools[1]["content"]  # output #1 holds #2's text after "#7"
    with scoutd.Session(config=RECALL) as session:
        session.prepare_prompt(messages)
        answer = session.recall("#1")
        _ask(messages, {"handle": "#1"}, answer, 0)
        prompt = session.prepare_prompt(messages)
        assert tools[1]["content"] not in json.dumps(prompt, ensure_ascii=False)[:-1]
        needle = tools[1]["content"].splitlines()[3]
        assert session.recall(search=needle) == f"#2\n{tools[1]['content']}"
