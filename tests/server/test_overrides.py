"""What a request may configure, on a real daemon (docs/RELIABILITY.md, "What a client
may configure").

Nothing a client sends names code: a ``tokenizer`` in a request's ``config`` is
``-32602`` naming the key, in a session round too, and nothing runs; a strategy
name selects only what the operator installed. Numbers past their bounds are
``-32602``, never an internal error; the operator's own tokenizer runs in a
worker thread, like a plugin.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import scoutd
from scoutd import protocol
from scoutd.server import workers

from ..support.daemon import InProcessDaemon, conversation
from ..test_overrides import witness_chat

CALLED: list[str] = []


def counting(text: str) -> int:
    """The operator's tokenizer in these tests: characters, and which thread counted."""
    CALLED.append(threading.current_thread().name)
    return len(text)


@pytest.fixture
def daemon() -> Iterator[InProcessDaemon]:
    with InProcessDaemon() as started:
        yield started


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


def test_a_tokenizer_from_the_wire_is_refused_and_never_runs(daemon: InProcessDaemon) -> None:
    """``os:mkdir`` as a tokenizer would make the witness directory (it used to, then
    answer ``-32603``); refused with ``-32602`` naming the key, nothing imported."""
    witness = Path(daemon.dir) / "ran"
    messages = witness_chat(witness)
    overrides = {"tokenizer": "os:mkdir"}
    with daemon.connect() as c:
        for params in (
            {"messages": messages, "config": overrides},
            {"messages": messages, "config": overrides, "strategies": "shorten_tools_cost_aware"},
            {"messages": messages, "config": {**overrides, "epoch_size": 3}, "answer": "indices"},
        ):
            error = error_of(c.call("prepare_prompt", params))
            assert error["code"] == protocol.INVALID_PARAMS, error
            assert "per-call override of tokenizer refused" in error["message"]
            assert error["data"]["path"] == "$.params.config"
        save_file = os.path.join(daemon.dir, "agent.chat")
        session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        round_params = {"session": session, "messages": messages, "config": overrides}
        error = error_of(c.call("prepare_prompt", round_params))
        assert error["code"] == protocol.INVALID_PARAMS
        assert "result" in c.call("prepare_prompt", {"session": session, "messages": messages})
    with scoutd.Client(daemon.socket_path) as client:
        # the client refuses before sending, a mapping or a PromptConfig naming code
        for config in (overrides, scoutd.PromptConfig(tokenizer="os:mkdir")):
            with pytest.raises(scoutd.ConfigError, match="tokenizer refused"):
                client.prepare(messages, config=config)
        # a PromptConfig without one sends no tokenizer: the daemon's own applies
        assert client.prepare(messages, config=scoutd.PromptConfig()).messages
    assert not witness.exists()
    assert "Traceback" not in daemon.log()


def test_a_strategy_name_never_names_a_module(daemon: InProcessDaemon) -> None:
    """Names select among the built-ins, the entry points and the [plugins] table."""
    witness = Path(daemon.dir) / "ran"
    messages = witness_chat(witness)
    with daemon.connect() as c:
        for params in (
            {"messages": messages, "strategies": "os:mkdir"},
            {"messages": messages, "strategies": ["os.mkdir"]},
            {"messages": messages, "config": {"prompt_strategies": "os:mkdir,inbox"}},
        ):
            error = error_of(c.call("prepare_prompt", params))
            assert error["code"] == protocol.UNKNOWN_STRATEGY, error
    assert not witness.exists()


