"""Provider-format sessions: the view made a piece at a time is the whole view, and
every round equals :func:`scoutd.prepare` over the same conversation."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from scoutd import Session, prepare
from scoutd.config import Config, PromptConfig
from scoutd.engine import view_tracker as incremental_view
from scoutd.engine.incremental import SessionPrompt
from scoutd.engine.view_tracker import ViewTracker
from scoutd.formats import adapter
from scoutd.strategies.inbox import write_notice
from scoutd.testing.derive import to_anthropic, to_responses

from .formats.test_adapters import BUILDERS, TIGHT
from .formats.test_hostile import spoil
from .strategies.test_cost_aware_cases import AUTO_PRICED
from .test_session import COST_SMALL, _inbox_twins

FORMATS = ("openai-chat", "anthropic", "openai-responses")
CONVERT: dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = {
    "openai-chat": list,
    "anthropic": to_anthropic,
    "openai-responses": to_responses,
}
# Compacts a 30-turn agent loop while its plan stays put for most rounds.
COST_AGENT = msgspec.structs.replace(COST_SMALL, context_window=3000)
CONFIGS = [Config(prompt=TIGHT), Config(prompt=COST_SMALL), Config(prompt=PromptConfig())]
STRATEGIES = [
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment,inbox",
    "shorten_tools_cost_aware,inbox",
    None,
]
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The same examples each run, to count the cases the properties reach.
COUNTED = settings(PROPERTY, max_examples=50, derandomize=True, database=None)


def _reached(seen: Counter[str], case: str, reached: bool = True) -> None:
    if reached:
        seen[case] += 1
        if currently_in_test_context():
            event(case)


def _pieces(fmt: str, data: st.DataObject, seen: Counter[str]) -> None:
    """Oracle: the adapter's view of the whole conversation, made from scratch."""
    messages = BUILDERS[fmt](data.draw(st.integers(1, 6)))
    spoil(data, messages, data.draw(st.sampled_from([0, 1, 2, 2, 3, 3])))
    chosen = adapter(fmt)
    assert chosen is not None
    tracker = ViewTracker(chosen)
    held: list[Any] = []
    ends = sorted(data.draw(st.lists(st.integers(0, len(messages)), max_size=6)))
    for end in [*ends, len(messages)]:
        keep, added = tracker.sync(messages[:end], held)
        _reached(seen, "a view message changed", keep < len(held))
        _reached(seen, "the view only grew", 0 < keep == len(held))
        held = held[:keep] + added
        whole = chosen.view(messages[:end], True)
        assert held == whole.messages
        assert (tracker.refs, tracker.starts) == (whole.refs, whole.starts)
        assert tracker.malformed == whole.malformed
        _reached(seen, f"malformed view ({fmt})", whole.malformed > 0)


@PROPERTY
@given(fmt=st.sampled_from(FORMATS), data=st.data())
def test_the_view_made_a_piece_at_a_time_is_the_whole_view(fmt: str, data: st.DataObject) -> None:
    _pieces(fmt, data, Counter())


def _call(ident: str, arguments: Any = None) -> dict[str, Any]:
    text = json.dumps({"cmd": f"ls {ident}"}) if arguments is None else arguments
    return {"id": ident, "type": "function", "function": {"name": "bash", "arguments": text}}


