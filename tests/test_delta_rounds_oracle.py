"""Session rounds through the real daemon against a plain oracle, and the edges of a round.

The oracle: whatever sequence of rounds a client plays (appends with or without
``base``, empty appends, a whole conversation that replaces an earlier message
or is shorter, ``delta: false``, either delta form, failing rounds in between),
the prompt it rebuilds from the answers is, byte for byte, what
:func:`scoutd.prepare` gives for the conversation it believes the daemon holds;
each delta's checksum is the documented formula over the prompt the client
holds; and ``status`` counts exactly what that conversation holds
(docs/PROTOCOL.md, incremental sessions; docs/RELIABILITY.md).
"""

from __future__ import annotations

import json
import os
import random
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

import scoutd
from scoutd.config import Config, PromptConfig
from scoutd.delta import DeltaDecoder, DeltaMismatch, PromptDelta
from scoutd.engine.held import held_bytes
from scoutd.engine.incremental import json_size
from scoutd.testing import conversation

from .support.daemon import Daemon, LineClient, wait_for

SMALL_PROMPT: dict[str, Any] = {
    "epoch_tool_call_threshold": 3,
    "epoch_full_tool_calls": 2,
    "epoch_compacted_tool_calls": 3,
    "epoch_size": 2,
}
SMALL = Config(prompt=PromptConfig(**SMALL_PROMPT))
STRATEGIES = [None, "shorten_tools_epoch_increment", "shorten_tools", "none"]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=SMALL_PROMPT, daemon={"max_session_messages": 200}) as running:
        yield running


def _compact(value: Any) -> bytes:
    """The documented encoding of a message: compact JSON, raw UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _running_checksum(prompt: list[Any]) -> int:
    crc = 0
    for message in prompt:
        crc = zlib.crc32(_compact(message), crc)
    return crc


def _replacing_checksum(prompt: list[Any]) -> int:
    parts = b"".join(zlib.crc32(_compact(m)).to_bytes(4, "little") for m in prompt)
    return zlib.crc32(parts) if prompt else 0


def _held(messages: list[Any]) -> int:
    return held_bytes(messages, json_size(messages))


def _open(client: LineClient, daemon: Daemon, name: str, **params: Any) -> str:
    answer = client.call("session.open", {"save_file": os.path.join(daemon.dir, name), **params})
    session: str = answer["result"]["session"]
    return session


def _session_bytes(client: LineClient) -> int:
    count: int = client.call("status")["result"]["counts"]["session_bytes"]
    return count


def _source(rng: random.Random) -> list[dict[str, Any]]:
    messages = conversation(24, output_size=rng.choice([40, 300]), user_every=5, repeat_every=3)
    for message in messages:  # text the checksum formula must hold for
        if message["role"] == "user":
            message["content"] += rng.choice(["\u2028", "é", "\U0001f600", "\\", '"', "\x1f"])
    return messages


def _failing(rng: random.Random, params: dict[str, Any], held: int) -> dict[str, Any]:
    """A round refused for one of several reasons, made from the next real one."""
    bad = {k: v for k, v in params.items() if k not in ("messages", "append", "base")}
    kind = rng.choice(["base", "strategy", "size", "config"])
    if kind == "base":
        bad.update(append=[{"role": "user", "content": "x"}], base=held + 1)
    elif kind == "size":
        bad.update(append=[{}] * 300)
    else:
        bad["append"] = [{"role": "user", "content": "lost"}]
        if kind == "strategy":
            bad["strategies"] = "nope"
        else:
            bad["config"] = {"epoch_size": -1}
    return bad


@pytest.mark.parametrize("seed", range(3))
def test_random_rounds_rebuild_what_prepare_gives(daemon: Daemon, seed: int) -> None:
    rng = random.Random(seed)
    source = _source(rng)
    with daemon.connect() as client:
        session = _open(client, daemon, f"oracle{seed}.chat")
        held: list[Any] = []  # the conversation the daemon holds, as this client knows it
        decoder: DeltaDecoder | None = None
        strategies = rng.choice(STRATEGIES)
        for _ in range(18):
            replacing = rng.random() < 0.5
            params: dict[str, Any] = {"session": session, "delta": True}
            if replacing:
                params["delta_replace"] = True
            op = rng.choice(["append", "append", "append", "nobase", "empty", "whole", "edit"])
            if op == "whole" and rng.random() < 0.3:
                strategies = rng.choice(STRATEGIES)
            if strategies is not None:
                params["strategies"] = strategies
            if op in ("append", "nobase", "empty"):
                new = [] if op == "empty" else source[len(held) : len(held) + rng.randint(1, 5)]
                params["append"] = new
                if op != "nobase":
                    params["base"] = len(held)
                conversation_now = held + new
            elif op == "whole":  # any prefix of the source: shorter, equal or longer
                conversation_now = source[: rng.randint(0, len(source))]
                params["messages"] = conversation_now
            else:  # an earlier message replaced, sent whole (sometimes asking no delta)
                conversation_now = list(held)
                if conversation_now:
                    at = rng.randrange(len(conversation_now))
                    conversation_now[at] = {"role": "user", "content": f"edited {at} \u2028"}
                params["messages"] = conversation_now
                if rng.random() < 0.4:
                    params["delta"] = False
                    params.pop("delta_replace", None)
            if rng.random() < 0.25:
                refused = client.call("prepare_prompt", _failing(rng, params, len(held)))
                assert "error" in refused
                assert _session_bytes(client) == _held(held)  # no drift after an error
            answer = client.call("prepare_prompt", params)
            assert "error" not in answer, answer
            result = answer["result"]
            held = conversation_now
            if "messages" in result:
                got, decoder = result["messages"], None
            else:
                if decoder is None or decoder.replacing != replacing:
                    assert result["keep"] == 0  # a form switch starts over
                    decoder = DeltaDecoder(replacing=replacing)
                kept = decoder.prompt[: result["keep"]]
                checksum = _replacing_checksum if replacing else _running_checksum
                assert result["checksum"] == checksum(kept)
                got = decoder.apply(result)
            expected = scoutd.prepare(held, strategies, config=SMALL).messages
            assert _compact(got) == _compact(expected)
            assert _session_bytes(client) == _held(held)


def test_an_opened_conversation_belongs_to_the_connection_that_opened_it(daemon: Daemon) -> None:
    """``session.open`` with ``messages`` sets the conversation: an ``append`` from
    another connection of the uid is refused at ``$.params.base`` (docs/PROTOCOL.md,
    "a session's conversation also belongs to the connection that set it last"),
    never prepared on the opener's messages; the opener goes on."""
    run = conversation(4, output_size=50, user_every=0)
    with daemon.connect() as owner, daemon.connect() as other:
        session = _open(owner, daemon, "opened.chat", messages=run[:6])
        theirs = {"role": "user", "content": "another client's message"}
        answer = other.call(
            "prepare_prompt", {"session": session, "append": [theirs], "base": 6, "delta": True}
        )
        assert answer["error"]["code"] == -32602
        assert answer["error"]["data"]["path"] == "$.params.base"
        assert answer["error"]["data"]["messages"] == 6
        result = owner.call(
            "prepare_prompt", {"session": session, "append": run[6:], "base": 6, "delta": True}
        )["result"]
        assert DeltaDecoder().apply(result) == scoutd.prepare(run, config=SMALL).messages


