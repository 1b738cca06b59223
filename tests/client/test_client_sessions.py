"""Sessions (pushed aborts, notices, resends), status and reload through the clients."""

from __future__ import annotations

import os
import time

import msgspec
import pytest

import scoutd
from scoutd.client import AsyncClient, Client
from scoutd.client._common import prepare_params
from scoutd.errors import RemoteError
from scoutd.protocol import UNKNOWN_SESSION
from scoutd.strategies.inbox import write_abort, write_notice

from ..strategies.conversations import agent_run
from ..support.daemon import Daemon, wait_for
from .helpers import ABORT_WAIT, chat_path, daemon_config

# ---------------------------------------------------------------- sessions


def test_session_abort_is_pushed(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "session")
    with Client(daemon.socket_path) as client, client.session(save_file) as session:
        assert isinstance(session.id, str) and session.id
        assert not session.aborted and session.reason is None
        assert session.wait_aborted(0.2) is False
        write_abort(save_file, "stop the run")
        assert session.wait_aborted(ABORT_WAIT) is True
        assert session.aborted and session.reason == "stop the run"
        with pytest.raises(scoutd.Aborted, match="stop the run"):
            session.prepare_prompt(agent_run(2))
        assert client.status()["counts"]["sessions"] >= 1


def test_abort_noticed_between_responses(daemon: Daemon) -> None:
    """A notification read while waiting for another answer is recorded, not lost."""
    save_file = chat_path(daemon, "interleaved")
    with Client(daemon.socket_path) as client, client.session(save_file) as session:
        write_abort(save_file, "seen in passing")
        deadline = time.monotonic() + ABORT_WAIT
        while not session.aborted and time.monotonic() < deadline:
            assert client.prepare_prompt([{"role": "user", "content": "x"}], "none")
            time.sleep(0.01)
        assert session.aborted and session.reason == "seen in passing"


def test_session_delivers_notices_to_its_save_file(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "notices")
    write_notice(save_file, "Please also update the docs.")
    with Client(daemon.socket_path) as client, client.session(save_file, pid=os.getpid()) as s:
        prepared = s.prepare([{"role": "user", "content": "task"}], ["inbox"])
    assert prepared.messages[-1] == {"role": "user", "content": "Please also update the docs."}
    assert prepared.report[0].inbox_delivered == 1
    assert not s.aborted


def test_session_resends_a_conversation_changed_behind_its_back(daemon: Daemon) -> None:
    """An earlier message replaced or reassigned in place: the daemon gets it all again."""
    config = daemon_config(daemon)
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    with Client(daemon.socket_path) as client, client.session(chat_path(daemon, "stale")) as s:
        assert s.prepare_prompt(messages, "none") == messages
        messages[0]["content"] = "a different task"  # same dict, new value
        messages.append({"role": "user", "content": "next"})
        assert s.prepare_prompt(messages, "none") == scoutd.prepare_prompt(
            messages, "none", config=config
        )
        messages[1] = {"role": "assistant", "content": "replaced"}  # same length
        messages.append({"role": "user", "content": "again"})
        assert s.prepare_prompt(messages, "none") == messages
        assert s.prepare_prompt(messages, "none") == messages  # unchanged: appends nothing


def test_a_conversation_another_connection_replaced_is_sent_whole(daemon: Daemon) -> None:
    """A second client of the uid replaces the session's conversation with as many
    messages: the owner's next round is prepared on its own messages, never on
    the other's (``base`` counts only, and the delta after it carries ``keep`` 0)."""
    mine = [{"role": "user", "content": "my task"}, {"role": "assistant", "content": "ok"}]
    other = [{"role": "user", "content": "someone else"}, {"role": "assistant", "content": "x"}]
    with Client(daemon.socket_path) as client, client.session(chat_path(daemon, "two")) as s:
        assert s.prepare_prompt(mine, "none") == mine
        with Client(daemon.socket_path) as second:
            assert second.prepare_prompt(other, "none", session=s.id) == other
            mine.append({"role": "user", "content": "next"})
            assert s.prepare_prompt(mine, "none") == mine
            # and the other way round: the second client's delta round is refused
            with pytest.raises(RemoteError) as caught:
                second._call(
                    "prepare_prompt",
                    msgspec.structs.replace(
                        prepare_params([], "none", None, s.id, None),
                        messages=None,
                        append=[{"role": "user", "content": "theirs"}],
                        base=3,
                    ),
                    dict,
                )
            assert caught.value.data["path"] == "$.params.base"
        mine.append({"role": "assistant", "content": "done"})
        assert s.prepare_prompt(mine, "none") == mine


