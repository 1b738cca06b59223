"""Each adapter through the strategies: lossless, valid, notice placement, narration."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from scoutd import Config, PromptConfig, prepare
from scoutd.testing.derive import to_anthropic, to_responses

from .conversations import LONG, anthropic, chat, epoch_window, responses
from .validity import new_problems

# Compact everything but the newest pair: threshold 2, one whole, one truncated.
TIGHT = epoch_window(1)
# The newest pair whole, the ten before it shortened: every call of a short run kept.
LONG_WINDOW = epoch_window(10)
BUILDERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "openai-chat": chat,
    "anthropic": anthropic,
    "openai-responses": responses,
}


@pytest.mark.parametrize("fmt", BUILDERS)
def test_none_returns_the_very_same_objects(fmt: str) -> None:
    messages = BUILDERS[fmt](5)
    prepared = prepare(messages, "none")
    assert prepared.format == fmt
    assert all(a is b for a, b in zip(prepared.messages, messages, strict=True))
    assert len(prepared.messages) == len(messages)
    assert prepared.stable_prefix == len(messages)


@pytest.mark.parametrize("fmt", BUILDERS)
def test_compaction_is_valid_and_keeps_the_input(fmt: str) -> None:
    messages = BUILDERS[fmt](6)
    snapshot = copy.deepcopy(messages)
    prepared = prepare(messages, "shorten_tools_epoch", config=TIGHT)
    assert messages == snapshot
    assert not new_problems(fmt, messages, prepared.messages)
    report = prepared.report[-1]
    assert report.format == fmt
    assert report.outputs_dropped > 0 and report.outputs_truncated == 1
    assert report.narration_dropped == report.calls_dropped
    assert len(json.dumps(prepared.messages)) < len(json.dumps(messages))
    # kept messages are the input's own objects
    originals = {id(m) for m in messages}
    assert prepared.messages[-1] is messages[-1]
    assert sum(id(m) in originals for m in prepared.messages) >= 3


def test_chat_notice_goes_before_the_assistant_message_of_the_first_kept_call() -> None:
    messages = chat(6)
    out = prepare(messages, "shorten_tools_epoch", config=TIGHT).messages
    notice = next(i for i, m in enumerate(out) if m["role"] == "user" and i > 1)
    assert out[notice + 1]["role"] == "assistant" and out[notice + 1]["tool_calls"]
    assert out[notice - 1]["role"] in ("user", "tool")


def test_chat_a_group_dropped_whole_counts_its_narration() -> None:
    messages = chat(3)  # the view: system, user, then text, call and output three times
    notice = {"role": "user", "content": "notice"}

    def drop_the_first_group(view: list[Any]) -> list[Any]:
        return [*view[:2], notice, *view[5:]]

    prepared = prepare(messages, drop_the_first_group)
    assert prepared.messages == [*messages[:2], notice, *messages[4:]]
    returned = prepared.messages[:2] + prepared.messages[3:]
    assert all(a is b for a, b in zip(returned, [*messages[:2], *messages[4:]], strict=True))
    assert prepared.report[-1].narration_dropped == 1


def test_chat_parallel_calls_keep_their_pairs() -> None:
    messages = chat(6, parallel=3)
    out = prepare(
        messages,
        "shorten_tools",
        config={"max_tool_calls": 4, "full_tool_outputs": 1, "max_tool_chars": 10},
    ).messages
    assert not new_problems("openai-chat", messages, out)
    for i, message in enumerate(out):
        if message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            answers = [m["tool_call_id"] for m in out[i + 1 : i + 1 + len(ids)]]
            assert answers == ids


def test_chat_truncates_string_values_inside_arguments() -> None:
    messages = chat(6)
    messages[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"cmd": "y" * 500, "n": 3})
    out = prepare(messages, "shorten_tools_epoch", config=LONG_WINDOW).messages
    first = next(m for m in out if m.get("tool_calls"))
    arguments = json.loads(first["tool_calls"][0]["function"]["arguments"])
    assert arguments["n"] == 3 and arguments["cmd"].startswith("Truncated (500)")
    assert first["reasoning_content"] == "thinking 0"  # unknown keys survive


def _call_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Anthropic ``tool_use`` blocks or the Responses ``function_call`` items."""
    parts = [p for m in messages for p in (m["content"] if m.get("role") else [m])]
    return [p for p in parts if isinstance(p, dict) and p["type"] in ("tool_use", "function_call")]


