"""A shortened call is counted at the size it is sent: no prompt passes its window.

The default counts a shortened tool message at a bound (an output's 400 kept
characters, or two arguments of 200, plus about 120 of marker and JSON). A
call's shortening only cuts its long top-level string arguments, so a call
whose arguments nest long strings (an ``edits`` array), are not an object,
hold many medium strings or three long ones, or whose tool name is huge, is
sent longer than that bound, as long as it was whole in some of those cases.

Drawn conversations in the three provider formats hold pairs whose calls are
of such kinds among plain ones. Each is prepared by the default under a
window drawn between the least prompt its configuration can send (the newest
outputs whole, the rest dropped, a notice) and the whole conversation. An
independent oracle bills the prepared prompt (its messages' JSON at 4
characters a token): it must fit the window, and stay valid in its format. A
session, round by round, must send the same prompts as a whole replay.

Before, such a call in the shortened band counted 134 tokens whatever it
sent, and prompts went past their window.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.strategies.rewrites import shortened_call, sized_call
from scoutd.strategies.tool_messages import index_tools
from tests.formats.drawn import SETTINGS
from tests.formats.test_counted_sent import _user
from tests.formats.validity import new_problems
from tests.strategies.test_media_overflow import Oracle

FORMATS = ("openai-chat", "openai-responses", "anthropic")
# Calls the shortening cannot bring under its bound; "plain" ones it can.
KINDS = ("nested", "not an object", "many medium", "three long", "huge name")
# Room, in tokens, for the compaction notice and the per-message JSON the
# estimate does not see, above the least prompt the default can send.
_SLACK = 600
# The share of the window the default fills at most (``compaction_limit_share``,
# 0.75), a little below: what the oracle bills beyond the estimate.
_FILL = 0.7
EXAMPLES = settings(SETTINGS, max_examples=30)


def _arguments(kind: str, n: int, size: int) -> tuple[str, Any]:
    """The tool name and the arguments of a call of ``kind`` (a JSON text when they are
    not an object)."""
    if kind == "nested":
        edits = [{"old": f"{n}a" * (size // 4), "new": f"{n}b" * (size // 4)}]
        return "edit", {"path": f"f{n}", "edits": edits}
    if kind == "not an object":
        return "apply", json.dumps([f"{n} " + "p" * size])
    if kind == "many medium":
        return "write", {f"part{k}": f"{n}.{k} " + "m" * 190 for k in range(size // 190 + 3)}
    if kind == "three long":
        return "replace", {key: f"{n}{key}" + "t" * (size // 3) for key in ("a", "b", "c")}
    if kind == "huge name":
        return f"tool{n}_" + "n" * size, {"path": f"f{n}"}
    return "read", {"path": f"f{n}"}  # plain


def _pair(fmt: str, ident: str, name: str, arguments: Any, output: str) -> list[dict[str, Any]]:
    text = arguments if type(arguments) is str else json.dumps(arguments)
    if fmt == "openai-chat":
        call = {"id": ident, "type": "function", "function": {"name": name, "arguments": text}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": ident, "content": output},
        ]
    if fmt == "openai-responses":
        return [
            {"type": "function_call", "call_id": ident, "name": name, "arguments": text},
            {"type": "function_call_output", "call_id": ident, "output": output},
        ]
    use = {"type": "tool_use", "id": ident, "name": name, "input": arguments}
    result = {"type": "tool_result", "tool_use_id": ident, "content": output}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


@st.composite
def conversations(
    draw: st.DrawFn, fmt: str, kind: str
) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """A user turn and 8 to 30 pairs, about half of them with calls of ``kind``,
    some of another such kind, the rest plain: the head and the pairs."""
    kinds = [k for k in KINDS if fmt != "anthropic" or k != "not an object"]
    pairs: list[list[dict[str, Any]]] = []
    for n in range(draw(st.integers(8, 30))):
        of = draw(st.sampled_from([kind, kind, "plain", *kinds]))
        if fmt == "anthropic" and of == "not an object":
            of = "plain"  # an Anthropic tool_use's input is always an object
        name, arguments = _arguments(of, n, draw(st.integers(600, 12_000)))
        output = f"{n} " + "o" * draw(st.integers(100, 6_000))
        pairs.append(_pair(fmt, f"c{n}", name, arguments, output))
    return [_user(fmt, "start")], pairs


# An Anthropic tool_use's input is always an object.
CASES = [(f, k) for f in FORMATS for k in KINDS if f != "anthropic" or k != "not an object"]


@pytest.mark.parametrize(("fmt", "kind"), CASES)
def test_no_prompt_passes_its_window_with_calls_sent_long(fmt: str, kind: str) -> None:
    reached: Counter[str] = Counter()
    oracle = Oracle()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        head, pairs = data.draw(conversations(fmt, kind))
        messages = [*head, *(m for pair in pairs for m in pair)]
        newest = data.draw(st.integers(1, 3))
        least = [*head, *(m for pair in pairs[-newest:] for m in pair)]
        floor, total = oracle.bill(least) + _SLACK, oracle.bill(messages)
        low = int(floor / _FILL) + 1
        window = data.draw(st.integers(low, max(low, total - 1)))  # below the whole
        config = {"context_window": window, "cost_full_tool_outputs": newest}
        prepared = scoutd.prepare(messages, format=fmt, config=config)
        billed = oracle.bill(prepared.messages)
        reached["examples"] += 1
        if total > window and prepared.messages != messages:
            reached["compacted"] += 1  # the window needed a compaction, which took place
        report = prepared.report[0]
        if report.calls_truncated or report.outputs_truncated:
            reached["band shortened"] += 1  # a shortened band was sent, not only drops
        assert billed <= window, (billed, window, total, floor)
        assert new_problems(fmt, messages, prepared.messages) == {}  # still valid

    check()
    assert reached["compacted"] >= 25, reached
    assert reached["band shortened"] >= 20, reached


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_session_sends_what_a_whole_replay_sends(fmt: str) -> None:
    """Round by round, a session plans as the whole replay does with such calls."""
    reached: Counter[str] = Counter()

    @settings(SETTINGS, max_examples=10)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        head, pairs = data.draw(conversations(fmt, "nested"))
        window = data.draw(st.integers(8_000, 40_000))
        config = {"context_window": window, "cost_full_tool_outputs": 2}
        session = scoutd.Session(config=config, format=fmt)
        messages = list(head)
        for pair in pairs:
            messages += pair
            got = session.prepare(messages)
            whole = scoutd.prepare(messages, format=fmt, config=config)
            assert got.messages == whole.messages
            reached["rounds"] += 1
            if got.messages != messages:
                reached["compacted"] += 1

    check()
    assert reached["compacted"] >= 30, reached


_ARGUMENTS = st.dictionaries(
    st.text(max_size=8),
    st.one_of(
        st.text(min_size=190, max_size=600),
        st.text(max_size=20),
        st.integers(),
        st.lists(st.text(min_size=100, max_size=300)),
    ),
    max_size=5,
)


def test_a_call_is_measured_as_long_as_its_rewrite() -> None:
    """The text the estimate measures has the rewrite's length (its digests aside)."""
    reached: Counter[str] = Counter()

    @settings(SETTINGS, max_examples=200)
    @given(_ARGUMENTS)
    def check(arguments: dict[str, Any]) -> None:
        body = json.dumps({"name": "t", "arguments": arguments, "id": "c"}, ensure_ascii=False)
        index = index_tools([{"role": "function_call", "content": body}])
        new, sized = shortened_call(index.bodies[0], body), sized_call(index.bodies[0], body)
        assert (new is None) == (sized is None)
        if new is not None and sized is not None:
            assert len(new) == len(sized)
            reached["rewritten"] += 1

    check()
    assert reached["rewritten"] >= 30, reached
