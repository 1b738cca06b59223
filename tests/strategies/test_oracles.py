"""The engine against the plain reference in ``oracle.py``, on agent-like conversations.

Each property records with ``event()`` which interesting cases an example
reached; ``test_the_generator_reaches_every_interesting_case`` fails when the
generator stops producing one of them, so a property cannot pass vacuously.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scoutd.config import PromptConfig
from scoutd.strategies import BUILTINS
from scoutd.strategies.base import PrepareContext
from scoutd.strategies.epoch import (
    fixed_window,
    increment_window,
    shorten_tools_epoch,
    shorten_tools_epoch_increment,
)
from scoutd.strategies.report import Changes, apply_changes
from scoutd.strategies.shorten_tools import shorten_tools
from scoutd.strategies.tool_messages import ToolIndex, index_tools

from . import oracle
from .conversations import agent_conversations
from .test_properties import SMALL

# Long (tests/conftest.py starts the tests marked slow first).
pytestmark = pytest.mark.slow

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_FATES = ("kept", "truncated", "dropped")  # shorten_tools protects nothing
EPOCH = {"shorten_tools_epoch": False, "shorten_tools_epoch_increment": True}
RUNNERS = {"shorten_tools_epoch": shorten_tools_epoch}
RUNNERS["shorten_tools_epoch_increment"] = shorten_tools_epoch_increment


def features(messages: list[Any], config: PromptConfig = SMALL) -> set[str]:
    """The interesting cases ``messages`` contains, judged by the reference."""
    found: set[str] = set()
    pairing = oracle.pair(messages)
    tools = pairing.tools
    paired = [t for t in tools if t.is_call and t.partner is not None]
    for t in paired:
        if not isinstance(t.body.get("id"), str):
            found.add("non-string id paired")
    answered = [t.partner for t in paired]  # in call order
    if any(a > b for a, b in pairwise(answered)):
        found.add("outputs out of call order")
    if any(
        t.is_call and t.partner is None and any(not o.is_call and o.at > t.at for o in tools)
        for t in tools
    ):
        found.add("call without output mid-conversation")
    ids = [json.dumps(t.body.get("id")) for t in tools if t.is_call]
    if len(ids) != len(set(ids)):
        found.add("duplicate call ids")
    if any(t.is_call and t.body.get("arguments") is None for t in tools):
        found.add("None or missing arguments")
    if any(t.is_call and not isinstance(t.body.get("arguments", {}), dict) for t in tools):
        found.add("non-object arguments")
    for message in messages:
        if not isinstance(message, dict):
            continue
        content, role = message.get("content"), message.get("role")
        if "role" in message and not isinstance(role, str):
            found.add("non-string role")
        if content is not None and not isinstance(content, str):
            found.add("non-string content")
        if isinstance(content, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in content):
            found.add("lone surrogate")
    by_key: dict[str, list[tuple[int, int]]] = {}
    for t in paired:
        by_key.setdefault(oracle.call_key(t.body), []).append((t.at, tools[t.partner].at))
    for pairs in by_key.values():
        # the first call of a key is answered after a later call of the same key
        if len(pairs) > 1 and min(pairs)[1] > min(done for _, done in pairs):
            found.add("late repeat first in call order")
    for name, increment in EPOCH.items():
        _, fates = oracle.epoch_fates(messages, config, increment)
        for tool, fate in zip(tools, fates, strict=True):
            if fate != "kept":
                found.add(f"{'call' if tool.is_call else 'output'} {fate} ({name})")
    return found


INTERESTING = {
    "non-string id paired",
    "outputs out of call order",
    "call without output mid-conversation",
    "duplicate call ids",
    "None or missing arguments",
    "non-object arguments",
    "non-string role",
    "non-string content",
    "lone surrogate",
    "late repeat first in call order",
    *(
        f"{side} {fate} ({name})"
        for side in ("call", "output")
        for fate in ("truncated", "dropped", "protected")
        for name in EPOCH
    ),
}


def test_the_generator_reaches_every_interesting_case() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(messages=agent_conversations())
    def collect(messages: list[Any]) -> None:
        seen.update(features(messages))

    collect()
    rare = {case: seen[case] for case in INTERESTING if seen[case] < 5}
    assert not rare, f"cases reached fewer than 5 times in 400 examples: {rare}"


def _tag(messages: list[Any]) -> None:
    for name in sorted(features(messages)):
        event(name)


@PROPERTY
@given(messages=agent_conversations())
def test_pairing_and_positions_match_the_reference(messages: list[Any]) -> None:
    _tag(messages)
    reference = oracle.pair(messages)
    index = index_tools(messages)
    assert index.indices == [t.at for t in reference.tools]
    assert index.is_call == [t.is_call for t in reference.tools]
    assert index.partners == [-1 if t.partner is None else t.partner for t in reference.tools]
    assert index.numbers == [t.number for t in reference.tools]
    assert index.positions == [reference.position(t) for t in reference.tools]
    assert index.outputs == reference.outputs


@PROPERTY
@given(messages=agent_conversations(), data=st.data())
def test_an_index_grown_in_two_steps_matches_the_reference(
    messages: list[Any], data: st.DataObject
) -> None:
    """A session indexes what is new (``extend``): the same pairing as all at once."""
    cut = data.draw(st.integers(0, len(messages)), label="cut")
    reference = oracle.pair(messages)
    index = ToolIndex()
    index.extend(messages[:cut], 0)
    index.extend(messages, cut)
    tools = reference.tools
    users = [at for at, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    assert [at for at, role in enumerate(index.roles) if role == "user"] == users
    assert index.indices == [t.at for t in tools]
    assert [index.content(messages, slot) for slot in range(len(tools))] == [
        messages[t.at]["content"] for t in tools
    ]
    assert index.partners == [-1 if t.partner is None else t.partner for t in tools]
    assert index.positions == [reference.position(t) for t in tools]
    # the calls that the second step paired: their output is new, the call may not be
    newly_paired = [
        c
        for c, t in enumerate(tools)
        if t.is_call and t.partner is not None and tools[t.partner].at >= cut
    ]
    assert sorted(index.paired) == newly_paired
    event(
        "a pair split by the cut"
        if any(tools[c].at < cut for c in newly_paired)
        else "no split pair"
    )


configs = st.builds(
    PromptConfig,
    epoch_tool_call_threshold=st.integers(0, 12),
    epoch_full_tool_calls=st.integers(0, 4),
    epoch_compacted_tool_calls=st.integers(0, 5),
    epoch_size=st.integers(0, 6),
    epoch_increment_epochs_per_increase=st.integers(0, 3),
    epoch_increment_size_increase=st.integers(0, 3),
    epoch_increment_repeat_increase=st.integers(0, 4),
    epoch_increment_max_size=st.integers(0, 14),
    epoch_increment_max_compacted_tool_calls=st.integers(0, 12),
    epoch_increment_compacted_growth_ratio=st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.25]),
)


@settings(max_examples=400, deadline=None)
@given(
    config=configs,
    outputs=st.integers(0, 80),
    repeat_at=st.lists(st.integers(1, 80), max_size=8).map(sorted),
)
def test_windows_match_the_reference(
    config: PromptConfig, outputs: int, repeat_at: list[int]
) -> None:
    repeat_at = [n for n in repeat_at if n <= outputs]
    for window, bands in (
        (fixed_window(outputs, config), oracle.fixed_bands(outputs, config)),
        (
            increment_window(outputs, repeat_at, config),
            oracle.increment_bands(outputs, repeat_at, config),
        ),
    ):
        event("window" if window is not None else "no window")
        if window is None or bands is None:
            assert window is None and bands is None
            continue
        assert (window.pinned, window.size) == (bands.pinned, bands.size)
        # newest-first band edges against oldest-first ones
        assert outputs + 1 - window.keep_full == bands.full_from + 1
        assert outputs + 1 - window.truncate_to == bands.truncate_from + 1


def _expected_messages(
    messages: list[Any], pairing: oracle.Pairing, fates: list[str], config: PromptConfig
) -> list[Any]:
    fate_at = {tool.at: fate for tool, fate in zip(pairing.tools, fates, strict=True)}
    out = [m for at, m in enumerate(messages) if fate_at.get(at) != "dropped"]
    truncated, dropped = fates.count("truncated"), fates.count("dropped")
    if truncated or dropped:
        first = next(
            (
                i
                for i, m in enumerate(out)
                if isinstance(m, dict) and m.get("role") in (oracle.CALL, oracle.OUTPUT)
            ),
            len(out),
        )
        text = config.compaction_notice.replace("{compacted}", str(truncated))
        out.insert(first, {"role": "user", "content": text.replace("{removed}", str(dropped))})
    return out


def _same_but_shortened(got: Any, original: Any) -> None:
    """A truncated tool message: same keys, and only its long strings cut."""
    assert got.keys() == original.keys()
    assert {k: v for k, v in got.items() if k != "content"} == {
        k: v for k, v in original.items() if k != "content"
    }
    new, old = json.loads(got["content"]), json.loads(original["content"])
    assert list(new) == list(old)
    field = "arguments" if "arguments" in new and isinstance(new["arguments"], dict) else "content"
    assert {k: v for k, v in new.items() if k != field} == {
        k: v for k, v in old.items() if k != field
    }
    if field == "content":
        _cut(new["content"], oracle.output_text(old) or "", oracle.OUTPUT_LIMIT)
    else:
        for name, value in old["arguments"].items():
            cut = new["arguments"][name]
            if isinstance(value, str) and len(value) > oracle.ARGUMENT_LIMIT:
                _cut(cut, value, oracle.ARGUMENT_LIMIT)
            else:
                assert cut == value


def _cut(cut: str, text: str, limit: int) -> None:
    prefix = f"Truncated ({len(text)}): "
    assert cut.startswith(prefix) and f"<...{len(text)} - " in cut
    assert len(cut) <= len(prefix) + limit


def _check_actions(
    actions: list[Any], messages: list[Any], pairing: oracle.Pairing, fates: list[str]
) -> None:
    """Every tool message's action: where it is, its fate and its characters before and after."""
    assert [action.action for action in actions] == fates
    for action, tool, fate in zip(actions, pairing.tools, fates, strict=True):
        content = messages[tool.at]["content"]
        after = {"dropped": "", "truncated": oracle.rewritten(tool)}.get(fate, content)
        assert (action.index, action.role) == (tool.at, messages[tool.at]["role"])
        assert (action.id, action.name) == (tool.body.get("id"), tool.body.get("name"))
        assert action.position == pairing.position(tool)
        assert (action.chars_before, action.chars_after) == (len(content), len(after or ""))


