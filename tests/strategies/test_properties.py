"""Invariants of the compacting strategies over generated conversations."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from scoutd import prepare
from scoutd.config import PromptConfig
from scoutd.strategies.epoch import fixed_window, increment_window, repeat_numbers
from scoutd.strategies.report import content_chars
from scoutd.strategies.tool_messages import (
    CALL,
    OUTPUT,
    index_tools,
    repeated_pairs,
    role_of,
)

from . import oracle
from .conversations import agent_conversations, conversations

COMPACTING = ["shorten_tools", "shorten_tools_epoch", "shorten_tools_epoch_increment"]

# Small windows so that every band (kept, truncated, dropped, protected) is reached.
SMALL = PromptConfig(
    full_tool_calls=1,
    full_tool_outputs=2,
    max_tool_calls=6,
    max_tool_outputs=5,
    max_tool_chars=300,
    epoch_tool_call_threshold=3,
    epoch_full_tool_calls=2,
    epoch_compacted_tool_calls=3,
    epoch_size=2,
    epoch_increment_epochs_per_increase=1,
    epoch_increment_size_increase=1,
    epoch_increment_repeat_increase=2,
    epoch_increment_max_size=6,
    epoch_increment_max_compacted_tool_calls=8,
)

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ids(messages: list[Any], role: str) -> list[Any]:
    found = []
    for message in messages:
        if role_of(message) == role:
            try:
                body = msgspec.json.decode(message["content"])
            except (msgspec.DecodeError, TypeError):
                continue
            if isinstance(body, dict):
                found.append(body.get("id"))
    return found


@PROPERTY
@given(messages=conversations(), strategy=st.sampled_from(COMPACTING))
def test_never_mutates_its_input_and_never_raises(messages: list[Any], strategy: str) -> None:
    snapshot = copy.deepcopy(messages)
    originals = list(messages)
    prepared = prepare(messages, strategy, config=SMALL)
    assert messages == snapshot
    assert all(a is b for a, b in zip(messages, originals, strict=True))
    # Kept messages are the input objects themselves; only rewrites and the notice are new.
    identities = {id(m) for m in messages}
    fresh = sum(id(m) not in identities for m in prepared.messages)
    report = prepared.report[0]
    assert fresh == report.calls_truncated + report.outputs_truncated + int(report.notice)


@PROPERTY
@given(
    messages=st.one_of(conversations(), agent_conversations()),
    strategy=st.sampled_from(COMPACTING),
)
def test_pair_integrity(messages: list[Any], strategy: str) -> None:
    """No output survives whose call was dropped, and no call whose output was dropped.

    Every message carries its input index in an extra key (a rewritten message
    keeps its keys), and the pairs come from the plain reference.
    """
    tagged = [dict(m, _at=at) if isinstance(m, dict) else m for at, m in enumerate(messages)]
    result = prepare(tagged, strategy, config=SMALL).messages
    survivors = {m["_at"] for m in result if isinstance(m, dict) and "_at" in m}
    pairing = oracle.pair(messages)
    for tool in pairing.tools:
        if tool.is_call and tool.partner is not None:
            output_at = pairing.tools[tool.partner].at
            assert (tool.at in survivors) == (output_at in survivors), tool


@PROPERTY
@given(
    messages=st.one_of(conversations(), agent_conversations()),
    strategy=st.sampled_from(COMPACTING),
)
def test_report_counts_match_the_output(messages: list[Any], strategy: str) -> None:
    """Each count against what happened to the messages, told apart by identity:
    a kept tool message is the input object, a truncated one a new object."""
    prepared = prepare(messages, strategy, config=SMALL)
    report = prepared.report[0]
    usable = index_tools(messages)
    out_ids = {id(m) for m in prepared.messages}
    in_ids = {id(m) for m in messages}
    new = [m for m in prepared.messages if id(m) not in in_ids]
    for is_call, side in ((True, "calls"), (False, "outputs")):
        tools = [
            messages[at]
            for slot, at in enumerate(usable.indices)
            if usable.is_call[slot] == is_call
        ]
        same = sum(id(m) in out_ids for m in tools)
        rewritten = sum(role_of(m) == (CALL if is_call else OUTPUT) for m in new)
        kept = getattr(report, f"{side}_kept") + getattr(report, f"{side}_protected")
        assert kept == same
        assert getattr(report, f"{side}_truncated") == rewritten
        assert getattr(report, f"{side}_dropped") == len(tools) - same - rewritten
    assert report.chars_before == content_chars(messages)
    assert report.chars_after == content_chars(prepared.messages)
    notices = len(prepared.messages) - (
        len(messages) - report.calls_dropped - report.outputs_dropped
    )
    assert notices == int(report.notice)


def _engine_pinned(messages: list[Any], strategy: str) -> int | None:
    index = index_tools(messages)
    if strategy == "shorten_tools_epoch":
        window = fixed_window(index.outputs, SMALL)
    else:
        window = increment_window(index.outputs, repeat_numbers(repeated_pairs(index)), SMALL)
    return None if window is None else window.pinned


def _repeats_an_earlier_call(prefix: list[Any], added: list[Any]) -> bool:
    """Whether a pair completed in ``added`` repeats the key of an earlier pair.

    Completed, not called: a call already in ``prefix`` whose output arrives in
    ``added`` becomes a pair only now, and then counts as new.
    """
    pairing = oracle.pair(prefix + added)
    seen: set[str] = set()
    pairs = sorted(
        (pairing.tools[tool.partner].at, oracle.call_key(tool.body))
        for tool in pairing.tools
        if tool.is_call and tool.partner is not None
    )  # by the position of the output that completes each pair
    for completed_at, key in pairs:
        if completed_at >= len(prefix) and key in seen:
            return True
        seen.add(key)
    return False


@PROPERTY
@given(
    messages=conversations(max_pairs=60),
    strategy=st.sampled_from(["shorten_tools_epoch", "shorten_tools_epoch_increment"]),
    data=st.data(),
)
def test_prefix_stable_inside_an_epoch(messages: list[Any], strategy: str, data: Any) -> None:
    """Inside one epoch, P(n) is a prefix of P(n+k) unless a new call repeats an old one.

    Only cuts inside a compacting epoch are drawn (``assume`` rejects a
    conversation without one, and Hypothesis fails the test when it rejects
    too many), so every example compares a compacted prompt with a longer one.
    """
    # the engine's own windows only choose the cuts (fast); test_oracles checks them
    pinned = [_engine_pinned(messages[:end], strategy) for end in range(len(messages) + 1)]
    cuts = [end for end, start in enumerate(pinned) if start is not None and end < len(messages)]
    assume(cuts)
    cut = data.draw(st.sampled_from(cuts))
    same = [end for end in range(cut + 1, len(messages) + 1) if pinned[end] == pinned[cut]]
    grown = data.draw(st.sampled_from(same or [cut]))
    shorter, longer = messages[:cut], messages[:grown]
    assume(not _repeats_an_earlier_call(shorter, messages[cut:grown]))
    small = prepare(shorter, strategy, config=SMALL).messages
    large = prepare(longer, strategy, config=SMALL).messages
    event("the shorter prompt is compacted" if small != shorter else "nothing to compact yet")
    event("the longer prompt grew" if len(large) > len(small) else "same length")
    assert large[: len(small)] == small


@pytest.mark.parametrize("strategy", ["shorten_tools_epoch", "shorten_tools_epoch_increment"])
def test_prefix_stability_holds_over_a_whole_growing_run(strategy: str) -> None:
    """Step by step over one run: every same-epoch step extends the previous prompt."""
    from .conversations import agent_run

    run = agent_run(160, repeat_every=0)
    previous: list[Any] | None = None
    previous_pinned: int | None = None
    same_epoch_steps = 0
    for end in range(4, len(run) + 1, 2):
        prefix = run[:end]
        prompt = prepare(prefix, strategy).messages
        outputs = sum(m["role"] == OUTPUT for m in prefix)  # every call is answered, no repeats
        bands = (
            oracle.fixed_bands(outputs, PromptConfig())
            if strategy == "shorten_tools_epoch"
            else oracle.increment_bands(outputs, [], PromptConfig())
        )
        pinned = None if bands is None else bands.pinned
        if previous is not None and pinned is not None and pinned == previous_pinned:
            assert prompt[: len(previous)] == previous
            same_epoch_steps += 1
        previous, previous_pinned = prompt, pinned
    assert same_epoch_steps > 90
