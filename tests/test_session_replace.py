"""Replacing deltas through the real daemon and the real clients (docs/PROTOCOL.md,
incremental sessions): a repeat-heavy run whose protected call moves, every round
equal to the full computation, single messages replaced instead of the tail."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import anyio
import msgspec
import pytest

import scoutd
from scoutd import protocol
from scoutd.client._common import SentConversation, SessionAnswer
from scoutd.config import Config, PromptConfig
from scoutd.delta import DeltaDecoder
from scoutd.protocol.error_table import about_replace, exception_for
from scoutd.simulate.workload import round_ends, synthetic_run
from scoutd.strategies.report import StrategyReport

from .support.daemon import Daemon

# Small epochs, so that repeated calls move the protection every few rounds.
PROMPT = {
    "prompt_strategies": ["shorten_tools_epoch_increment"],
    "epoch_tool_call_threshold": 3,
    "epoch_full_tool_calls": 2,
    "epoch_compacted_tool_calls": 3,
    "epoch_size": 2,
    "epoch_increment_epochs_per_increase": 1,
    "epoch_increment_size_increase": 1,
    "epoch_increment_repeat_increase": 2,
    "epoch_increment_max_size": 6,
}
CONFIG = Config(prompt=PromptConfig(**PROMPT))  # type: ignore[arg-type]
RUN = synthetic_run(80, seed=3, repeat_rate=0.6).messages


class OlderParams(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``prepare_prompt`` params as a daemon older than ``delta_replace`` decodes them."""

    session: str | None = None
    messages: list[dict[str, Any]] | None = None
    append: list[dict[str, Any]] | None = None
    base: int | None = None
    delta: bool = False


def _rounds() -> list[list[dict[str, Any]]]:
    return [RUN[:end] for end in round_ends(RUN)]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT) as running:
        yield running


def test_the_wire_answer_replaces_single_messages(daemon: Daemon) -> None:
    """Raw requests: with ``delta_replace`` some rounds replace messages and keep
    the tail; without it the answer has the running form, as before."""
    for replacing in (True, False):
        with daemon.connect() as client:
            save_file = os.path.join(daemon.dir, f"wire-{replacing}.chat")
            session = client.call("session.open", {"save_file": save_file})["result"]["session"]
            decoder = DeltaDecoder(replacing=replacing)
            sent = 0
            replaced_rounds = 0
            for conversation in _rounds():
                params: dict[str, Any] = {
                    "session": session,
                    "append": conversation[sent:],
                    "base": sent,
                    "delta": True,
                }
                if replacing:
                    params["delta_replace"] = True
                answer = client.call("prepare_prompt", params)
                result = answer["result"]
                assert ("replace" in result) == replacing
                replaced_rounds += bool(result.get("replace"))
                expected = scoutd.prepare_prompt(conversation, config=CONFIG)
                assert decoder.apply(result) == expected
                sent = len(conversation)
            assert (replaced_rounds > 0) == replacing


def test_sync_client_sessions_equal_the_full_computation(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "sync.chat")
    with scoutd.Client(daemon.socket_path, timeout=30) as client, client.session(save_file) as s:
        for conversation in _rounds():
            expected = scoutd.prepare_prompt(conversation, config=CONFIG)
            assert s.prepare_prompt(conversation) == expected


def test_async_client_sessions_equal_the_full_computation(daemon: Daemon) -> None:
    async def run() -> None:
        async with scoutd.AsyncClient(daemon.socket_path, timeout=30) as client:
            save_file = os.path.join(daemon.dir, "async.chat")
            async with client.session(save_file) as session:
                for conversation in _rounds():
                    expected = scoutd.prepare_prompt(conversation, config=CONFIG)
                    with anyio.fail_after(30):
                        assert await session.prepare_prompt(conversation) == expected

    anyio.run(run)


def test_the_refusal_of_an_older_daemon_switches_to_running_deltas() -> None:
    """A daemon that predates ``delta_replace`` refuses it as an unknown field; the
    session recognises that refusal and asks for running deltas from then on."""

    conversation = SentConversation("s")
    params = conversation.params([{"role": "user", "content": "hi"}], None, None, whole=False)
    assert params.delta_replace
    line = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": 1, "method": "prepare_prompt", "params": params}
    )
    request = protocol.decode_request(line)
    with pytest.raises(protocol.ProtocolError) as refused:
        protocol.decode_params(request, OlderParams)
    error = protocol.ErrorObject(
        code=refused.value.code, message=refused.value.message, data=refused.value.data
    )
    exc = exception_for(error)
    assert isinstance(exc, scoutd.RemoteError) and about_replace(exc)
    assert conversation.refused_replace(exc)
    assert not conversation.refused_replace(exc)  # once only
    again = conversation.params([{"role": "user", "content": "hi"}], None, None, whole=False)
    assert again.delta and not again.delta_replace


def test_the_refusal_of_redeliver_drops_it_once() -> None:
    """A daemon that predates ``redeliver`` refuses it as an unknown field: the
    session asks again without it, and says what is lost."""
    conversation = SentConversation("s")
    hi = [{"role": "user", "content": "hi"}]
    report = StrategyReport(strategy="inbox", inbox_delivered=1)
    conversation.discard(SessionAnswer(report=[report], messages=hi))
    params = conversation.params(hi, None, None, whole=True)
    assert params.redeliver
    line = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": 1, "method": "prepare_prompt", "params": params}
    )
    with pytest.raises(protocol.ProtocolError) as refused:
        protocol.decode_params(protocol.decode_request(line), OlderParams)
    error = protocol.ErrorObject(
        code=refused.value.code, message=refused.value.message, data=refused.value.data
    )
    exc = exception_for(error)
    assert isinstance(exc, scoutd.RemoteError)
    assert not conversation.refused_replace(exc)
    assert conversation.refused_redeliver(exc)
    assert not conversation.refused_redeliver(exc)  # once only
    assert not conversation.params(hi, None, None, whole=True).redeliver
    # an answer without notices asks for nothing again
    conversation.discard(SessionAnswer(report=[StrategyReport(strategy="inbox")], messages=hi))
    assert not conversation.params(hi, None, None, whole=True).redeliver