@PROPERTY
@given(messages=agent_conversations())
def test_none_changes_nothing_and_counts_characters(messages: list[Any]) -> None:
    got, report = BUILTINS["none"].run(messages, PrepareContext(SMALL, "scoutd", detail=True))
    assert got == messages and got is not messages
    assert (report.strategy, report.chars_before, report.chars_after) == (
        "none",
        oracle.chars(messages),
        oracle.chars(messages),
    )
    assert report.notice is False and report.actions is None


@PROPERTY
@given(messages=agent_conversations(), strategy=st.sampled_from(sorted(EPOCH)))
def test_epoch_strategies_match_the_reference(messages: list[Any], strategy: str) -> None:
    _tag(messages)
    pairing, fates = oracle.epoch_fates(messages, SMALL, EPOCH[strategy])
    got, report = RUNNERS[strategy](messages, SMALL, detail=True)
    _check_actions(report.actions or [], messages, pairing, fates)
    # without detail: the same result, no per-message actions
    assert RUNNERS[strategy](messages, SMALL) == (
        got,
        msgspec.structs.replace(report, actions=None),
    )
    counts = oracle.report_counts(pairing, fates)
    assert {name: getattr(report, name) for name in counts} == counts
    assert report.chars_before == oracle.chars(messages)
    assert report.chars_after == oracle.chars(got)
    expected = _expected_messages(messages, pairing, fates, SMALL)
    assert report.notice == ("truncated" in fates or "dropped" in fates)
    assert len(got) == len(expected)
    truncated_at = {t.at for t, f in zip(pairing.tools, fates, strict=True) if f == "truncated"}
    originals = {id(m): at for at, m in enumerate(messages)}
    for new, old in zip(got, expected, strict=True):
        if originals.get(id(old)) in truncated_at:
            _same_but_shortened(new, old)
        else:
            assert new == old


