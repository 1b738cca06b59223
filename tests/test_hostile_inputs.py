"""No input makes the library raise anything but ValueError (ConfigError included).

Hypothesis builds conversations the way a hostile or careless caller would:
messages that are not objects, tool messages without ``content`` or with JSON
nested past the decoder's depth, contents of every JSON type, and per-call
overrides with extreme numbers, wrong types and unknown keys
(docs/RELIABILITY.md, "Hostile requests").
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoutd import prepare
from scoutd.config import Config, PromptConfig
from scoutd.incremental import SessionPrompt

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
    except ValueError:
        pass
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
