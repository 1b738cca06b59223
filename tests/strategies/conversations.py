"""Builders of synthetic conversations for the strategy tests."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import strategies as st

from scoutd.strategies.tool_messages import CALL, OUTPUT


def call(name: str, arguments: Any, ident: Any) -> dict[str, Any]:
    body = {"name": name, "arguments": arguments, "id": ident}
    return {"role": CALL, "content": msgspec.json.encode(body).decode()}


def output(name: str, content: Any, ident: Any) -> dict[str, Any]:
    body = {"name": name, "content": content, "id": ident}
    return {"role": OUTPUT, "content": msgspec.json.encode(body).decode()}


def agent_run(pairs: int, *, repeat_every: int = 0, output_size: int = 600) -> list[dict[str, Any]]:
    """A system prompt, a user task, then ``pairs`` call/output pairs.

    With ``repeat_every`` > 0, every that-many-th call repeats the first call exactly.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for n in range(pairs):
        repeat = repeat_every and n and n % repeat_every == 0
        arguments = {"path": "/src/a.py"} if repeat else {"path": f"/src/{n}.py", "q": "x" * 250}
        messages.append(call("read_file", arguments, f"call_{n}"))
        messages.append(output("read_file", f"{n}:" + "y" * output_size, f"call_{n}"))
    return messages


# Small vocabularies so that repeats, collisions and every band happen often.
_names = st.sampled_from(["read", "grep", "run"])
_arguments = st.one_of(
    st.sampled_from([{"p": 1}, {"p": 1.0}, {"p": True}, {"q": "a", "p": 1}, {}, None]),
    st.dictionaries(st.sampled_from(["p", "q"]), st.text(max_size=260), max_size=2),
    st.just("not an object"),
)
_contents = st.one_of(
    st.text(max_size=30),
    st.integers(max_value=10, min_value=0).map(lambda n: "z" * (n * 100)),
    st.sampled_from([None, 42, ["a", "b"], {"k": "v" * 500}, True]),
)
_malformed = st.sampled_from(
    [
        {"role": CALL, "content": None},
        {"role": OUTPUT, "content": None},
        {"role": CALL, "content": "not json"},
        {"role": OUTPUT, "content": ""},
        {"role": OUTPUT, "content": "[1, 2]"},
        {"role": CALL, "content": '"text"'},
        {"role": OUTPUT, "content": 17},
        {"content": "no role"},
        {"role": "user"},
        "not a mapping",
        None,
    ]
)


@st.composite
def conversations(draw: st.DrawFn, max_pairs: int = 40) -> list[Any]:
    """Conversations with pairs, parallel batches, orphans, pending calls and junk."""
    messages: list[Any] = [{"role": "system", "content": "sys"}]
    ids = 0
    for _ in range(draw(st.integers(min_value=0, max_value=max_pairs))):
        kind = draw(st.integers(min_value=0, max_value=9))
        if kind == 0:
            messages.append({"role": "user", "content": draw(st.text(max_size=10))})
        elif kind == 1:
            messages.append(draw(_malformed))
        elif kind == 2:  # a parallel batch of two calls before their outputs
            first, second = f"b{ids}", f"b{ids + 1}"
            ids += 2
            messages += [
                call(draw(_names), draw(_arguments), first),
                call(draw(_names), draw(_arguments), second),
                output("x", draw(_contents), first),
                output("x", draw(_contents), second),
            ]
        elif kind == 3:  # an orphan output
            messages.append(output("x", draw(_contents), f"orphan{ids}"))
            ids += 1
        else:
            ident = f"c{ids}"
            ids += 1
            messages.append(call(draw(_names), draw(_arguments), ident))
            messages.append(output("x", draw(_contents), ident))
    if draw(st.booleans()):  # a newer user turn: older tool traffic loses its protection
        messages.append({"role": "user", "content": "next"})
    if draw(st.booleans()):  # a pending call at the end
        messages.append(call(draw(_names), draw(_arguments), "pending"))
    return messages