@st.composite
def shorten_tools_cases(draw: st.DrawFn) -> tuple[list[Any], PromptConfig]:
    """A conversation and limits, the character budget often right at a running total."""
    messages = draw(agent_conversations())
    limits = PromptConfig(
        full_tool_calls=draw(st.integers(0, 3)),
        full_tool_outputs=draw(st.integers(0, 5)),
        max_tool_calls=draw(st.integers(0, 8)),
        max_tool_outputs=draw(st.none() | st.integers(0, 8)),
        max_tool_chars=0,
    )
    # the characters kept with no budget, newest first: a budget at one of these
    # totals (or one past it) decides exactly where keeping whole stops
    totals = [0]
    for message in reversed(messages):
        body = oracle.tool_body(message)
        if body is not None:
            totals.append(totals[-1] + len(message["content"]))
    # the newer half: a budget spent early leaves older messages to truncate or drop
    budget = draw(st.sampled_from(totals[: len(totals) // 2 + 1])) + draw(st.integers(-1, 1))
    config = msgspec.structs.replace(limits, max_tool_chars=max(budget, 0))
    return messages, config


def _shorten_tools_events(messages: list[Any], config: PromptConfig) -> set[str]:
    pairing, fates = oracle.shorten_tools_fates(messages, config)
    return {
        f"shorten_tools: {'call' if tool.is_call else 'output'} {fate}"
        for tool, fate in zip(pairing.tools, fates, strict=True)
    }


def test_the_shorten_tools_cases_are_reached() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=400, deadline=None, derandomize=True, database=None)
    @given(case=shorten_tools_cases())
    def collect(case: tuple[list[Any], PromptConfig]) -> None:
        seen.update(_shorten_tools_events(*case))

    collect()
    cases = [f"shorten_tools: {side} {fate}" for side in ("call", "output") for fate in _FATES]
    rare = {case: seen[case] for case in cases if seen[case] < 5}
    assert not rare, f"cases reached fewer than 5 times in 400 examples: {rare}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=shorten_tools_cases())
def test_shorten_tools_matches_the_reference(case: tuple[list[Any], PromptConfig]) -> None:
    messages, config = case
    _tag(messages)
    pairing, fates = oracle.shorten_tools_fates(messages, config)
    for name in sorted(_shorten_tools_events(messages, config)):
        event(name)
    got, report = shorten_tools(messages, config, detail=True)
    _check_actions(report.actions or [], messages, pairing, fates)
    counts = oracle.report_counts(pairing, fates)
    assert {name: getattr(report, name) for name in counts} == counts
    assert report.chars_before == oracle.chars(messages)
    assert report.chars_after == oracle.chars(got)
    assert not report.notice  # shorten_tools adds none
    fate_of = {t.at: f for t, f in zip(pairing.tools, fates, strict=True)}
    rewritten = {t.at: oracle.rewritten(t) for t in pairing.tools if fate_of[t.at] == "truncated"}
    dropped = {at for at, fate in fate_of.items() if fate == "dropped"}
    expected = [
        m if at not in rewritten else {**m, "content": rewritten[at]}
        for at, m in enumerate(messages)
        if at not in dropped
    ]
    assert got == expected
    # without detail: the same result, no per-message actions
    assert shorten_tools(messages, config) == (got, msgspec.structs.replace(report, actions=None))


def test_the_notice_goes_last_when_no_tool_message_remains() -> None:
    """docs/STRATEGIES.md, the notice: appended when every tool message was dropped."""
    messages: list[Any] = [
        {"role": "user", "content": "task"},
        {"role": "function_call", "content": '{"name": "ls", "arguments": {}, "id": "c1"}'},
        {"role": "function_call_output", "content": '{"name": "ls", "content": "x", "id": "c1"}'},
        {"role": "assistant", "content": "done"},
    ]
    index = index_tools(messages)
    got, report = apply_changes(
        "test",
        messages,
        index,
        Changes(dropped=[0, 1]),
        notice="{compacted}/{removed}",
        detail=False,
    )
    assert got == [messages[0], messages[3], {"role": "user", "content": "0/2"}]
    assert report.notice and (report.calls_dropped, report.outputs_dropped) == (1, 1)
