"""No input makes the library raise anything but ValueError (ConfigError included).

Hypothesis builds conversations the way a hostile or careless caller would:
messages that are not objects, tool messages without ``content`` or with JSON
nested past the decoder's depth, contents of every JSON type, and per-call
overrides with extreme numbers, wrong types and unknown keys
(docs/RELIABILITY.md, "Hostile requests").
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd import ConfigError, InvalidMessages, UnknownStrategy, prepare
from scoutd.config import Config, PromptConfig
from scoutd.engine.incremental import SessionPrompt
from scoutd.testing import conversation
from tests.formats.conversations import anthropic, chat, responses

STRATEGIES = [
    None,
    "none",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools_epoch_increment,inbox",
    "no_such_strategy",
    "",
    ",,",
]
EXTREMES = [
    0,
    1,
    -1,
    2**31,
    2**63 - 1,
    2**63,
    -(2**63),
    2**200,
    0.5,
    1e308,
    float("inf"),
    float("nan"),
    # past the bounds (docs/RELIABILITY.md, "What a client may configure")
    10**400,
    5e-324,
    -0.0,
    1e7,
    2**63,
    "builtins:len",  # as a tokenizer: code, which no override may name
    "n" * (64 * 1024 + 1),
]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


tool_json = st.one_of(
    st.builds(
        lambda ident, name, args, content: msgspec.json.encode(
            {"id": ident, "name": name, "arguments": args, "content": content}
        ).decode(),
        json_scalars,
        json_scalars,
        json_values,
        json_values,
    ),
    st.integers(1, 20_000).map(deep),
    st.integers(1, 20_000).map(lambda d: '{"arguments":' + deep(d) + "}"),
    st.integers(1, 20_000).map(lambda d: '{"id":"a","content":' + deep(d) + "}"),
    # numbers no double holds, where the index reads nothing and where it keeps the raw text
    st.builds(
        lambda number, field, size: (
            '{"id":"a","name":"bash","arguments":{},'
            + (
                f'"z":{number},"content":"{"y" * size}"}}'
                if field
                else f'"content":["{"y" * size}",{number}]}}'
            )
        ),
        st.sampled_from(["1e400", "-1e999", "1e-400"]),
        st.booleans(),
        st.integers(0, 600),
    ),
    st.text(max_size=40),
)
tool_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["function_call", "function_call_output"])},
    optional={"content": tool_json | json_values, "name": json_values},
)
any_message = st.one_of(
    tool_message,
    st.fixed_dictionaries({"role": json_values}, optional={"content": json_values}),
    json_values,
)
overrides = st.dictionaries(
    st.sampled_from([*PromptConfig.__struct_fields__, "no_such_key"]),
    st.sampled_from(EXTREMES) | json_values,
    max_size=4,
)
# Every strategy compacts the conversations below and the epochs grow, so that the
# extremes reach the arithmetic that uses them (an override may change these too).
GROWING = {
    "epoch_tool_call_threshold": 3,
    "epoch_full_tool_calls": 1,
    "epoch_compacted_tool_calls": 2,
    "epoch_size": 2,
    "epoch_increment_epochs_per_increase": 1,
    "full_tool_outputs": 1,
    "max_tool_calls": 3,
    "max_tool_chars": 100,
    "context_window": 2_000,
    "cost_full_tool_outputs": 1,
    "cost_compacted_tool_calls": 1,
    "cache_control": True,
}
# The largest and smallest values the bounds allow, and the extremes past them.
edge_overrides = st.dictionaries(
    st.sampled_from(PromptConfig.__struct_fields__),
    st.sampled_from([*EXTREMES, 1e6, 0.01, 0.999999, 2**63 - 1, 0, 1, 0.0]),
    max_size=2,
)
long_conversations = st.one_of(
    st.integers(4, 40).map(lambda n: conversation(n, output_size=300)),
    st.integers(4, 20).map(chat),
    st.integers(4, 20).map(anthropic),
    st.integers(4, 20).map(responses),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(any_message, max_size=12),
    strategies=st.sampled_from(STRATEGIES),
    config=overrides,
)
def test_prepare_raises_only_value_errors(
    messages: list[Any], strategies: str | None, config: dict[str, Any]
) -> None:
    before = msgspec.json.encode(messages)
    try:
        prepared = prepare(messages, strategies, config=config)
    except ValueError as exc:
        # scoutd's own errors, which the daemon answers as bad input: a decoder's
        # error (msgspec's are ValueErrors too) would be an internal error there
        assert isinstance(exc, scoutd.ScoutdError), repr(exc)
    else:
        assert isinstance(prepared.messages, list)
        if strategies == "none":
            assert msgspec.json.encode(prepared.messages) == before
    assert msgspec.json.encode(messages) == before  # the caller's list is never modified


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.lists(any_message, max_size=8),
    then=st.lists(any_message, max_size=8),
    strategies=st.sampled_from(STRATEGIES),
)
def test_a_failed_session_round_changes_nothing(
    first: list[Any], then: list[Any], strategies: str | None
) -> None:
    """Incremental state after any round equals a fresh state over the same messages."""
    state = SessionPrompt()
    state.extend(first)
    before = list(state.messages)
    state.extend(then)
    try:
        state.prepare(strategies, Config())
    except ValueError:
        state.truncate(len(before))
        assert state.messages == before
    fresh = SessionPrompt()
    fresh.extend(state.messages)
    assert state.chars == fresh.chars
    assert state.index.indices == fresh.index.indices


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(conversation(30), "shorten_tools_epoch_increment", {"tokenizer": "builtins:len"})
@example(conversation(30), None, {"tokenizer": "builtins:len"})
@example(
    conversation(30),
    "shorten_tools_epoch_increment",
    {"epoch_increment_compacted_growth_ratio": 1e308},
)
@example(conversation(30), None, {"chars_per_token": 5e-324})
@example(conversation(30), None, {"context_window": 10**400})
@example(
    [*anthropic(6), {"role": "assistant", "content": [{"type": ["text"], "text": "x"}]}], "none", {}
)
@given(
    messages=long_conversations,
    strategies=st.sampled_from(STRATEGIES[:6]),
    config=edge_overrides,
)
def test_extreme_overrides_on_compacted_conversations_raise_only_config_errors(
    messages: list[Any], strategies: str | None, config: dict[str, Any]
) -> None:
    """Long enough to be compacted in every format, with the Anthropic cache hint:
    an override is refused by name (ConfigError, UnknownStrategy) or served, never
    an OverflowError, a TypeError or an import of what it names."""
    try:
        prepared = prepare(messages, strategies, config={**GROWING, **config})
    except UnknownStrategy as exc:  # a strategy name only selects, never imports
        assert config.get("prompt_strategies") == exc.name, exc
        event("refused: unknown strategy")
    except ConfigError as exc:
        assert any(key in str(exc) for key in config), exc
        event("refused")
    else:
        assert isinstance(prepared.messages, list)
        assert "tokenizer" not in config  # an override naming code is never served
        event("served, compacted" if prepared.report[0].notice else "served")


def _deep_anthropic(levels: int) -> list[dict[str, Any]]:
    """A tool result nested ``levels`` deep: past what the interpreter walks."""
    block: dict[str, Any] = {"type": "text", "text": "x"}
    for _ in range(levels):
        block = {"type": "tool_result", "tool_use_id": "t1", "content": [block]}
    return [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}],
        },
        {"role": "user", "content": [block]},
    ]


def test_messages_nested_past_the_recursion_limit_are_refused_as_invalid() -> None:
    """A RecursionError in reading or encoding is bad input, as the daemon answers it:
    ``InvalidMessages``, and a session then starts over on the next round."""
    deep = _deep_anthropic(5_000)
    with pytest.raises(InvalidMessages, match="nested too deeply"):
        prepare(deep, format="anthropic")
    sane = _deep_anthropic(3)
    with scoutd.Session(format="anthropic") as session:
        with pytest.raises(InvalidMessages, match="nested too deeply"):
            session.prepare(deep)
        assert session.prepare(sane).messages == prepare(sane, format="anthropic").messages


def _huge_numbers(where: str, pairs: int = 12) -> list[dict[str, Any]]:
    """Long tool outputs whose bodies hold numbers no double can hold: in a field
    scoutd does not read (``z``), or inside a non-string content."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(pairs):
        call = f'{{"name":"bash","id":"c{i}","arguments":{{"command":"ls"}}}}'
        if where == "field":
            output = f'{{"id":"c{i}","content":"{"y" * 1000}","z":1e400}}'
        else:
            output = f'{{"id":"c{i}","content":["{"y" * 1000}",-1e999]}}'
        messages += [
            {"role": "function_call", "content": call},
            {"role": "function_call_output", "content": output},
        ]
    return [*messages, {"role": "user", "content": "go on"}]  # none in the newest turn


