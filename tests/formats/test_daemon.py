"""Provider formats through the real daemon: raw JSON-RPC, Client and sessions."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import msgspec
import pytest

import scoutd
from scoutd import AsyncClient, Client, PromptConfig
from scoutd.protocol import INVALID_PARAMS
from tests.support.daemon import Daemon, LineClient

from .conversations import anthropic, chat, responses
from .validity import new_problems

TIGHT: dict[str, Any] = {
    "epoch_tool_call_threshold": 2,
    "epoch_full_tool_calls": 1,
    "epoch_compacted_tool_calls": 1,
    "epoch_size": 1,
}
BUILDERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "openai-chat": chat,
    "anthropic": anthropic,
    "openai-responses": responses,
}


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=TIGHT) as running:
        yield running


def _save_file(daemon: Daemon, name: str) -> str:
    os.makedirs(os.path.join(daemon.dir, "chats"), exist_ok=True)
    return os.path.join(daemon.dir, "chats", f"{name}.chat")


def _plain(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


@pytest.mark.parametrize("fmt", BUILDERS)
def test_raw_prepare_prompt_answers_in_the_input_format(daemon: Daemon, fmt: str) -> None:
    messages = BUILDERS[fmt](6)
    expected = scoutd.prepare(messages, "shorten_tools_epoch", config=PromptConfig(**TIGHT))
    with LineClient(daemon.socket_path) as line:
        answer = line.call(
            "prepare_prompt",
            {"messages": messages, "strategies": "shorten_tools_epoch", "format": fmt},
        )
    result = answer["result"]
    assert result["messages"] == _plain(expected.messages)
    assert result["report"][-1]["format"] == fmt
    assert result["report"][-1]["stable_prefix"] == expected.stable_prefix
    assert not new_problems(fmt, messages, result["messages"])


def test_a_mixed_list_is_an_invalid_request(daemon: Daemon) -> None:
    mixed = [*chat(1), *anthropic(1)[1:]]
    with LineClient(daemon.socket_path) as line:
        answer = line.call("prepare_prompt", {"messages": mixed})
        assert answer["error"]["code"] == INVALID_PARAMS
        assert "mix formats" in answer["error"]["message"]
        unknown = line.call("prepare_prompt", {"messages": [], "format": "gemini"})
        assert unknown["error"]["code"] == INVALID_PARAMS
        status = line.call("status")  # the daemon keeps serving
        assert "result" in status


def test_client_passes_format_and_cache_hint(daemon: Daemon) -> None:
    messages = anthropic(6)
    with Client(daemon.socket_path) as client:
        prepared = client.prepare(
            messages, "shorten_tools_epoch", format="anthropic", cache_control=True
        )
        warned = client.prepare(chat(3), "none", format="scout")
    assert prepared.format == "anthropic"
    last = prepared.messages[prepared.stable_prefix - 1]["content"][-1]
    assert last["cache_control"] == {"type": "ephemeral"}
    assert warned.warnings and "openai-chat" in warned.warnings[0]


@pytest.mark.parametrize("fmt", BUILDERS)
def test_sessions_append_in_their_format(daemon: Daemon, fmt: str) -> None:
    conversation = BUILDERS[fmt](8)
    config = PromptConfig(**TIGHT)
    with (
        Client(daemon.socket_path) as client,
        client.session(_save_file(daemon, fmt), format=fmt) as session,
    ):
        for end in range(3, len(conversation) + 1, 3):
            got = session.prepare(conversation[:end], "shorten_tools_epoch")
            expected = scoutd.prepare(
                conversation[:end], "shorten_tools_epoch", config=config, format=fmt
            )
            assert _plain(got.messages) == _plain(expected.messages)
            assert got.report == expected.report
            assert got.format == fmt


def test_async_client_and_session_in_a_provider_format(daemon: Daemon) -> None:
    conversation = responses(6)
    config = PromptConfig(**TIGHT)

    async def run() -> tuple[Any, Any]:
        async with AsyncClient(daemon.socket_path) as client:
            whole = await client.prepare(
                conversation, "shorten_tools_epoch", format="openai-responses"
            )
            async with client.session(_save_file(daemon, "async")) as session:
                await session.prepare(conversation[:10], "shorten_tools_epoch")
                last = await session.prepare(conversation, "shorten_tools_epoch")
            return whole, last

    whole, last = anyio.run(run)
    expected = scoutd.prepare(conversation, "shorten_tools_epoch", config=config)
    assert _plain(whole.messages) == _plain(expected.messages) == _plain(last.messages)
    assert whole.format == last.format == "openai-responses"


@pytest.mark.parametrize("fmt", BUILDERS)
def test_a_provider_session_delivers_notices_and_aborts(daemon: Daemon, fmt: str) -> None:
    """Rounds prepared from the session's kept view still read its inbox: a notice
    arrives once, in the format, and an abort stops the session."""
    conversation = BUILDERS[fmt](8)
    save_file = _save_file(daemon, f"inbox-{fmt}")
    os.makedirs(scoutd.inbox_dir(save_file), exist_ok=True)
    with Client(daemon.socket_path) as client, client.session(save_file) as session:
        session.prepare(conversation[:8], "shorten_tools_epoch_increment,inbox")
        scoutd.write_notice(save_file, "deploy frozen until 14:00", name="freeze")
        got = session.prepare(conversation[:12], "shorten_tools_epoch_increment,inbox")
        assert sum(r.inbox_delivered for r in got.report) == 1
        # last, or just before a last model turn whose calls wait for their outputs
        texts = [msgspec.json.encode(m).decode() for m in got.messages]
        at = next(i for i, text in enumerate(texts) if "deploy frozen" in text)
        after = got.messages[at + 1 :]
        assert all(
            m.get("role") == "assistant" or m.get("type") in ("reasoning", "function_call")
            for m in after
        ), after
        assert not new_problems(fmt, conversation[:12], _plain(got.messages))
        again = session.prepare(conversation[:16], "shorten_tools_epoch_increment,inbox")
        assert sum(r.inbox_delivered for r in again.report) == 0
        scoutd.write_abort(save_file, "stop")
        with pytest.raises(scoutd.Aborted):
            session.prepare(conversation, "shorten_tools_epoch_increment,inbox")