def _tool(ident: str, size: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": ident, "content": f"{ident} " + "y" * size}


@st.composite
def chat_runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """OpenAI Chat conversations with the odd shapes real agents and hostile callers
    make: parallel calls, narration, answers missing, doubled, out of order or
    without a call, arguments that are not JSON, call ids used twice."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix the bug"},
    ]
    used: list[str] = []
    steps = draw(st.lists(st.sampled_from(_STEPS), min_size=3, max_size=24))
    for number, step in enumerate(steps):
        size = draw(st.sampled_from([10, 300, 1500]))
        if step == "user":
            messages.append({"role": "user", "content": f"and then {number}"})
            continue
        if step == "orphan answer":
            messages.append(_tool(f"nobody{number}", size))
            continue
        calls = 1 if step in ("call", "narrated", "unanswered", "doubled", "not json") else 3
        ids = [f"c{number}_{k}" for k in range(calls)]
        if step == "reused id" and used:
            ids[0] = used[0]
        arguments = "not json {" if step == "not json" else None
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": f"step {number}" if step == "narrated" else None,
            "tool_calls": [_call(ident, arguments) for ident in ids],
        }
        messages.append(assistant)
        used += ids
        if step == "unanswered":
            continue
        answers = [_tool(ident, size) for ident in ids]
        if step == "parallel, out of order":
            answers.reverse()
        if step == "parallel, one missing":
            answers.pop()
        if step == "doubled":
            answers.append(_tool(ids[0], size))
        messages += answers
    return messages


_STEPS = [
    "call",
    "call",
    "call",
    "narrated",
    "parallel",
    "parallel, out of order",
    "user",
    "unanswered",
    "parallel, one missing",
    "doubled",
    "orphan answer",
    "not json",
    "reused id",
]


@contextlib.contextmanager
def _watching(seen: Counter[str], fmt: str) -> Iterator[None]:
    """Count which way the round's provider prompt was made (the functions run as they are)."""
    extended, continues = incremental_view._extended, incremental_view._continues

    def counted_extended(*args: Any) -> Any:
        found = extended(*args)
        _reached(seen, f"prompt extended ({fmt})", found is not None)
        return found

    def counted_continues(*args: Any) -> bool:
        found = continues(*args)
        _reached(seen, f"new message joins the one before ({fmt})", not found)
        return found

    with (
        mock.patch.object(incremental_view, "_extended", counted_extended),
        mock.patch.object(incremental_view, "_continues", counted_continues),
    ):
        yield


def _rounds(
    run: list[dict[str, Any]],
    fmt: str,
    strategies: str | None,
    config: Config,
    data: st.DataObject,
    seen: Counter[str],
) -> None:
    messages = CONVERT[fmt](run)
    snapshot = copy.deepcopy(messages)
    declared = data.draw(st.sampled_from(["auto", fmt]))
    session = Session(strategies=strategies, config=config, format=declared)
    ends = sorted(data.draw(st.lists(st.integers(1, len(messages)), max_size=8)))
    for end in [*ends, len(messages)]:
        conversation = messages[:end]
        if data.draw(st.booleans()):  # equal messages that are new objects: nothing changed
            conversation = copy.deepcopy(conversation)
        with _watching(seen, fmt):
            got = session.prepare(conversation)
        expected = prepare(conversation, strategies, config=config, format=declared)
        assert got.messages == expected.messages
        assert got.report == expected.report
        first = got.report[0]
        _reached(seen, f"compacted ({fmt})", first.outputs_truncated + first.outputs_dropped > 0)
        _reached(seen, f"malformed round ({fmt})", got.report[-1].malformed > 0)
    assert messages == snapshot  # the session never changes what it was given


_ROUNDS = {
    "run": chat_runs(),
    "fmt": st.sampled_from(FORMATS),
    "strategies": st.sampled_from(STRATEGIES),
    "config": st.sampled_from(CONFIGS),
}


@PROPERTY
@given(case=st.fixed_dictionaries(_ROUNDS), data=st.data())
def test_every_provider_round_equals_prepare(case: dict[str, Any], data: st.DataObject) -> None:
    _rounds(**case, data=data, seen=Counter())


def _inner_index(session: Session) -> Any:
    provider = session._state._provider
    assert provider is not None, "the provider round was not incremental"
    return provider[1].index


def _answered(fmt: str, message: dict[str, Any]) -> bool:
    """Whether ``message`` of BUILDERS[fmt] answers the calls of a model turn (ends the turn)."""
    if fmt == "openai-responses":
        return bool(message["type"] == "function_call_output")
    return bool(message["role"] == ("tool" if fmt == "openai-chat" else "user"))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("strategies", "config"),
    [
        ("shorten_tools_epoch_increment,inbox", Config(prompt=TIGHT)),
        ("shorten_tools_cost_aware,inbox", Config(prompt=COST_AGENT)),
    ],
)
def test_an_agent_loop_never_views_or_indexes_its_conversation_again(
    fmt: str, strategies: str, config: Config
) -> None:
    """Each round adds a model turn and its answers: the view session only grows."""
    messages = BUILDERS[fmt](30)
    session = Session(strategies=strategies, config=config)
    ends = [end for end in range(2, len(messages) + 1) if _answered(fmt, messages[end - 1])]
    assert len(ends) == 30
    session.prepare(messages[: ends[0]])
    index = _inner_index(session)
    assert session._state._provider is not None
    tracker = session._state._provider[0]
    viewed: list[int] = []  # how many provider messages each view call read
    original = tracker.adapter
    tracker.adapter = dataclasses.replace(
        original,
        view=lambda part, mark, kept: original.view(viewed.append(len(part)) or part, mark, kept),
    )
    seen: Counter[str] = Counter()
    previous = ends[0]
    for end in ends[1:]:
        viewed.clear()
        with _watching(seen, fmt):
            got = session.prepare(messages[:end])
        assert got == prepare(messages[:end], strategies, config=config)
        assert _inner_index(session) is index  # extended, never rebuilt
        assert sum(viewed) <= 2 * (end - previous) + 4  # the newest turns, not the whole run
        previous = end
    assert got.report[0].format == fmt
    assert got.report[0].outputs_truncated + got.report[0].outputs_dropped > 0
    assert seen[f"prompt extended ({fmt})"] >= 15  # of 29 rounds: the others moved the bands


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_call_left_waiting_then_answered_recomputes_from_it(fmt: str) -> None:
    """The view of a call still waiting differs from the view of the answered call."""
    messages = BUILDERS[fmt](12)
    config = Config(prompt=TIGHT)
    session = Session(config=config)
    waiting = len(messages) - 1  # the last call's answer is not there yet
    assert session.prepare(messages[:waiting]) == prepare(messages[:waiting], config=config)
    index = _inner_index(session)
    assert session.prepare(messages) == prepare(messages, config=config)
    assert _inner_index(session) is not index  # rebuilt from the call that changed