@pytest.mark.parametrize("fmt", ["anthropic", "openai-responses"])
def test_truncates_string_values_inside_arguments(fmt: str) -> None:
    messages = BUILDERS[fmt](6)
    first = _call_blocks(messages)[0]
    arguments = {"cmd": "y" * 500, "n": 3}
    key = "input" if fmt == "anthropic" else "arguments"
    first[key] = arguments if fmt == "anthropic" else json.dumps(arguments)
    out = prepare(messages, "shorten_tools_epoch", config=LONG_WINDOW).messages
    shortened = _call_blocks(out)[0]
    got = shortened[key] if fmt == "anthropic" else json.loads(shortened[key])
    assert got["n"] == 3 and got["cmd"].startswith("Truncated (500)")
    assert set(shortened) == set(first)  # the block's other keys survive
    assert not new_problems(fmt, messages, out)


def test_anthropic_notice_is_a_text_block_after_the_results() -> None:
    messages = anthropic(6)
    out = prepare(messages, "shorten_tools_epoch", config=TIGHT).messages
    first_call = next(i for i, m in enumerate(out) if m["role"] == "assistant")
    holder = out[first_call - 1]
    assert holder["role"] == "user"
    assert holder["content"][-1]["type"] == "text"
    assert (
        "compact" in holder["content"][-1]["text"].lower()
        or "removed" in holder["content"][-1]["text"].lower()
    )
    roles = [m["role"] for m in out]
    assert all(a != b for a, b in itertools.pairwise(roles))


def test_anthropic_thinking_blocks_are_kept_as_they_were() -> None:
    messages = anthropic(6)
    out = prepare(messages, "shorten_tools_epoch", config=TIGHT).messages
    given_blocks = {id(b) for m in messages if isinstance(m["content"], list) for b in m["content"]}
    for message in out:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] == "thinking":
                assert id(block) in given_blocks
                assert any(b["type"] == "tool_use" for b in message["content"])


