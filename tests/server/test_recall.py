"""``session.recall`` against a real daemon subprocess on a real Unix socket.

The daemon answers from the session's stored conversation: the exact original
output for a handle its prompts carry, a tool-error text for what finds
nothing, an unknown session for another session's id once closed; and a handle
answers the same after a restart, for a session re-opened with the same
conversation.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import anyio
import pytest

from scoutd import protocol
from scoutd.client import AsyncClient, Client
from scoutd.errors import RemoteError
from tests.support.daemon import Daemon
from tests.test_recall import RECALL, chat_outputs, chat_run, marked, removed


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as d:
        yield d


def test_a_handle_in_the_daemons_prompt_recalls_the_exact_output(daemon: Daemon) -> None:
    messages = chat_run(80)
    outputs = chat_outputs(messages)
    with (
        Client(daemon.socket_path, timeout=20) as client,
        client.session(os.path.join(daemon.dir, "a.chat")) as session,
    ):
        prompt = session.prepare_prompt(messages, config=RECALL)
        handles, gone = marked(prompt), removed(prompt)
        assert handles and gone
        for handle in [*handles, *gone]:
            assert session.recall(f"#{handle}") == outputs[handle - 1]
        assert session.recall(999) == (
            "no output #999: this conversation has 80 tool outputs, #1-#80"
        )
        assert session.recall("#x").startswith("malformed handle")
        # search: the newest output not shown whole in the last prompt
        newest = max(handles)
        assert session.recall(search="of the run") == f"#{newest}\n{outputs[newest - 1]}"


def test_two_sessions_reach_only_their_own_conversation(daemon: Daemon) -> None:
    mine, theirs = chat_run(60), chat_run(5, user_every=0)
    for message in theirs:
        if message.get("role") == "tool":
            message["content"] = "SECRET " + message["content"]
    with (
        Client(daemon.socket_path, timeout=20) as one,
        Client(daemon.socket_path, timeout=20) as other,
        one.session(os.path.join(daemon.dir, "mine.chat")) as a,
        other.session(os.path.join(daemon.dir, "theirs.chat")) as b,
    ):
        prompt = a.prepare_prompt(mine, config=RECALL)
        b.prepare_prompt(theirs, config=RECALL)
        handle = max(marked(prompt))
        assert a.recall(handle) == chat_outputs(mine)[handle - 1]
        assert b.recall(handle).startswith(f"no output #{handle}: this conversation has 5")
        assert a.recall(search="SECRET ").startswith("no tool output")
        assert b.recall(3).startswith("SECRET ")
        closed_id = b.id
    # a closed session is unknown, whoever asks
    with daemon.connect() as raw:
        reply = raw.call("session.recall", {"session": closed_id, "handle": "#1"})
        assert reply["error"]["code"] == protocol.UNKNOWN_SESSION


def test_before_any_prepare_and_bad_params(daemon: Daemon) -> None:
    with daemon.connect() as raw:
        opened = raw.call("session.open", {"save_file": os.path.join(daemon.dir, "raw.chat")})
        session = opened["result"]["session"]
        reply = raw.call("session.recall", {"session": session, "handle": "#1"})
        assert reply["result"]["found"] is False
        assert "no conversation is stored" in reply["result"]["text"]
        for bad in ({"handle": "1" * 65}, {"handle": [1]}, {"search": 7}, {"extra": 1}):
            reply = raw.call("session.recall", {"session": session, **bad})
            assert reply["error"]["code"] == protocol.INVALID_PARAMS, bad


def test_the_async_client_recalls_too(daemon: Daemon) -> None:
    messages = chat_run(80)

    async def run() -> tuple[str, int]:
        async with (
            AsyncClient(daemon.socket_path, timeout=20) as client,
            client.session(os.path.join(daemon.dir, "async.chat")) as session,
        ):
            prompt = await session.prepare_prompt(messages, config=RECALL)
            handle = min(marked(prompt))
            return await session.recall(f"#{handle}"), handle

    answer, handle = anyio.run(run)
    assert answer == chat_outputs(messages)[handle - 1]


def test_a_handle_answers_the_same_after_a_restart() -> None:
    """Handles are numbers over the conversation itself: a restarted daemon given the
    same conversation again gives the same prompt, handles and answers."""
    messages = chat_run(80)
    with Daemon() as daemon:
        save_file = os.path.join(daemon.dir, "restart.chat")

        def round_trip() -> tuple[list[object], dict[int, str]]:
            with (
                Client(daemon.socket_path, timeout=20) as client,
                client.session(save_file) as session,
            ):
                prompt = session.prepare_prompt(messages, config=RECALL)
                handles = [*marked(prompt), *removed(prompt)]
                return prompt, {h: session.recall(f"#{h}") for h in handles}

        before, answers = round_trip()
        daemon.stop()
        daemon.start()
        after, again = round_trip()
        assert after == before
        assert again == answers and len(answers) > 10
        outputs = chat_outputs(messages)
        assert all(text == outputs[handle - 1] for handle, text in again.items())


def test_unknown_session_is_a_remote_error(daemon: Daemon) -> None:
    with Client(daemon.socket_path, timeout=20) as client:
        session = client.open_session(os.path.join(daemon.dir, "gone.chat"))
        session.close()
        with pytest.raises(RemoteError) as caught:
            session.recall("#1")
        assert caught.value.code == protocol.UNKNOWN_SESSION