def test_a_connection_that_sends_the_conversation_gets_its_prompt_whole(
    daemon: Daemon,
) -> None:
    """A second connection of the uid that sends the whole conversation as
    ``messages`` never received the session's last prompt: its answer's delta
    carries everything (``keep`` 0). It was a delta of the other connection's
    prompt (``keep`` 22), which it could not apply."""
    run = conversation(6, output_size=50, user_every=0)
    with daemon.connect() as owner, daemon.connect() as other:
        session = _open(owner, daemon, "taken.chat")
        first = {"session": session, "messages": run[:8], "delta": True, "config": SMALL_PROMPT}
        DeltaDecoder().apply(owner.call("prepare_prompt", first)["result"])
        whole = {"session": session, "messages": run, "delta": True, "config": SMALL_PROMPT}
        result = other.call("prepare_prompt", whole)["result"]
        assert result["keep"] == 0
        assert DeltaDecoder().apply(result) == scoutd.prepare(run, config=SMALL).messages


def test_an_append_after_idle_forget_names_no_python_value() -> None:
    """After ``session_idle_timeout`` an ``append`` is refused at ``$.params.base``; without
    ``base`` the message says what to do, never "not None"."""
    run = conversation(3, output_size=50, user_every=0)
    with Daemon(daemon={"session_idle_timeout": 0.05}) as running, running.connect() as client:
        session = _open(client, running, "idle.chat")
        client.call("prepare_prompt", {"session": session, "messages": run, "strategies": "none"})

        def forgotten() -> bool:
            return _session_bytes(client) == 0

        wait_for(forgotten, 5.0, "the idle conversation to be dropped")
        refused: list[dict[str, Any]] = [{"append": []}, {"append": run[:1], "base": len(run)}, {}]
        for params in refused:
            error = client.call("prepare_prompt", {"session": session, **params})["error"]
            assert error["data"]["path"] == "$.params.base"
            assert "None" not in error["message"] and "None" not in error["data"]["error"]
            assert "dropped when idle" in error["message"]
            assert error["data"]["error"] == (
                "the session holds no conversation (dropped when idle):"
                " send the whole conversation as `messages`"
            )
        whole = client.call("prepare_prompt", {"session": session, "messages": run})
        assert whole["result"]["messages"] == scoutd.prepare(run).messages


@pytest.mark.parametrize("replacing", [False, True], ids=["running", "replacing"])
@pytest.mark.parametrize("keep", [-1, -2, -3, -50])
def test_a_negative_keep_never_applies(replacing: bool, keep: int) -> None:
    """A delta is the first ``keep`` messages then ``append``: a negative ``keep`` is
    no delta of the held prompt (a daemon never sends one), whatever its checksum;
    the receiver refuses it with :class:`DeltaMismatch` and keeps its prompt."""
    held = [{"role": "user", "content": c} for c in "abc"]
    for checksum in {0, _running_checksum(held[:keep]), _replacing_checksum(held[:keep])}:
        decoder = DeltaDecoder(replacing=replacing)
        decoder.full(held)
        delta = PromptDelta(
            keep=keep,
            append=[{"role": "user", "content": "x"}],
            checksum=checksum,
            replace=[] if replacing else None,
        )
        with pytest.raises(DeltaMismatch):
            decoder.apply(delta)
        assert decoder.prompt == held
        again = PromptDelta(
            keep=3,
            append=[],
            checksum=(_replacing_checksum if replacing else _running_checksum)(held),
            replace=[] if replacing else None,
        )
        assert decoder.apply(again) == held