@pytest.mark.parametrize("start", [0, 3])
def test_a_responses_call_id_used_again_spoils_the_earlier_pair(start: int) -> None:
    """Responses pairs by call id anywhere: a later item with an old id changes an old
    pair (from ``start`` 3 on, the conversation opens with that call and its output)."""
    messages = BUILDERS["openai-responses"](10)[start:]
    config = Config(prompt=TIGHT)
    session = Session(config=config)
    assert session.prepare(messages) == prepare(messages, config=config)
    first_call = next(item for item in messages if item.get("type") == "function_call")
    again = [*messages, {**first_call, "id": "fc_again"}]
    got = session.prepare(again)
    assert got == prepare(again, config=config)
    assert got.report[-1].malformed == 3  # the old pair and the new call


def test_the_properties_reach_the_interesting_cases() -> None:
    seen: Counter[str] = Counter()
    for fmt in FORMATS:

        @COUNTED
        @given(data=st.data())
        def pieces(data: st.DataObject) -> None:
            _pieces(fmt, data, seen)  # noqa: B023 (run before the loop moves on)

        @COUNTED
        @given(case=st.fixed_dictionaries({**_ROUNDS, "fmt": st.just(fmt)}), data=st.data())
        def rounds(case: dict[str, Any], data: st.DataObject) -> None:
            _rounds(**case, data=data, seen=seen)

        pieces()
        rounds()
    cases = [
        "a view message changed",
        "the view only grew",
        *(f"{case} ({fmt})" for fmt in FORMATS for case in ("malformed view", "compacted")),
        *(f"malformed round ({fmt})" for fmt in FORMATS),
        *(f"prompt extended ({fmt})" for fmt in FORMATS),
        "new message joins the one before (openai-responses)",
    ]
    rare = {case: seen[case] for case in cases if seen[case] < 5}
    assert not rare, f"cases reached fewer than 5 times: {rare}"


def test_an_anthropic_prompt_extends_only_after_its_last_message_as_it_was() -> None:
    """Anthropic turns of one role side by side are merged when something between
    them went: a prompt that does not end with the last message itself may merge
    the next one into what it ends with, so it is rebuilt whole."""
    messages = BUILDERS["anthropic"](3)
    merged = {"role": "user", "content": [{"type": "text", "text": "joined"}]}
    last_round = incremental_view._LastRound
    ended_as_is = last_round([*messages[:2], messages[-1]], len(messages), 0, [], 0)
    ended_merged = last_round([*messages[:2], merged], len(messages), 0, [], 0)
    grown = [*messages, {"role": "user", "content": "next"}]
    anthropic, chat = adapter("anthropic"), adapter("openai-chat")
    assert anthropic is not None and chat is not None
    assert incremental_view._continues(anthropic, grown, ended_as_is)
    assert not incremental_view._continues(anthropic, grown, ended_merged)
    assert incremental_view._continues(chat, grown, ended_merged)


