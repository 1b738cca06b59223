"""Session-less prepares answered with indices: the clients' prompt equals the whole answer.

Every test runs a real daemon subprocess. ``Client.prepare_prompt`` asks for
``"answer": "indices"`` and rebuilds the prompt from the caller's messages;
the reference is the whole answer, read off the wire by a plain line client
that does not ask for it, and the library in process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings

import scoutd
from scoutd.client import AsyncClient, Client
from scoutd.client._common import WholePrompt
from scoutd.protocol.layout import LayoutError, rebuild
from scoutd.strategies.report import StrategyReport

from ..formats import conversations as formats
from ..strategies.conversations import agent_conversations, agent_run, conversations
from ..support.daemon import Daemon
from .helpers import PROMPT, daemon_config, refusals
from .older import OlderDaemon

STRATEGIES: list[Any] = [
    None,
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment, shorten_tools",
    "none",
]

# name -> (messages, format, cache_control); each long enough to be compacted.
CONVERSATIONS: dict[str, Callable[[], tuple[list[Any], str, bool | None]]] = {
    "scout": lambda: (agent_run(70, repeat_every=6), "auto", None),
    "scout-short": lambda: (agent_run(3), "scout", None),
    "openai-chat": lambda: (formats.chat(40, parallel=2), "openai-chat", None),
    "openai-responses": lambda: (formats.responses(45), "openai-responses", None),
    "anthropic": lambda: (formats.anthropic(45), "anthropic", False),
    "anthropic-cached": lambda: (formats.anthropic(45), "anthropic", True),
}


def whole_answer(daemon: Daemon, params: dict[str, Any]) -> dict[str, Any]:
    """The result of ``prepare_prompt`` as an older client gets it (no ``answer``)."""
    with daemon.client(timeout=30) as line:
        response = line.call("prepare_prompt", {k: v for k, v in params.items() if v is not None})
    assert "result" in response, response
    result: dict[str, Any] = response["result"]
    assert "layout" not in result
    return result


def indices_answer(daemon: Daemon, params: dict[str, Any]) -> dict[str, Any]:
    """The raw result of ``prepare_prompt`` asked with ``"answer": "indices"``."""
    asked = {k: v for k, v in params.items() if v is not None}
    with daemon.client(timeout=30) as line:
        response = line.call("prepare_prompt", {**asked, "answer": "indices"})
    assert "result" in response, response
    result: dict[str, Any] = response["result"]
    return result


@pytest.mark.parametrize("strategies", STRATEGIES)
@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_both_answers_give_the_same_prompt(daemon: Daemon, name: str, strategies: Any) -> None:
    messages, format, cache = CONVERSATIONS[name]()
    params = {
        "messages": messages,
        "strategies": strategies,
        "format": format,
        "cache_control": cache,
    }
    whole = whole_answer(daemon, params)
    raw = indices_answer(daemon, params)
    assert "messages" not in raw and isinstance(raw["layout"], list)
    assert rebuild(raw["layout"], messages) == whole["messages"]
    assert raw["report"] == whole["report"]
    kwargs = {"format": format, "cache_control": cache}
    with Client(daemon.socket_path, timeout=30) as client:
        assert client.prepare_prompt(messages, strategies, **kwargs) == whole["messages"]
        prepared = client.prepare(messages, strategies, **kwargs)
        assert prepared.messages == whole["messages"]
        assert prepared == scoutd.prepare(
            messages, strategies, config=daemon_config(daemon), **kwargs
        )

    async def run() -> list[Any]:
        async with AsyncClient(daemon.socket_path, timeout=30) as client:
            with anyio.fail_after(30):
                return await client.prepare_prompt(messages, strategies, **kwargs)

    assert anyio.run(run) == whole["messages"]


def test_the_layout_names_kept_runs_and_sends_only_new_messages(daemon: Daemon) -> None:
    messages = agent_run(70, repeat_every=6)
    raw = indices_answer(daemon, {"messages": messages, "strategies": "shorten_tools_epoch"})
    layout = raw["layout"]
    runs = [item for item in layout if isinstance(item, list)]
    new = [item for item in layout if isinstance(item, dict)]
    assert runs and all(stop - start >= 2 for start, stop in runs)  # single ones are bare ints
    assert 0 < len(new) < len(messages) // 2
    assert raw["layout"][0] == [0, 2] or raw["layout"][0] == 0  # the head is kept


def test_kept_messages_are_the_callers_own_objects(daemon: Daemon) -> None:
    """As with the library in process: the prompt shares the caller's unchanged messages."""
    messages = agent_run(70)
    expected = scoutd.prepare_prompt(messages, config=daemon_config(daemon))
    with Client(daemon.socket_path, timeout=30) as client:
        got = client.prepare_prompt(tuple(messages))
    assert got == expected
    mine = {id(message) for message in messages}
    shared = [id(message) for message in got if id(message) in mine]
    assert shared == [id(message) for message in expected if id(message) in mine]
    assert len(shared) > len(got) // 2


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(messages=conversations(max_pairs=60) | agent_conversations(max_steps=60))
def test_any_conversation_gives_the_whole_answer(daemon: Daemon, messages: list[Any]) -> None:
    try:
        msgspec.json.encode(messages)
    except UnicodeEncodeError:  # a lone surrogate: no client can send it, whatever the answer
        assume(False)
    whole = whole_answer(daemon, {"messages": messages})
    with Client(daemon.socket_path, timeout=30) as client:
        prepared = client.prepare(messages)
    assert prepared.messages == whole["messages"]
    assert prepared.report == msgspec.convert(whole["report"], list[StrategyReport])


