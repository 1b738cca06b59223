"""scoutd.Session: every round equals scoutd.prepare over the same conversation."""

from __future__ import annotations

import copy
import os
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd import Aborted, Session, prepare
from scoutd.config import Config, PromptConfig
from scoutd.engine.incremental import SessionPrompt
from scoutd.engine.session import SessionClosed
from scoutd.errors import InvalidMessages
from scoutd.strategies.inbox import write_abort, write_notice

from .strategies.conversations import agent_conversations, agent_run, call, conversations, output
from .strategies.test_properties import SMALL

EPOCH_DEFAULT = PromptConfig(prompt_strategies=("shorten_tools_epoch_increment", "inbox"))
# The cost-aware default with a window small enough that test conversations get compacted.
COST_SMALL = PromptConfig(
    context_window=1200,
    cost_full_tool_outputs=2,
    cost_compacted_tool_calls=3,
    compaction_trigger_share=0.2,
)
CONFIGS = {
    "small": Config(prompt=SMALL),
    "epoch": Config(prompt=EPOCH_DEFAULT),
    "default": Config(prompt=PromptConfig()),
    "cost": Config(prompt=COST_SMALL),
}
STRATEGIES = [
    None,  # the configured list: the default strategies for "default" and "small"
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment,inbox",
    "shorten_tools_epoch,shorten_tools",
    "shorten_tools_cost_aware,inbox",
    "shorten_tools",
]


def _edit(message: Any) -> Any:
    """A replaced version of ``message``: a new object that differs from it."""
    if isinstance(message, dict):
        changed = dict(message)
        content = changed.get("content")
        changed["content"] = (content + " (edited)") if isinstance(content, str) else "edited"
        return changed
    return {"role": "user", "content": f"replaced {message!r}"}


# A round: how far the conversation grows, then an optional change of an earlier
# message (replaced, removed) as a framework that rewrites its history does.
_rounds = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=400),
        st.sampled_from(["grow", "grow", "grow", "replace", "remove", "copy"]),
        st.integers(min_value=0, max_value=400),
    ),
    min_size=1,
    max_size=10,
)


def _play(
    messages: list[Any], rounds: list[tuple[int, str, int]], strategies: str | None, config: str
) -> None:
    snapshot = CONFIGS[config]
    session = Session(strategies=strategies, config=snapshot)
    conversation: list[Any] = []
    for cut, change, where in rounds:
        end = max(min(cut, len(messages)), len(conversation))
        conversation = conversation + messages[len(conversation) : end]
        if conversation and change == "replace":
            at = where % len(conversation)
            conversation = [*conversation[:at], _edit(conversation[at]), *conversation[at + 1 :]]
        elif conversation and change == "remove":
            at = where % len(conversation)
            conversation = conversation[:at] + conversation[at + 1 :]
        elif change == "copy":  # equal messages that are new objects: nothing changed
            conversation = copy.deepcopy(conversation)
        got = session.prepare(conversation)
        expected = prepare(conversation, strategies, config=snapshot)
        assert got.messages == expected.messages
        assert got.report == expected.report
    final = session.prepare(messages)
    assert final.messages == prepare(messages, strategies, config=snapshot).messages


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(max_pairs=60),
    rounds=_rounds,
    strategies=st.sampled_from(STRATEGIES),
    config=st.sampled_from(sorted(CONFIGS)),
)
def test_every_round_equals_prepare(
    messages: list[Any], rounds: list[tuple[int, str, int]], strategies: str | None, config: str
) -> None:
    _play(messages, rounds, strategies, config)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=agent_conversations(max_steps=70),
    rounds=_rounds,
    strategies=st.sampled_from(STRATEGIES[:5]),
)
def test_agent_like_rounds_equal_prepare(
    messages: list[Any], rounds: list[tuple[int, str, int]], strategies: str | None
) -> None:
    _play(messages, rounds, strategies, "small")


def test_a_long_run_pair_by_pair_equals_prepare_and_reuses_rewrites() -> None:
    run = agent_run(150, repeat_every=7)
    session = Session(config=CONFIGS["epoch"])
    for end in range(2, len(run) + 1, 2):
        got = session.prepare(run[:end])
        assert got.messages == prepare(run[:end], config=CONFIGS["epoch"]).messages
    rewrites = session._state.rewrites
    # each shortened message was computed once, then served from memory
    assert rewrites.hits > 0
    assert rewrites.misses <= len(run)


def test_cost_aware_rounds_replay_only_what_is_new() -> None:
    """The default strategies, compacting: equal to prepare(), and most rounds extend the last."""
    run = agent_run(120, repeat_every=9, output_size=300)
    config = Config(prompt=msgspec.structs.replace(COST_SMALL, context_window=3000))
    state = SessionPrompt()
    reused = compacted = 0
    for end in range(4, len(run) + 1, 2):
        state.extend(run[end - 2 : end] if end > 4 else run[:end])
        got, stable = state.prepare(None, config)
        expected = prepare(run[:end], config=config)
        assert (got.messages, got.report) == (expected.messages, expected.report)
        reused += stable > 0
        compacted += got.report[0].outputs_dropped > 0
    rounds = (len(run) - 4) // 2 + 1
    assert compacted > rounds // 2  # the window is small: most rounds are compacted
    assert reused > rounds // 2  # and most of them only extend the previous prompt
    assert state._last is not None and state._last.planner is not None
    assert state._last.planner.replay.rounds == 120  # each round was replayed once


