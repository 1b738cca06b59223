"""Incremental sessions through the real daemon: append in, delta out, same prompt."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.config import Config, PromptConfig
from scoutd.delta import DeltaDecoder
from scoutd.engine.held import held_bytes
from scoutd.engine.incremental import json_size

from .strategies.conversations import agent_run, call, conversations, output
from .support.daemon import Daemon, LineClient, wait_for

SMALL_PROMPT = {
    "epoch_tool_call_threshold": 3,
    "epoch_full_tool_calls": 2,
    "epoch_compacted_tool_calls": 3,
    "epoch_size": 2,
    "epoch_increment_epochs_per_increase": 1,
    "epoch_increment_size_increase": 1,
    "epoch_increment_repeat_increase": 2,
    "epoch_increment_max_size": 6,
}
SMALL = Config(prompt=PromptConfig(**SMALL_PROMPT))


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=SMALL_PROMPT, daemon={"max_session_messages": 5000}) as running:
        yield running


def _open(client: LineClient, daemon: Daemon, name: str = "agent.chat") -> str:
    answer = client.call("session.open", {"save_file": os.path.join(daemon.dir, name)})
    session: str = answer["result"]["session"]
    return session


def _round(client: LineClient, params: dict[str, Any]) -> dict[str, Any]:
    answer = client.call("prepare_prompt", params)
    assert "error" not in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    messages=conversations(max_pairs=50),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
    strategies=st.sampled_from([None, "shorten_tools_epoch", "shorten_tools_epoch,shorten_tools"]),
)
@pytest.mark.parametrize("replacing", [False, True], ids=["running", "replacing"])
def test_deltas_rebuild_exactly_the_full_computation(
    daemon: Daemon, replacing: bool, messages: list[Any], cuts: list[int], strategies: str | None
) -> None:
    """Growth by random chunks, either form of delta: every applied delta equals
    prepare() on the whole."""
    messages = [m for m in messages if isinstance(m, dict)]  # the wire takes objects only
    with daemon.connect() as client:
        session = _open(client, daemon)
        prompt = DeltaDecoder(replacing=replacing)
        ends = sorted({min(cut, len(messages)) for cut in cuts} | {len(messages)})
        start = 0
        for end in ends:
            params: dict[str, Any] = {
                "session": session,
                "append": messages[start:end],
                "base": start,
                "delta": True,
            }
            if replacing:
                params["delta_replace"] = True
            if strategies is not None:
                params["strategies"] = strategies
            result = _round(client, params)
            got = prompt.apply(result)
            expected = scoutd.prepare(messages[:end], strategies, config=SMALL)
            assert got == expected.messages
            start = end


def test_inside_an_epoch_the_answer_is_just_the_new_pair() -> None:
    """Default epochs (20 outputs): only the round that moves the epoch resends more."""
    run = agent_run(120)
    epochs = "shorten_tools_epoch_increment,inbox"  # the strategy whose epochs are measured
    with Daemon(prompt={"prompt_strategies": epochs}) as running, running.connect() as client:
        session = _open(client, running)
        start = 2 + 2 * 60  # 60 pairs: past the threshold (50), inside the epoch 50..70
        prompt = DeltaDecoder()
        prompt.apply(_round(client, {"session": session, "messages": run[:start], "delta": True}))
        small_answers = 0
        for end in range(start + 2, len(run) + 1, 2):
            result = _round(
                client,
                {"session": session, "append": run[end - 2 : end], "base": end - 2, "delta": True},
            )
            assert prompt.apply(result) == scoutd.prepare_prompt(run[:end], epochs)
            if result["append"] == run[end - 2 : end]:
                small_answers += 1
        # 60 rounds; the epoch moves at 71, 91 and 111 outputs
        assert small_answers == 60 - 3


def test_a_wrong_base_is_refused_and_names_the_length(daemon: Daemon) -> None:
    with daemon.connect() as client:
        session = _open(client, daemon)
        _round(client, {"session": session, "messages": agent_run(3)})
        answer = client.call(
            "prepare_prompt", {"session": session, "append": [], "base": 99, "delta": True}
        )
        error = answer["error"]
        assert error["code"] == -32602
        assert error["data"]["path"] == "$.params.base"
        assert error["data"]["messages"] == 8


@pytest.mark.parametrize(
    "params",
    [
        {"append": []},
        {"delta": True, "messages": []},
        {"session": "x", "messages": [], "append": []},
    ],
)
def test_session_only_fields_are_validated(daemon: Daemon, params: dict[str, Any]) -> None:
    with daemon.connect() as client:
        assert client.call("prepare_prompt", params)["error"]["code"] == -32602


def test_session_open_may_carry_the_conversation(daemon: Daemon) -> None:
    run = agent_run(12)
    with daemon.connect() as client:
        answer = client.call(
            "session.open", {"save_file": os.path.join(daemon.dir, "b.chat"), "messages": run}
        )
        session = answer["result"]["session"]
        result = _round(client, {"session": session, "append": [], "base": len(run)})
        assert result["messages"] == scoutd.prepare_prompt(run, config=SMALL)


def test_session_message_limit() -> None:
    with Daemon(daemon={"max_session_messages": 10}) as small, small.connect() as client:
        session = _open(client, small)
        _round(client, {"session": session, "messages": agent_run(3)})  # 8 messages
        answer = client.call(
            "prepare_prompt", {"session": session, "append": agent_run(1), "base": 8}
        )
        assert answer["error"]["code"] == -32004
        assert answer["error"]["data"] == {"limit": 10, "key": "max_session_messages"}
        # nothing was appended: the session still holds 8 messages
        _round(client, {"session": session, "append": [], "base": 8})


def test_session_byte_limit() -> None:
    """``max_session_bytes`` bounds what a session's stored conversation holds in
    memory (its JSON twice, plus a share per JSON value: ``held_bytes``), at open,
    on replace and on append; a refused request leaves the session as it was."""

    def held(*messages: Any) -> int:
        return held_bytes(messages, json_size(messages))

    def user(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    first, bare, filler = user("é" * 60), {"role": "tool"}, user("x" * 100)
    limit = held(first, bare, filler)
    assert held(first, bare) + held(filler) == limit  # it adds up, append by append
    with Daemon(daemon={"max_session_bytes": limit}) as small, small.connect() as client:
        save_file = os.path.join(small.dir, "limit.chat")
        too_much = [user("é" * 1000)]
        assert held(*too_much) > limit
        answer = client.call("session.open", {"save_file": save_file, "messages": too_much})
        assert (answer["error"]["code"], answer["error"]["data"]) == (
            -32004,
            {"limit": limit, "key": "max_session_bytes"},
        )
        session = _open(client, small)
        assert held(first, first, first) > limit
        answer = client.call(
            "prepare_prompt", {"session": session, "messages": [first, first, first]}
        )
        assert (answer["error"]["code"], answer["error"]["data"]["limit"]) == (-32004, limit)
        _round(client, {"session": session, "messages": [first, bare]})
        for _ in range(3):  # empty appends add nothing
            _round(client, {"session": session, "append": [], "base": 2})
        _round(client, {"session": session, "append": [filler], "base": 2})  # exactly the limit
        answer = client.call(
            "prepare_prompt", {"session": session, "append": [user("")], "base": 3}
        )
        assert (answer["error"]["code"], answer["error"]["data"]["limit"]) == (-32004, limit)
        result = _round(client, {"session": session, "append": [], "base": 3})
        assert result["messages"] == [first, bare, filler]
        assert small.status()["counts"]["session_bytes"] == limit


def test_client_session_is_incremental_and_transparent(daemon: Daemon) -> None:
    run = agent_run(30)
    with (
        scoutd.Client(daemon.socket_path) as client,
        client.session(os.path.join(daemon.dir, "c.chat")) as session,
    ):
        conversation: list[Any] = []
        for end in range(2, len(run) + 1, 2):
            conversation.extend(run[end - 2 : end])
            params = session._conversation.params(conversation, None, None, whole=False)
            if end > 2:
                assert params.messages is None and params.base == end - 2
            assert session.prepare_prompt(conversation) == scoutd.prepare_prompt(
                conversation, config=SMALL
            )
        # An equal copy in place of a sent message changes nothing the daemon holds...
        sent = session._conversation
        copied = [*conversation[:-1], dict(conversation[-1])]
        sent.check(copied, sent.params(copied, None, None, whole=False))
        assert not sent.stale
        # ...an edited history is noticed (a sent message's values differ): all resent.
        edited = [*conversation[:-1], {**conversation[-1], "content": "edited"}]
        sent.check(edited, sent.params(edited, None, None, whole=False))
        assert sent.stale
        assert session.prepare_prompt(edited) == scoutd.prepare_prompt(edited, config=SMALL)


def test_redeliver_repeats_the_notices_of_the_last_answer(daemon: Daemon) -> None:
    """``redeliver``: the notices of the session's previous answer come again,
    first, as often as it is asked; without it, only what the inbox holds now."""
    client = LineClient(daemon.socket_path)
    with client:
        session = _open(client, daemon, "redeliver.chat")
        save_file = os.path.join(daemon.dir, "redeliver.chat")
        task = [{"role": "user", "content": "task"}]
        strategies = ["none", "inbox"]
        scoutd.write_notice(save_file, "first notice")
        first = _round(client, {"session": session, "messages": task, "strategies": strategies})
        assert first["messages"] == [*task, {"role": "user", "content": "first notice"}]
        scoutd.write_notice(save_file, "second notice")
        again = {"session": session, "messages": task, "strategies": strategies, "redeliver": True}
        notices = [{"role": "user", "content": f"{n} notice"} for n in ("first", "second")]
        assert _round(client, again)["messages"] == [*task, *notices]
        assert _round(client, again)["messages"] == [*task, *notices]
        plain = {"session": session, "append": [], "base": 1, "strategies": strategies}
        assert _round(client, plain)["messages"] == task
        assert _round(client, again)["messages"] == task  # the last answer had none
        refused = client.call("prepare_prompt", {"messages": task, "redeliver": True})
        assert refused["error"]["code"] == -32602


def test_client_recovers_when_the_daemon_forgot_the_conversation() -> None:
    """After session_idle_timeout the stored conversation is dropped; the client resends."""
    with Daemon(prompt=SMALL_PROMPT, daemon={"session_idle_timeout": 0.2}) as running:
        run = agent_run(10)
        with (
            scoutd.Client(running.socket_path) as client,
            client.session(os.path.join(running.dir, "d.chat")) as session,
        ):
            assert session.prepare_prompt(run[:10]) == scoutd.prepare_prompt(run[:10], config=SMALL)
            wait_for(
                lambda: "dropped the stored conversation of 1 idle session" in running.log(),
                10.0,
                "the idle session's conversation to be dropped",
            )
            grown = run[:12]
            assert session.prepare_prompt(grown) == scoutd.prepare_prompt(grown, config=SMALL)


@pytest.mark.anyio
async def test_async_session_is_incremental(daemon: Daemon) -> None:
    run = agent_run(20)
    repeat = [call("read_file", {"path": "/src/3.py", "q": "x" * 250}, "r"), output("x", "y", "r")]
    async with (
        scoutd.AsyncClient(daemon.socket_path) as client,
        client.session(os.path.join(daemon.dir, "e.chat")) as session,
    ):
        conversation: list[Any] = []
        for chunk in (run[:10], run[10:30], repeat, run[30:]):
            conversation.extend(chunk)
            got = await session.prepare_prompt(conversation)
            assert got == scoutd.prepare_prompt(conversation, config=SMALL)


def test_an_append_after_the_conversation_was_dropped_is_refused_not_prepared_alone() -> None:
    """``base`` is optional: an ``append`` without it, after the idle sweep dropped the
    conversation, was prepared on the appended messages alone (another prompt, no
    error). It is refused at ``$.params.base`` as a wrong ``base`` is, and the
    session keeps the format it was opened with."""
    with Daemon(prompt=SMALL_PROMPT, daemon={"session_idle_timeout": 0.2}) as running:
        run = agent_run(10)
        with running.connect() as c:
            opened = c.call(
                "session.open",
                {"save_file": os.path.join(running.dir, "f.chat"), "format": "openai-chat"},
            )
            sid = opened["result"]["session"]
            first = c.call("prepare_prompt", {"session": sid, "messages": run[:10]})
            assert "result" in first, first
            wait_for(
                lambda: "dropped the stored conversation of 1 idle session" in running.log(),
                10.0,
                "the idle session's conversation to be dropped",
            )
            refused = c.call("prepare_prompt", {"session": sid, "append": run[10:12]})
            assert refused["error"]["code"] == -32602, refused
            assert refused["error"]["data"]["path"] == "$.params.base"
            again = c.call("prepare_prompt", {"session": sid, "messages": run[:12]})
            assert again["result"]["messages"] == scoutd.prepare_prompt(
                run[:12], config=SMALL, format="openai-chat"
            )
            assert "result" in c.call("prepare_prompt", {"session": sid, "append": run[12:14]})