@pytest.mark.parametrize("where", ["field", "content"])
@pytest.mark.parametrize(
    "strategy",
    [
        "shorten_tools",
        "shorten_tools_cost_aware",
        "shorten_tools_epoch",
        "shorten_tools_epoch_increment",
    ],
)
def test_numbers_no_double_holds_are_read_not_refused(where: str, strategy: str) -> None:
    """A body the index accepted is read whole again when it is shortened and when it
    is recalled: such a number reads as infinity (Python's own JSON reader, the
    oracle, agrees) and is written as null; nothing raises."""
    messages = _huge_numbers(where)
    config = {**GROWING, "recall": True}
    prepared = prepare(messages, strategy, config=config)
    shortened = [
        json.loads(m["content"])
        for m in prepared.messages
        if m["role"] == "function_call_output" and m not in messages
    ]
    assert shortened, "the conversation was compacted"
    for body in shortened:
        if where == "field":
            assert body["z"] is None and "Truncated" in body["content"]
        else:
            assert "Truncated" in body["content"] and "null" in body["content"]
    original = json.loads(messages[2]["content"])["content"]
    with scoutd.Session(strategies=strategy, format="scout", config=config) as session:
        session.prepare(messages)
        compact = json.dumps([original[0], None], separators=(",", ":"))
        assert session.recall("#1") == (original if where == "field" else compact)