@pytest.mark.parametrize("fmt", FORMATS)
def test_notices_in_a_provider_session_are_delivered_as_prepare_delivers_them(
    tmp_path: Path, fmt: str
) -> None:
    """A round with inbox notices ends with them; the round after it is rebuilt whole
    (the notices may have joined the last provider message) and then extended again."""
    mine, theirs = _inbox_twins(tmp_path)
    messages = BUILDERS[fmt](16)
    config = Config(prompt=TIGHT)
    strategies = "shorten_tools_epoch_increment,inbox"
    session = Session(mine, strategies=strategies, config=config)
    delivered = 0
    for end in range(4, len(messages) + 1, 4):
        if end % 12 == 0:  # two at once: an Anthropic prompt joins them in one turn
            for save_file in (mine, theirs):
                write_notice(save_file, f"notice at {end}", name=f"n{end}a")
                write_notice(save_file, f"another at {end}", name=f"n{end}b")
        got = session.prepare(messages[:end])
        expected = prepare(messages[:end], strategies, save_file=theirs, config=config)
        assert (got.messages, got.report) == (expected.messages, expected.report)
        delivered += got.report[-1].inbox_delivered
    assert delivered == 2 * len(range(12, len(messages) + 1, 12)) > 0


def test_the_configured_cache_hint_marks_an_anthropic_session_prompt() -> None:
    messages = BUILDERS["anthropic"](8)
    config = Config(prompt=msgspec.structs.replace(TIGHT, cache_control=True))
    session = Session(config=config)
    for end in (6, 10, len(messages)):
        got = session.prepare(messages[:end])
        assert got == prepare(messages[:end], config=config)
    last = got.messages[got.stable_prefix - 1]["content"][-1]
    assert last["cache_control"] == {"type": "ephemeral"}


def test_a_provider_session_prices_the_default_strategy_as_its_provider() -> None:
    """The cost-aware default assumes its provider's cache prices: here OpenAI's
    cheaper rewrite makes it drop what Anthropic's prices would keep."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "h" * 50}]
    for k in range(5):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [_call(f"c{k}", "{}")]},
            _tool(f"c{k}", 300),
        ]
    prompt = AUTO_PRICED
    config = Config(prompt=prompt)
    session = Session(strategies="shorten_tools_cost_aware", config=config)
    for end in range(3, len(messages) + 1, 2):
        got = session.prepare(messages[:end])
        assert got == prepare(messages[:end], "shorten_tools_cost_aware", config=config)
    assert got.report[0].outputs_dropped == 4
    as_anthropic = Config(prompt=msgspec.structs.replace(prompt, cache_pricing="anthropic"))
    assert (
        prepare(messages, "shorten_tools_cost_aware", config=as_anthropic).report[0].outputs_dropped
        == 0
    )


def test_a_session_whose_format_changes_views_its_conversation_anew() -> None:
    """Declared per call: messages without tool traffic fit every format, and what
    comes next is read in the format the call names."""
    state = SessionPrompt()
    opening: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    state.extend(opening)
    config = Config(prompt=TIGHT)
    first, _ = state.prepare("shorten_tools_epoch", config, format="openai-chat")
    assert first == prepare(opening, "shorten_tools_epoch", config=config, format="openai-chat")
    turns = BUILDERS["anthropic"](6)[1:]
    state.extend(turns)
    got, _ = state.prepare("shorten_tools_epoch", config, format="anthropic")
    whole = [*opening, *turns]
    assert got == prepare(whole, "shorten_tools_epoch", config=config, format="anthropic")
    assert got.report[0].outputs_truncated + got.report[0].outputs_dropped > 0


def test_a_round_that_fails_while_viewing_leaves_the_session_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = BUILDERS["openai-chat"](10)
    config = Config(prompt=TIGHT)
    session = Session(config=config)
    session.prepare(messages[:9])
    sync = ViewTracker.sync

    def failing(self: ViewTracker, *args: Any) -> Any:
        raise MemoryError("the view could not be made")

    monkeypatch.setattr(ViewTracker, "sync", failing)
    with pytest.raises(MemoryError):
        session.prepare(messages[:15])
    monkeypatch.setattr(ViewTracker, "sync", sync)
    for end in (15, len(messages)):
        assert session.prepare(messages[:end]) == prepare(messages[:end], config=config)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_replaced_earlier_message_starts_a_provider_session_over(fmt: str) -> None:
    messages = BUILDERS[fmt](10)
    config = Config(prompt=TIGHT)
    session = Session(config=config)
    session.prepare(messages[:20])
    edited = copy.deepcopy(messages)
    edited[0] = {**edited[0], "content": "a different task"}
    for end in (24, len(edited)):
        assert session.prepare(edited[:end]) == prepare(edited[:end], config=config)
