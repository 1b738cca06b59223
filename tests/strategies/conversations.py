"""Builders of synthetic conversations for the strategy tests."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import strategies as st

from scoutd.strategies.tool_messages import CALL, OUTPUT
from scoutd.testing import conversation


def call(name: str, arguments: Any, ident: Any) -> dict[str, Any]:
    body = {"name": name, "arguments": arguments, "id": ident}
    return {"role": CALL, "content": msgspec.json.encode(body).decode()}


def output(name: str, content: Any, ident: Any) -> dict[str, Any]:
    body = {"name": name, "content": content, "id": ident}
    return {"role": OUTPUT, "content": msgspec.json.encode(body).decode()}


def agent_run(pairs: int, *, repeat_every: int = 0, output_size: int = 600) -> list[dict[str, Any]]:
    """The strategy tests' preset of :func:`scoutd.testing.conversation`.

    A system prompt, a task, then ``pairs`` call/output pairs and no user
    turns, so pair ``n``'s call is message ``2 + 2 * n``; with ``repeat_every``
    > 0 every that-many-th call repeats the first call's arguments exactly.
    """
    return conversation(pairs, output_size=output_size, user_every=0, repeat_every=repeat_every)


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


# --- conversations as real agent runs produce them ------------------------------------

# Ids from a small pool, so that duplicates happen; 1, 1.0 and true are three ids.
_ids_pool = st.sampled_from(["a", "b", "c", "1", 1, 1.0, True, 2, None, ["l"]])
# 200 and 201: just at and past the argument limit
_long_text = (st.integers(min_value=150, max_value=320) | st.sampled_from([200, 201])).map(
    lambda n: "q" * n
)
_wide_arguments = st.one_of(
    st.none(),
    st.sampled_from(["text", 7, [1, 2], True]),  # not an object
    st.fixed_dictionaries({"p": st.sampled_from([1, 1.0, True, "1"])}),
    st.dictionaries(
        st.sampled_from(["p", "q", "r"]),
        st.one_of(_long_text, st.text(max_size=5), st.integers(0, 3), st.none()),
        max_size=3,
    ),
)
_wide_contents = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=300, max_value=700).map(lambda n: "o" * n),
    st.sampled_from([None, 42, ["a", "b"], {"k": "v" * 450}, True, [0.5] * 120]),
)
# Contents of non-tool messages: strings (some with a lone surrogate) and non-strings.
_message_contents = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\ud800 lone", "tail \udfff", None, 5, ["part"], {"type": "text"}]),
)
_odd_roles = st.sampled_from([1, None, ["user"], {"r": 1}, 2.5, True])


def _tool(role: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": msgspec.json.encode(body).decode()}


@st.composite
def agent_conversations(draw: st.DrawFn, max_steps: int = 50) -> list[Any]:
    """Conversations as agents really write them, and worse.

    Parallel calls answered in any order, outputs that arrive after later calls
    or never, duplicate and non-string ids, long arguments (calls get
    truncated), ``None`` and non-object arguments, non-string contents, lone
    surrogates, non-string roles and malformed tool messages.
    """
    messages: list[Any] = [{"role": "system", "content": "sys"}]
    pending: list[tuple[str, Any]] = []  # (name, id) of calls not answered yet
    for _ in range(draw(st.integers(min_value=0, max_value=max_steps))):
        kind = draw(st.integers(min_value=0, max_value=11))
        if kind == 0:
            messages.append({"role": "user", "content": draw(_message_contents)})
        elif kind == 1:
            messages.append({"role": draw(_odd_roles), "content": draw(_message_contents)})
        elif kind == 2:
            messages.append(draw(_malformed))
        elif kind in (3, 4, 5):  # one or more calls in a row (parallel calls)
            for _ in range(draw(st.integers(min_value=1, max_value=3))):
                name, ident = draw(_names), draw(_ids_pool)
                body = {"name": name, "arguments": draw(_wide_arguments), "id": ident}
                if draw(st.integers(0, 9)) == 0:
                    del body["arguments"]
                messages.append(_tool(CALL, body))
                pending.append((name, ident))
        elif kind in (6, 7, 8, 9) and pending:  # answer any waiting call, in any order
            name, ident = pending.pop(draw(st.integers(0, len(pending) - 1)))
            body = {"name": name, "content": draw(_wide_contents), "id": ident}
            if draw(st.integers(0, 9)) == 0:
                del body["content"]
            messages.append(_tool(OUTPUT, body))
        elif kind == 10 and pending:  # a call that will never be answered
            pending.pop(draw(st.integers(0, len(pending) - 1)))
        else:  # an output nobody asked for
            body = {"name": "x", "content": draw(_wide_contents), "id": draw(_ids_pool)}
            messages.append(_tool(OUTPUT, body))
    return messages