def test_a_replaced_earlier_message_recomputes_the_prompt() -> None:
    run = agent_run(90)
    session = Session(config=CONFIGS["epoch"])
    session.prepare(run)
    edited = list(run)
    edited[5] = output("read_file", "new text " * 80, edited[5]["content"])
    got = session.prepare(edited)
    assert got.messages == prepare(edited, config=CONFIGS["epoch"]).messages
    assert got.messages != prepare(run, config=CONFIGS["epoch"]).messages


def _json(messages: list[Any]) -> bytes:
    return msgspec.json.encode(messages)


def test_threads_sharing_a_session_take_turns_and_each_gets_its_prompt() -> None:
    """Rounds from several threads at once: each answer is ``prepare`` of its own
    conversation (without the lock they interleaved: wrong prompts, IndexError)."""
    run = agent_run(160)
    config = Config(prompt=SMALL)
    session = Session(config=config)
    rounds = [run[:n] for n in range(4, len(run), 3)]
    wanted = {len(m): _json(prepare(m, config=config).messages) for m in rounds}
    wrong: list[object] = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def play(offset: int) -> None:
        for messages in rounds[offset::2] + rounds[: offset + 1]:
            try:
                got = session.prepare_prompt(messages)
            except Exception as exc:  # an interleaved round breaks the held state
                wrong.append(exc)
                continue
            if _json(got) != wanted[len(messages)]:
                wrong.append(len(messages))

    try:
        threads = [threading.Thread(target=play, args=(i % 2,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        sys.setswitchinterval(switch)
    assert wrong == []


def _inbox_twins(tmp_path: Path) -> tuple[str, str]:
    first, second = tmp_path / "a" / "chat.json", tmp_path / "b" / "chat.json"
    for path in (first, second):
        path.parent.mkdir()
        os.mkdir(scoutd.inbox_dir(str(path)))
    return str(first), str(second)


@pytest.mark.parametrize("strategies", [None, "shorten_tools_epoch_increment,inbox"])
def test_notices_are_delivered_as_prepare_delivers_them(tmp_path: Path, strategies: str) -> None:
    mine, theirs = _inbox_twins(tmp_path)
    run = agent_run(80)
    config = CONFIGS["epoch"] if strategies else CONFIGS["default"]
    session = Session(mine, strategies=strategies, config=config)
    written = delivered = 0
    for end in range(20, len(run) + 1, 20):
        if end % 40 == 0:
            written += 1
            for save_file in (mine, theirs):
                write_notice(save_file, f"notice at {end}", name=f"n{end}")
        got = session.prepare(run[:end])
        expected = prepare(run[:end], strategies, save_file=theirs, config=config)
        assert got.messages == expected.messages
        assert got.report == expected.report
        delivered += sum(r.inbox_delivered for r in got.report)
    assert delivered == written > 0


def test_an_abort_aborts_this_round_and_every_later_one(tmp_path: Path) -> None:
    mine, _ = _inbox_twins(tmp_path)
    run = agent_run(30)
    with Session(mine, config=CONFIGS["epoch"]) as session:
        session.prepare(run[:20])
        assert not session.aborted
        write_abort(mine, "stop now")
        with pytest.raises(Aborted, match="stop now"):
            session.prepare(run)
        assert session.aborted and session.reason == "stop now"
        assert not os.path.exists(os.path.join(scoutd.inbox_dir(mine), "abort"))
        with pytest.raises(Aborted, match="stop now"):
            session.prepare(run)
    with pytest.raises(SessionClosed):
        session.prepare(run)


def test_hostile_arguments_are_refused_and_keep_the_session_usable() -> None:
    session = Session(config=CONFIGS["small"])
    with pytest.raises(TypeError):
        session.prepare("not a list")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Session(format="no such format")
    # Entries that are not objects break the message rule (docs/PROTOCOL.md,
    # "Messages") on both paths; objects malformed for their format pass through.
    odd: list[Any] = [{"role": 3}, call("x", {"p": 1}, "a"), output("x", "o", "a")]
    for bad in ([None, *odd], [*odd, "text"]):
        with pytest.raises(InvalidMessages):
            prepare(bad, config=CONFIGS["small"])
        with pytest.raises(InvalidMessages):
            session.prepare(bad)
    assert session.prepare(odd).messages == prepare(odd, config=CONFIGS["small"]).messages
    with pytest.raises(InvalidMessages):  # a bad entry in a later round, too
        session.prepare([*odd, 7])
    assert session.prepare(odd).messages == prepare(odd, config=CONFIGS["small"]).messages


def test_the_session_is_exported_as_scoutd_session() -> None:
    assert scoutd.Session is Session


def test_one_name_one_kind_of_result_everywhere() -> None:
    """``prepare_prompt`` is the message list and ``prepare`` the Prepared, on every API."""
    import typing

    from scoutd.client import AsyncSession
    from scoutd.client import Session as ClientSession

    for owner in (scoutd, Session, ClientSession, AsyncSession, scoutd.Client, scoutd.AsyncClient):
        hints = typing.get_type_hints(owner.prepare_prompt)
        assert hints["return"] == list[Any], owner
        assert typing.get_type_hints(owner.prepare)["return"] is scoutd.Prepared, owner
    messages = agent_run(12)
    with Session(config=CONFIGS["small"]) as session:
        prompt = session.prepare_prompt(messages)
        assert isinstance(prompt, list)
        assert prompt == scoutd.prepare_prompt(messages, config=CONFIGS["small"])
        assert prompt[0] is messages[0]  # a list to send as it is: no .messages to reach for
        assert session.prepare(messages) == prepare(messages, config=CONFIGS["small"])
