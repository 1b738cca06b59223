"""The hidden-fact measure against a plain oracle of docs/ECONOMY.md, in two formats.

The oracle knows, for each word of a small vocabulary, the facts it names and
the facts it contains, written out by hand from "What the prompts hide" (a
path contains its tails and the names inside it, ``Line 58`` and ``lines 58``
are both ``line 58``, ``WARNING`` and ``v4096`` are no facts). A conversation
is drawn once and written both in the OpenAI Chat and the Anthropic Messages
format; the measure must give the oracle's counts in both, since the agent
wrote the same things, numbers in its tool arguments included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.simulate.facts import FactTally, RunFacts
from scoutd.simulate.provider import provider_rounds

# word: (the facts it names, the facts it contains besides)
WORDS: dict[str, tuple[set[str], set[str]]] = {
    "src/pkg/load_cfg.py:1234": (
        {"src/pkg/load_cfg.py:1234"},
        {
            "pkg/load_cfg.py:1234",
            "load_cfg.py:1234",
            "src/pkg/load_cfg.py",
            "pkg/load_cfg.py",
            "load_cfg.py",
            "load_cfg",
            "1234",
        },
    ),
    "pkg/load_cfg.py": ({"pkg/load_cfg.py"}, {"load_cfg.py", "load_cfg"}),
    "load_cfg.py": ({"load_cfg.py"}, {"load_cfg"}),
    "load_cfg": ({"load_cfg"}, set()),
    "/testbed/setup.cfg": ({"/testbed/setup.cfg"}, {"testbed/setup.cfg", "setup.cfg"}),
    "setup.cfg": ({"setup.cfg"}, set()),
    "1234": ({"1234"}, set()),
    "4096": ({"4096"}, set()),
    "Line 58": ({"line 58"}, set()),
    "lines 58": ({"line 58"}, set()),
    "ConfigLoader": ({"ConfigLoader"}, set()),
    "README.md": ({"README.md"}, set()),
    "WARNING": (set(), set()),
    "abcdef": (set(), set()),
    "v4096": (set(), set()),
    "the": (set(), set()),
}
OFFSETS = (None, 12, 1234, 4096)  # a number argument of a call (12: too short)
TEXT = st.lists(st.sampled_from(sorted(WORDS)), max_size=5).map(" ".join)


def named(text: str, offset: int | None = None) -> set[str]:
    """The oracle: the facts a text of vocabulary words (and a number argument) names."""
    words = [w for w in WORDS if f" {w} " in f" {text} "]
    facts = set().union(*(WORDS[w][0] for w in words)) if words else set()
    return facts | ({str(offset)} if offset is not None and offset >= 100 else set())


def contained(text: str) -> set[str]:
    """The oracle: the facts a text contains, its own and those inside them."""
    words = [w for w in WORDS if f" {w} " in f" {text} "]
    return named(text).union(*(WORDS[w][1] for w in words))


@dataclass(frozen=True)
class Step:
    """An agent turn: its text, a call (command and number argument), the output, a user word."""

    text: str
    command: str
    offset: int | None
    output: str
    user: str | None


@st.composite
def runs(draw: st.DrawFn) -> tuple[str, list[Step], str]:
    steps = [
        Step(
            draw(TEXT),
            draw(TEXT),
            draw(st.sampled_from(OFFSETS)),
            draw(TEXT),
            draw(st.none() | TEXT.filter(bool)),
        )
        for _ in range(draw(st.integers(1, 7)))
    ]
    return draw(TEXT), steps, draw(TEXT)


def arguments(step: Step) -> dict[str, Any]:
    return {"command": step.command, **({} if step.offset is None else {"offset": step.offset})}


def openai(task: str, steps: list[Step], last: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": task},
    ]
    for number, step in enumerate(steps):
        function = {"name": "bash", "arguments": json.dumps(arguments(step))}
        call = {"id": f"c{number}", "type": "function", "function": function}
        messages.append({"role": "assistant", "content": step.text, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": step.output})
        if step.user is not None:
            messages.append({"role": "user", "content": step.user})
    messages.append({"role": "assistant", "content": last})
    return messages


def anthropic(task: str, steps: list[Step], last: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"You are an agent. {task}"}]
    for number, step in enumerate(steps):
        use = {"type": "tool_use", "id": f"t{number}", "name": "Bash", "input": arguments(step)}
        text = [{"type": "text", "text": step.text}] if step.text else []
        messages.append({"role": "assistant", "content": [*text, use]})
        result = {"type": "tool_result", "tool_use_id": f"t{number}", "content": step.output}
        user = [] if step.user is None else [{"type": "text", "text": step.user}]
        messages.append({"role": "user", "content": [result, *user]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": last}]})
    return messages


def rewrite(messages: list[Any], changed: dict[int, str]) -> list[Any]:
    """``messages`` with the output number ``k`` of ``changed`` replaced by its text."""
    out, number = [], 0
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool":
            message = {**message, "content": changed.get(number, content)}
            number += 1
        elif isinstance(content, list) and content and content[0].get("type") == "tool_result":
            first = {**content[0], "content": changed.get(number, content[0]["content"])}
            message = {**message, "content": [first, *content[1:]]}
            number += 1
        out.append(message)
    return out


def oracle(task: str, steps: list[Step], last: str, changed: dict[int, str]) -> FactTally:
    """The counts of docs/ECONOMY.md, from the steps: every agent turn is a call."""
    tally = FactTally()
    known = contained(f"You are an agent. {task}")  # operator and agent text so far
    outputs: list[str] = []
    for number in range(len(steps) + 1):
        if number < len(steps):
            step = steps[number]
            action = named(step.text) | named(step.command, step.offset)
        else:
            action = named(last)
        if number == len(steps) and not last:
            break  # an empty last message is no action: not a call
        in_outputs = set().union(*(contained(o) for o in outputs))
        needed = (action & in_outputs) - known
        shown = [changed.get(k, o) for k, o in enumerate(outputs)]
        hidden = needed - set().union(*(contained(o) for o in shown))
        tally.calls += 1
        tally.needed += len(needed)
        tally.hidden += len(hidden)
        tally.calls_hiding += bool(hidden)
        if number < len(steps):
            known |= contained(step.text) | contained(step.command) | action
            outputs.append(step.output)
            known |= contained(step.user or "")
    return tally


def measured(messages: list[Any], format_name: str, changed: dict[int, str]) -> FactTally:
    ends = provider_rounds(messages)
    facts = RunFacts(messages, format_name, ends)
    return facts.measure(lambda end: rewrite(messages, changed)[:end])


@settings(max_examples=200, deadline=None)
@given(runs(), st.dictionaries(st.integers(0, 6), TEXT, max_size=4))
def test_both_formats_measure_what_the_oracle_counts(
    run: tuple[str, list[Step], str], changed: dict[int, str]
) -> None:
    task, steps, last = run
    expected = oracle(task, steps, last, changed)
    for format_name, build in (("openai-chat", openai), ("anthropic", anthropic)):
        got = measured(build(task, steps, last), format_name, changed)
        assert (got.calls, got.needed, got.hidden, got.calls_hiding) == (
            expected.calls,
            expected.needed,
            expected.hidden,
            expected.calls_hiding,
        ), format_name


def test_a_line_number_passed_as_a_number_is_needed_in_both_formats() -> None:
    """The agent reads from the line a grep printed: ``offset`` 1234 in either format."""
    steps = [
        Step("", "the", None, "src/pkg/load_cfg.py:1234", None),
        Step("", "load_cfg.py", 1234, "the", None),
    ]
    for format_name, build in (("openai-chat", openai), ("anthropic", anthropic)):
        got = measured(build("the", steps, "the"), format_name, {0: "the"})
        assert (got.calls, got.needed, got.hidden) == (3, 2, 2), format_name