def test_a_session_call_of_the_client_still_gets_the_whole_answer(daemon: Daemon) -> None:
    """``answer`` is refused with a session; the client never sends it there."""
    messages = agent_run(40)
    save_file = os.path.join(daemon.dir, "indices.chat")
    with Client(daemon.socket_path, timeout=30) as client:
        session = client.open_session(save_file)
        try:
            got = client.prepare_prompt(messages, session=session.id)
        finally:
            session.close()
    assert got == scoutd.prepare_prompt(messages, config=daemon_config(daemon))


# --- a plugin, and a daemon older than ``answer`` (.older) ---------------------------------------

STAMP_MODULE = '''
def stamp(messages):
    """Breaks the rule that strategies leave their input alone: marks users in place."""
    for message in messages:
        if message.get("role") == "user":
            message["content"] = f"{message.get('content')} (stamped)"
    return messages
'''


def test_a_plugin_gets_the_whole_answer() -> None:
    """The daemon cannot vouch for a plugin's untouched input: it answers ``messages``."""
    daemon = Daemon(prompt=PROMPT, plugins={"stamp": "stamp:stamp"})
    with open(os.path.join(daemon.dir, "stamp.py"), "w") as handle:
        handle.write(STAMP_MODULE)
    messages = agent_run(10)
    with daemon:
        raw = indices_answer(daemon, {"messages": messages, "strategies": "stamp"})
        assert "layout" not in raw
        assert any(str(m.get("content")).endswith("(stamped)") for m in raw["messages"])
        with Client(daemon.socket_path, timeout=30) as client:
            assert client.prepare_prompt(messages, "stamp") == raw["messages"]
    assert not any(str(m.get("content")).endswith("(stamped)") for m in messages)


@pytest.fixture
def older() -> Iterator[Daemon]:
    with OlderDaemon(without=["answer"]) as daemon:
        yield daemon


def test_an_older_daemon_is_asked_once_per_connection(older: Daemon) -> None:
    messages = agent_run(50)
    with older.client(timeout=30) as line:
        refused = line.call("prepare_prompt", {"messages": messages, "answer": "indices"})
    assert refused["error"]["code"] == -32602
    assert "unknown field `answer`" in refused["error"]["data"]["error"]
    whole = whole_answer(older, {"messages": messages})["messages"]
    before = refusals(older)
    with Client(older.socket_path, timeout=30) as client:
        assert client.prepare_prompt(messages) == whole
        assert refusals(older) == before + 1  # the refusal
        assert client.prepare(messages).messages == whole
        assert client.prepare_prompt(messages) == whole
        assert refusals(older) == before + 1  # remembered for the connection
        client.reconnect()
        assert client.prepare_prompt(messages) == whole
        assert refusals(older) == before + 2  # a new connection asks again

    async def run() -> list[Any]:
        async with AsyncClient(older.socket_path, timeout=30) as client:
            with anyio.fail_after(30):
                first = await client.prepare_prompt(messages)
                assert await client.prepare_prompt(messages) == first
                return first

    assert anyio.run(run) == whole
    assert refusals(older) == before + 3


def test_an_answer_with_neither_form_is_refused() -> None:
    sent = [{"role": "user", "content": "hi"}]
    assert WholePrompt(messages=[{"role": "user", "content": "x"}]).prompt(sent) == [
        {"role": "user", "content": "x"}
    ]
    assert WholePrompt(layout=[0, 0]).prompt(sent) == [sent[0], sent[0]]
    with pytest.raises(LayoutError):
        WholePrompt().prompt(sent)