def test_anthropic_images_become_a_placeholder_when_shortened() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * 50},
    }
    messages = anthropic(6, output=[{"type": "text", "text": LONG}, image])
    out = prepare(messages, "shorten_tools_epoch", config=TIGHT).messages
    results = [
        b
        for m in out
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    shortened = [r for r in results if r["content"][0]["text"].startswith("Truncated")]
    assert shortened and all(len(r["content"]) == 1 for r in shortened)
    assert all(r["is_error"] is False for r in results)
    assert results[-1]["content"][1] is image  # the newest is verbatim


@pytest.mark.parametrize("thinking", [True, False])
def test_anthropic_a_dropped_call_takes_its_turn_but_not_the_users_image(thinking: bool) -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    messages = anthropic(6)
    for message in messages:
        if message["role"] == "assistant":  # one block beside the call at most
            message["content"] = [b for b in message["content"] if b["type"] != "text"]
            if not thinking:
                message["content"] = message["content"][-1:]
    messages[2]["content"].append(image)  # the user's own block beside the first result
    out = prepare(messages, "shorten_tools_epoch", config=TIGHT).messages
    uses = [b.get("id") for m in out if m["role"] == "assistant" for b in m["content"]]
    assert "toolu_0" not in uses and "toolu_5" in uses  # the first pair was dropped
    assert sum(image is b for m in out for b in m["content"]) == 1
    assert not new_problems("anthropic", messages, out)
    if not thinking:
        assert not any(b["type"] == "thinking" for m in out for b in m["content"])


def test_responses_reasoning_and_text_go_with_their_dropped_call() -> None:
    items = responses(6)
    prepared = prepare(items, "shorten_tools_epoch", config=TIGHT)
    out = prepared.messages
    kept_calls = {i["call_id"] for i in out if i.get("type") == "function_call"}
    assert "call_0" not in kept_calls and "call_5" in kept_calls
    assert not any(i.get("id") == "rs_0" for i in out)
    assert prepared.report[-1].narration_dropped == prepared.report[-1].calls_dropped
    notice = next(i for i, item in enumerate(out) if item.get("role") == "user" and i > 0)
    assert out[notice + 1]["type"] == "reasoning"


@pytest.mark.parametrize("fmt", BUILDERS)
def test_malformed_messages_pass_through_and_are_counted(fmt: str) -> None:
    messages = BUILDERS[fmt](6)
    if fmt == "openai-chat":
        messages.insert(3, {"role": "tool", "tool_call_id": "nobody", "content": LONG})
        messages[5]["tool_calls"][0]["function"]["arguments"] = {"not": "a string"}
    elif fmt == "anthropic":
        messages[3]["content"].append({"text": "a block without a type"})
        messages[5]["content"][2]["input"] = "not an object"
    else:
        messages.insert(1, {"type": "function_call_output", "call_id": "nobody", "output": "x"})
    snapshot = copy.deepcopy(messages)
    prepared = prepare(messages, "shorten_tools_epoch", config=TIGHT)
    assert messages == snapshot
    assert prepared.report[-1].malformed >= 1
    assert not new_problems(fmt, messages, prepared.messages)


def test_cache_control_marks_the_last_block_of_the_stable_prefix() -> None:
    messages = anthropic(6)
    prepared = prepare(messages, "shorten_tools_epoch", config=TIGHT, cache_control=True)
    stable = prepared.stable_prefix
    assert stable == len(prepared.messages)
    last = prepared.messages[stable - 1]["content"][-1]
    assert last["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in messages[-1]["content"][-1]
    plain = prepare(messages, "shorten_tools_epoch", config=TIGHT)
    assert all(
        "cache_control" not in b
        for m in plain.messages
        for b in m["content"]
        if isinstance(b, dict)
    )


def test_cache_control_from_the_config_key() -> None:
    config = PromptConfig(cache_control=True)
    out = prepare(anthropic(2), "none", config=config).messages
    assert out[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_a_foreign_format_is_reported_never_silent() -> None:
    prepared = prepare(chat(6), "shorten_tools_epoch", config=TIGHT, format="scout")
    assert prepared.format == "scout"
    assert prepared.warnings and "openai-chat" in prepared.warnings[0]


_text = st.text(max_size=600)


@settings(max_examples=60, deadline=None)
@given(
    outputs=st.lists(_text, min_size=1, max_size=12),
    parallel=st.integers(1, 3),
    strategy=st.sampled_from(
        ["none", "shorten_tools", "shorten_tools_epoch", "shorten_tools_epoch_increment"]
    ),
    fmt=st.sampled_from(sorted(BUILDERS)),
)
def test_any_conversation_stays_valid(
    outputs: list[str], parallel: int, strategy: str, fmt: str
) -> None:
    builder = BUILDERS[fmt]
    messages = builder(len(outputs), parallel) if fmt == "openai-chat" else builder(len(outputs))
    snapshot = copy.deepcopy(messages)
    config = PromptConfig(
        epoch_tool_call_threshold=2,
        epoch_full_tool_calls=1,
        epoch_compacted_tool_calls=2,
        epoch_size=2,
        full_tool_outputs=1,
        max_tool_calls=3,
        max_tool_chars=100,
    )
    prepared = prepare(messages, strategy, config=config)
    assert messages == snapshot
    assert not new_problems(fmt, messages, prepared.messages)
    if strategy == "none":
        assert prepared.messages == messages


def _break(messages: list[dict[str, Any]], how: str, at: int) -> None:
    """Break the tool traffic of an OpenAI Chat conversation in one way, at one place."""
    answers = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    calls = [e for m in messages for e in m.get("tool_calls") or ()]
    if not answers:
        return  # broken already: nothing left to break
    if how == "an answer missing":
        del messages[answers[at % len(answers)]]
    elif how == "an answer twice":
        where = answers[at % len(answers)]
        messages.insert(where, dict(messages[where]))
    elif how == "a call id used again":
        calls[at % len(calls)]["id"] = calls[(at + 1) % len(calls)]["id"]
    elif how == "arguments that are no text":
        calls[at % len(calls)]["function"] = {"name": "bash", "arguments": {"cmd": "ls"}}
    else:  # the last answers missing: calls still waiting at the end
        del messages[answers[-1] :]


BREAKS = (
    "an answer missing",
    "an answer twice",
    "a call id used again",
    "arguments that are no text",
    "calls still waiting",
)
TO_FORMAT: dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = {
    "openai-chat": list,
    "anthropic": to_anthropic,
    "openai-responses": to_responses,
}


@settings(max_examples=300)
@given(
    pairs=st.integers(3, 8),
    parallel=st.integers(1, 3),
    breaks=st.lists(st.tuples(st.sampled_from(BREAKS), st.integers(0, 99)), max_size=3),
    strategy=st.sampled_from(["shorten_tools_epoch", "shorten_tools_cost_aware"]),
    fmt=st.sampled_from(sorted(BUILDERS)),
)
def test_broken_tool_traffic_never_comes_back_less_valid(
    pairs: int, parallel: int, breaks: list[tuple[str, int]], strategy: str, fmt: str
) -> None:
    chat_messages = chat(pairs, parallel)
    for how, at in breaks:
        _break(chat_messages, how, at)
    messages = TO_FORMAT[fmt](chat_messages)
    snapshot = copy.deepcopy(messages)
    prepared = prepare(messages, strategy, config=epoch_window(1), format=fmt)
    assert messages == snapshot
    assert not new_problems(fmt, messages, prepared.messages)
    report = prepared.report[-1]
    if report.malformed and report.calls_dropped:
        event(f"{fmt}: malformed traffic beside dropped calls")


@pytest.mark.parametrize("fmt", BUILDERS)
def test_text_json_cannot_hold_is_malformed_not_an_error(fmt: str) -> None:
    messages = BUILDERS[fmt](6)
    bad = "lone \ud800 surrogate"
    if fmt == "openai-chat":
        messages[3]["content"] = bad
    elif fmt == "anthropic":
        messages[2]["content"][0]["content"] = bad
    else:
        messages[4]["output"] = bad
    prepared = prepare(messages, "shorten_tools_epoch", config=TIGHT)
    assert prepared.report[-1].malformed == 2
    assert not new_problems(fmt, messages, prepared.messages)


SEEN_BY_PLUGIN: list[tuple[str, list[Any]]] = []


def priced_plugin(messages: list[Any], format: str) -> list[Any]:
    """A plugin strategy that wants the provider format (e.g. to price the prompt)."""
    SEEN_BY_PLUGIN.append((format, messages))
    return messages


def test_a_plugin_learns_the_format_before_it_runs() -> None:
    SEEN_BY_PLUGIN.clear()
    config = Config(plugins={"priced": "tests.formats.test_adapters:priced_plugin"})
    messages = anthropic(2)
    prepared = prepare(messages, "priced", config=config)
    assert SEEN_BY_PLUGIN[0][0] == "anthropic"
    assert any(m.get("role") == "function_call" for m in SEEN_BY_PLUGIN[0][1])
    assert all(a is b for a, b in zip(prepared.messages, messages, strict=True))