@pytest.mark.parametrize(
    ("config", "key"),
    [
        # the window grows at every epoch: the ratio multiplies the growth
        (
            {"epoch_increment_compacted_growth_ratio": 1e308},
            "epoch_increment_compacted_growth_ratio",
        ),
        ({"epoch_increment_compacted_growth_ratio": 1e7}, "epoch_increment_compacted_growth_ratio"),
        ({"context_window": 10**400}, "context_window"),
        ({"chars_per_token": 5e-324}, "chars_per_token"),
        ({"cache_write_price": 1e308}, "cache_write_price"),
        ({"compaction_notice": "n" * (64 * 1024 + 1)}, "compaction_notice"),
    ],
)
def test_numbers_past_their_bounds_are_invalid_params(
    daemon: InProcessDaemon, config: dict[str, Any], key: str
) -> None:
    """They used to be ``-32603`` with a traceback (OverflowError) or to be served."""
    growing = {"epoch_tool_call_threshold": 5, "epoch_size": 2}
    growing |= {"epoch_increment_epochs_per_increase": 1}
    messages = conversation(40)
    with daemon.connect() as c:
        for strategies in ("shorten_tools_epoch_increment", "shorten_tools_cost_aware"):
            params = {"messages": messages, "strategies": strategies, "config": growing | config}
            error = error_of(c.call("prepare_prompt", params))
            assert error["code"] == protocol.INVALID_PARAMS, error
            assert key in error["message"]
    assert "Traceback" not in daemon.log()


def test_an_anthropic_block_whose_type_is_not_a_string(daemon: InProcessDaemon) -> None:
    """The cache hint skips it (it hashed the type: ``-32603``) and marks the block before."""
    for odd in (["text"], {"type": "text"}):
        messages = [
            {"role": "user", "content": "hello"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "hi"}, {"type": odd, "text": "x"}],
            },
        ]
        params = {"messages": messages, "format": "anthropic", "cache_control": True}
        params["strategies"] = "none"
        with daemon.connect() as c:
            result = c.call("prepare_prompt", params)["result"]
        blocks = result["messages"][1]["content"]
        assert blocks[0]["cache_control"] == {"type": "ephemeral"}
        assert blocks[1] == {"type": odd, "text": "x"}
    assert "Traceback" not in daemon.log()


def test_the_operators_tokenizer_runs_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tokenizer is code that may take any time: never on the event loop."""
    inline: list[bool] = []
    run_prepare = workers.run_prepare

    def recording(*args: Any) -> Any:
        inline.append(threading.current_thread() is threading.main_thread())
        return run_prepare(*args)

    monkeypatch.setattr(workers, "run_prepare", recording)
    CALLED.clear()
    with InProcessDaemon(prompt={"tokenizer": f"{__name__}:counting"}) as d, d.connect() as c:
        reply = c.call("prepare_prompt", {"messages": conversation(3)})
    assert "result" in reply, reply
    assert CALLED and all(name.startswith("AnyIO worker thread") for name in CALLED)
    assert inline == [False]


def test_a_call_names_at_most_32_strategies(daemon: InProcessDaemon) -> None:
    """Each name runs over the whole conversation: 5,000 names in a 184 KB request
    cost 5.8 s of CPU (a 64 MiB request, hours). Now more than 32 are refused, in
    the request's ``strategies``, in a ``prompt_strategies`` override and in a
    session round, before anything runs; 32 are served."""
    messages = conversation(20)
    many = ["shorten_tools"] * 33
    with daemon.connect() as c:
        error = error_of(c.call("prepare_prompt", {"messages": messages, "strategies": many}))
        assert error["code"] == protocol.CONFIG_INVALID
        assert error["message"] == "33 strategies named: at most 32"
        override = {"prompt_strategies": ",".join(many)}
        error = error_of(c.call("prepare_prompt", {"messages": messages, "config": override}))
        assert error["code"] == protocol.INVALID_PARAMS
        assert "33 strategies named: at most 32" in error["message"]
        save_file = os.path.join(daemon.dir, "many.chat")
        session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        error = error_of(
            c.call("prepare_prompt", {"session": session, "messages": messages, "strategies": many})
        )
        assert error["code"] == protocol.CONFIG_INVALID
        served = c.call("prepare_prompt", {"messages": messages, "strategies": many[:32]})
        assert len(served["result"]["report"]) == 32
    assert "Traceback" not in daemon.log()
