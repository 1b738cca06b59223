"""``session.recall`` against a real daemon subprocess on a real Unix socket.

The daemon answers from the session's stored conversation: the exact original
output for a handle its prompts carry, a tool-error text for what finds
nothing, an unknown session for another session's id once closed; and a handle
answers the same after a restart, for a session re-opened with the same
conversation. Its answers are held to the uid's bound of unread answers, like
``prepare_prompt``'s.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import anyio
import pytest

from scoutd import protocol
from scoutd.client import AsyncClient, Client
from scoutd.errors import RemoteError
from tests.server.test_quotas import MIB, _counts, _error
from tests.support.daemon import Daemon, wait_for
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


def test_search_passes_over_what_a_whole_answer_shows(daemon: Daemon) -> None:
    """A prompt answered whole (``delta`` false, or the client sending the whole
    conversation again after an earlier message changed) is still the last prompt:
    search passes over the outputs it shows whole, as after a delta."""
    messages = chat_run(80)
    outputs = chat_outputs(messages)
    with daemon.connect(20) as raw:
        opened = raw.call("session.open", {"save_file": os.path.join(daemon.dir, "whole.chat")})
        session = opened["result"]["session"]
        params = {"session": session, "messages": messages, "config": RECALL}
        prompt = raw.call("prepare_prompt", params)["result"]["messages"]
        newest = max(marked(prompt))
        assert newest < 80  # the newest outputs are shown whole, and hold the text too
        reply = raw.call("session.recall", {"session": session, "search": "of the run"})
        assert reply["result"]["text"] == f"#{newest}\n{outputs[newest - 1]}"
    changed = [{"role": "system", "content": "be brief, please"}, *messages[1:]]
    with (
        Client(daemon.socket_path, timeout=20) as client,
        client.session(os.path.join(daemon.dir, "replaced.chat")) as replaced,
    ):
        replaced.prepare_prompt(messages, config=RECALL)
        prompt = replaced.prepare_prompt(changed, config=RECALL)  # sent whole, answered whole
        newest = max(marked(prompt))
        assert replaced.recall(search="of the run") == f"#{newest}\n{outputs[newest - 1]}"


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


def test_recall_answers_count_against_the_uids_unread_answers() -> None:
    """Recall answers, large outputs maybe, are held to ``max_queued_response_bytes_per_uid``
    like prepare answers: of one uid's recalls waiting for the session and a slot on
    connections that never read, those past the bound are refused with ``-32004``
    naming it, and the others are answered whole once read."""
    bound = 4 * MIB
    output = "x" * (3 * MIB // 2)  # more than a socket buffer: held until read
    answer = len(output) + 100  # its answer line
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]
    limits = {"max_queued_response_bytes_per_uid": bound, "max_prepares_per_uid": 1}
    count = 12  # 18 MB of answers if all were held
    with Daemon(daemon=limits) as d, d.connect(30) as owner:
        opened = owner.call("session.open", {"save_file": os.path.join(d.dir, "big.chat")})
        session = opened["result"]["session"]
        params = {"session": session, "messages": messages, "strategies": "none"}
        assert owner.call("prepare_prompt", params, timeout=30)["result"]

        def answered() -> int:
            """Requests the daemon answered since it started, ``status`` calls included."""
            done: int = owner.call("status")["result"]["latency"]["count"]
            return done

        idle = [d.connect(30) for _ in range(count)]
        try:
            start, polls = answered(), itertools.count(1)
            ids = [c.request("session.recall", {"session": session, "handle": "#1"}) for c in idle]
            wait_for(lambda: answered() - start - next(polls) == count, 30, "every recall")
            held = _counts(owner)["queued_response_bytes"]
            assert held < bound + 2 * answer, held
            replies = [c.response(rid, timeout=30) for c, rid in zip(idle, ids, strict=True)]
        finally:
            for client in idle:
                client.close()
    results = [reply["result"] for reply in replies if "result" in reply]
    refused = [_error(reply) for reply in replies if "result" not in reply]
    assert 1 <= len(results) <= bound // answer + 2, len(results)
    assert all(result["text"] == output for result in results)
    assert refused and all(error["code"] == protocol.TOO_LARGE for error in refused)
    assert all(error["data"]["limit"] == bound for error in refused)
    assert all("max_queued_response_bytes_per_uid" in error["message"] for error in refused)


def test_the_request_log_line_cuts_a_long_session_id(daemon: Daemon) -> None:
    """The debug line of each request cuts its session id to 64 characters, as its
    method: a client's 100,000-character id is not written to the log whole."""
    long = "q" * 100_000
    with daemon.connect(20) as raw:
        reply = raw.call("session.recall", {"session": long, "handle": "#1"})
        assert reply["error"]["code"] == protocol.UNKNOWN_SESSION

    def logged() -> list[str]:
        return [line for line in daemon.log().splitlines() if "q" * 64 in line]

    lines = wait_for(logged, 10, "the request's log line")
    assert len(lines) == 1 and "request session.recall session='" + "q" * 64 + "' " in lines[0]
    assert len(lines[0]) < 300, len(lines[0])
