"""Bodies handed over between prepares (``index_tools(given=...)``, docs/PERFORMANCE.md).

A provider format's view hands the strategies the bodies the previous prepare
parsed, keyed by the identity of their texts. Whatever was handed over, the
index must hold exactly what parsing every text gives, take a handed-over body
as it is (not parse its text again), and record every usable text and body for
the next prepare. The reference here is the standard ``json`` module.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import msgspec
from hypothesis import event, given, settings
from hypothesis import strategies as st

from scoutd.strategies.tool_messages import ToolBody, index_tools

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
_usable = st.builds(
    lambda name, ident, arguments, content: json.dumps(
        {"name": name, "id": ident, "arguments": arguments, "content": content}
    ),
    st.text(max_size=4),
    st.text(min_size=1, max_size=3),
    _json_values,
    _json_values,
)
_unusable = st.sampled_from(["not json", "[1, 2]", '"text"', "{", "7", None, 3])
# usable about as often as not (a union would weigh each of its branches alike)
_contents = st.tuples(st.booleans(), _usable, _unusable).map(lambda t: t[1] if t[0] else t[2])


def _message(role: str, content: Any) -> dict[str, Any]:
    return {"role": role, "content": content}


def _expected(content: Any) -> dict[str, Any] | None:
    """What a tool message's content holds, or None when it is unusable (the reference)."""
    if type(content) is not str:
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    return value if type(value) is dict else None


def _as_plain(body: ToolBody) -> dict[str, Any]:
    plain = {"name": body.name, "id": body.id, "arguments": body.arguments}
    if not isinstance(body.content, msgspec.UnsetType):
        plain["content"] = json.loads(bytes(body.content))
    return plain


CASES = st.tuples(
    st.lists(_contents, min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
)


@settings(max_examples=150, deadline=None)
@given(case=CASES)
def test_bodies_handed_over_index_as_parsing_gives_and_are_recorded(
    case: tuple[list[Any], list[bool], list[bool]],
) -> None:
    event(check(*case))


def test_the_generator_reaches_every_case() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(case=CASES)
    def collect(case: tuple[list[Any], list[bool], list[bool]]) -> None:
        seen[check(*case)] += 1

    collect()
    rare = {case: seen[case] for case in REACHED if seen[case] < 5}
    assert not rare, f"cases reached in fewer than 5 of 200 examples: {rare}"


REACHED = ("none handed over", "all handed over", "some handed over", "some handed, some unusable")


def check(contents: list[Any], hand: list[bool], calls: list[bool]) -> str:
    """Prepare an index with some bodies handed over, check it; the case it was."""
    # plain messages in between, so that a message's index is not its tool number
    messages: list[dict[str, Any]] = []
    tool_at: list[int] = []
    for content, is_call in zip(contents, calls, strict=False):
        messages.append(_message("user", "between"))
        tool_at.append(len(messages))
        messages.append(_message("function_call" if is_call else "function_call_output", content))
    usable = [i for i, content in enumerate(contents) if _expected(content) is not None]
    handed = [i for i in usable if hand[i]]
    # handed-over bodies are fresh objects: taking them, not parsing again, is visible
    handing = {
        id(contents[i]): (contents[i], msgspec.json.decode(contents[i], type=ToolBody))
        for i in handed
    }
    recorded: dict[int, tuple[str, ToolBody]] = {}
    index = index_tools(messages, given=(dict(handing), recorded))

    assert index.indices == [tool_at[i] for i in usable]
    assert [_as_plain(body) for body in index.bodies] == [_expected(contents[i]) for i in usable]
    for i, body in zip(usable, index.bodies, strict=True):
        if i in handed:
            assert body is handing[id(contents[i])][1]
    assert set(recorded) == {id(contents[i]) for i in usable}
    for i, body in zip(usable, index.bodies, strict=True):
        text, kept = recorded[id(contents[i])]
        assert text is contents[i] and kept is body
    if not handed:
        return "none handed over"
    if handed == usable:
        return "all handed over" if len(usable) == len(contents) else "all usable handed over"
    return "some handed over" if len(usable) == len(contents) else "some handed, some unusable"


def test_without_bodies_handed_over_nothing_is_recorded() -> None:
    text = json.dumps({"name": "read", "id": "a", "arguments": {}})
    recorded: dict[int, tuple[str, ToolBody]] = {}
    index_tools([_message("function_call", text)])
    assert recorded == {}
    index_tools([_message("function_call", text)], given=({}, recorded))
    assert set(recorded) == {id(text)}  # handed over: what it parsed is recorded