@pytest.mark.parametrize("edit", ["in place", "replaced"])
def test_the_notices_of_an_answer_not_used_come_again(daemon: Daemon, edit: str) -> None:
    """The tail goes out before the client compares the messages under it: an
    answer prepared on a message edited since is dropped, the conversation sent
    again, and a notice that answer took comes in the next one, once."""
    save_file = chat_path(daemon, f"redeliver-{edit[0]}")
    strategies = ["none", "inbox"]
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    with Client(daemon.socket_path) as client, client.session(save_file) as s:
        assert s.prepare_prompt(messages, strategies) == messages
        delivered = client.status()["counts"]["notices_delivered"]
        write_notice(save_file, "Mind the tests.")
        if edit == "in place":
            messages[0]["content"] = "a different task"
        else:
            messages[1] = {"role": "assistant", "content": "a different answer"}
        messages.append({"role": "user", "content": "next"})
        prepared = s.prepare(messages, strategies)
        assert prepared.messages == [*messages, {"role": "user", "content": "Mind the tests."}]
        assert prepared.report[-1].inbox_delivered == 1
        assert client.status()["counts"]["notices_delivered"] == delivered + 1
        messages.append({"role": "assistant", "content": "done"})
        assert s.prepare_prompt(messages, strategies) == messages  # once only


def test_session_close_is_sent(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "closing")
    with Client(daemon.socket_path) as client:
        with client.session(save_file) as session:
            pass
        with pytest.raises(RemoteError) as caught:
            client.prepare_prompt([], session=session.id)
        assert caught.value.code == UNKNOWN_SESSION


@pytest.mark.anyio
async def test_async_session_abort_is_pushed(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "async-session")
    async with AsyncClient(daemon.socket_path) as client, client.session(save_file) as session:
        assert await session.wait_aborted(0.2) is False
        write_abort(save_file, "")
        assert await session.wait_aborted(ABORT_WAIT) is True
        assert session.reason is not None and "abort" in session.reason
        with pytest.raises(scoutd.Aborted):
            await session.prepare_prompt([])


# ---------------------------------------------------------------- status, reload


def test_status(daemon: Daemon) -> None:
    with Client(daemon.socket_path) as client:
        first = client.status()
        client.prepare_prompt([], "none")
        second = client.status()
        with Client(daemon.socket_path) as other:
            other.status()
            # both open connections, and only they (a closed one may take a moment)
            wait_for(lambda: client.status()["counts"]["connections"] == 2, 10, "2 connections")
    assert first["version"] == scoutd.__version__
    assert first["config"]["path"] == daemon.config_path
    assert second["counts"]["requests"] >= first["counts"]["requests"] + 2
    assert set(second["latency"]) >= {"count", "p50_ms", "p99_ms", "max_ms"}


def test_reload_config(own_daemon: Daemon) -> None:
    messages = agent_run(60)
    with Client(own_daemon.socket_path) as client:
        generation = client.status()["config"]["generation"]
        own_daemon.prompt["epoch_tool_call_threshold"] = 55
        own_daemon.write_config()
        new = client.reload_config()
        assert new > generation
        assert client.status()["config"]["generation"] >= new
        expected = scoutd.prepare_prompt(messages, None, config=daemon_config(own_daemon))
        assert client.prepare_prompt(messages) == expected

        own_daemon.prompt["epoch_size"] = -1
        own_daemon.write_config()
        with pytest.raises(scoutd.ConfigError, match="epoch_size"):
            client.reload_config()
        assert client.prepare_prompt(messages) == expected  # the last good config stays


@pytest.mark.anyio
async def test_async_status_and_reload(own_daemon: Daemon) -> None:
    async with AsyncClient(own_daemon.socket_path) as client:
        status = await client.status()
        assert status["version"] == scoutd.__version__
        assert await client.reload_config() > status["config"]["generation"]