class _Opaque:
    """An object JSON has no form for, with a stable ``repr``."""

    def __repr__(self) -> str:
        return "<opaque>"


# Values an in-process caller may put deep inside a message, which no JSON text holds.
NOT_JSON = {
    "none key": {"k": {None: 1}},
    "tuple key": [{"type": "text", "text": "a"}, {"type": "x", "v": {(1, 2): 3}}],
    "object": {"k": _Opaque()},
    "lone surrogate": {"k": "\ud800"},
}


def _not_json(fmt: str, value: Any) -> list[dict[str, Any]]:
    """A conversation of ``fmt`` with ``value`` as a tool output's (or a user's) content."""
    if fmt == "anthropic":
        messages = anthropic(8)
        messages[2]["content"][0]["content"] = value
    elif fmt == "openai-chat":
        messages = chat(8)
        messages[1]["content"] = value
    elif fmt == "openai-responses":
        messages = responses(8)
        messages[0]["content"] = value
    else:
        messages = conversation(16, output_size=900)
        messages[0]["content"] = value
    return messages


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses", "scout"])
@pytest.mark.parametrize("value", NOT_JSON, ids=list(NOT_JSON))
@pytest.mark.parametrize("strategy", [None, "none", "shorten_tools", "shorten_tools_epoch"])
def test_values_json_cannot_hold_are_served_in_process(
    fmt: str, value: str, strategy: str | None
) -> None:
    """A key that is not a string, an object or a lone surrogate deep in a message
    (only an in-process caller can send one): the prompt is served, the message
    passes through, and the session round answers as the whole prepare does;
    never a ``TypeError`` or ``UnicodeEncodeError`` out of an encoder."""
    messages = _not_json(fmt, NOT_JSON[value])
    before = repr(messages)
    config = {**GROWING, "context_window": 3000, "cache_control": False}
    prepared = prepare(messages, strategy, config=config, format=fmt)
    assert repr(messages) == before
    if strategy == "none":
        assert all(a is b for a, b in zip(prepared.messages, messages, strict=True))
    with scoutd.Session(strategies=strategy, config=config, format=fmt) as session:
        session.prepare(messages[:3])
        assert repr(session.prepare(messages).messages) == repr(prepared.messages)
    assert repr(messages) == before
