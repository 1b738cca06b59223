"""The same bad input fails with the same error class in process and through the daemon.

An agent that moves from ``scoutd.prepare`` / ``scoutd.Session`` to the client
catches what it caught before: a message list that breaks the rule
(docs/PROTOCOL.md, "Messages") is :class:`~scoutd.errors.InvalidMessages` on
both paths, naming the same message; formats mixed are a
:class:`~scoutd.errors.FormatError`; messages nested too deeply are
``InvalidMessages`` whichever side met the depth; a closed session is
:class:`~scoutd.errors.SessionClosed`. Through the daemon each is also the
:class:`~scoutd.errors.RemoteError` it was, with its code and data.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import pytest

import scoutd
from scoutd.config import Config, load_config
from scoutd.errors import FormatError, InvalidMessages, RemoteError, SessionClosed
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.daemon import Daemon
from tests.support.nesting import decoder_limit, nested

PROMPT = {"recall": True, "context_window": 6000, "cost_full_tool_outputs": 4}
CALL_TIMEOUT = 20.0
CHAT_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "x1", "type": "function", "function": {"name": "g", "arguments": "{}"}}],
}
ANTHROPIC_CALL = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "x"}}],
}


def chat_run(pairs: int) -> list[dict[str, Any]]:
    """An OpenAI Chat run of ``pairs`` calls and their outputs after a system prompt and a task."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for n in range(pairs):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "line\n" * 60})
    return messages


# Each format's run and a message of another format (mixed in: a FormatError).
RUNS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "openai-chat": (chat_run(12), ANTHROPIC_CALL),
    "anthropic": (to_anthropic(chat_run(12)), CHAT_CALL),
    "openai-responses": (to_responses(chat_run(12)), ANTHROPIC_CALL),
}


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT) as running:
        yield running


def failure(run: Callable[[], Any]) -> Exception | None:
    """The error ``run`` raises, or None."""
    try:
        run()
    except Exception as exc:  # compared by the caller
        return exc
    return None


def in_thread(run: Callable[[], Any]) -> Exception | None:
    """:func:`failure` on a thread's fresh stack: the depth a call may nest its values to
    does not depend on how deep the test runner's own frames go."""
    found: list[Exception | None] = []
    thread = threading.Thread(target=lambda: found.append(failure(run)))
    thread.start()
    thread.join(CALL_TIMEOUT)
    assert not thread.is_alive() and found, "the call did not end"
    return found[0]


def config_of(daemon: Daemon) -> Config:
    return load_config(daemon.config_path)


@pytest.mark.parametrize("fmt", list(RUNS))
def test_a_message_that_is_no_object_is_invalid_messages_on_both_paths(
    daemon: Daemon, fmt: str
) -> None:
    """The same class and the same position, without a session and in a session's round."""
    run, _ = RUNS[fmt]
    config = config_of(daemon)
    bad: list[Any] = [*run[:9], "not a message", *run[9:12]]
    local = failure(lambda: scoutd.prepare(bad, config=config))
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        remote = failure(lambda: client.prepare(bad))
        save = os.path.join(daemon.dir, f"invalid-{fmt}.chat")
        with client.session(save) as session:
            session.prepare(run[:7])  # held: 7 messages, the bad one is appended after them
            in_session = failure(lambda: session.prepare(bad))
            still = session.prepare(run[:11])  # the session goes on
    held = scoutd.Session(config=config)
    held.prepare(run[:7])
    local_session = failure(lambda: held.prepare(bad))
    assert len(still.messages) > 0
    for mine, theirs in ((local, remote), (local_session, in_session)):
        assert isinstance(mine, InvalidMessages), mine
        assert isinstance(theirs, InvalidMessages), theirs
        assert theirs.position == mine.position == 9
        assert isinstance(theirs, RemoteError) and theirs.code == -32602  # still the answer


@pytest.mark.parametrize("given", ["a string", b"bytes", bytearray(b"x"), {"role": "user"}])
def test_messages_that_are_no_list_are_invalid_messages_on_both_paths(
    daemon: Daemon, given: Any
) -> None:
    local = failure(lambda: scoutd.prepare(given))
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        remote = failure(lambda: client.prepare(given))
    assert isinstance(local, InvalidMessages) and local.position is None, local
    assert isinstance(remote, InvalidMessages) and remote.position is None, remote
    assert remote.reason == local.reason


@pytest.mark.parametrize("fmt", list(RUNS))
def test_formats_mixed_are_a_format_error_on_both_paths(daemon: Daemon, fmt: str) -> None:
    run, foreign = RUNS[fmt]
    config = config_of(daemon)
    mixed = [*run[:9], foreign, *run[9:12]]
    local = failure(lambda: scoutd.prepare(mixed, config=config))
    held = scoutd.Session(config=config)
    local_session = failure(lambda: held.prepare(mixed))
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        remote = failure(lambda: client.prepare(mixed))
        with client.session(os.path.join(daemon.dir, f"mixed-{fmt}.chat")) as session:
            in_session = failure(lambda: session.prepare(mixed))
    for mine, theirs in ((local, remote), (local_session, in_session)):
        assert isinstance(mine, FormatError), mine
        assert isinstance(theirs, FormatError), theirs
        assert str(mine) in str(theirs)  # the same sentence, with the daemon's frame


def test_nesting_too_deep_is_invalid_messages_whichever_side_meets_it(daemon: Daemon) -> None:
    """Near the limits (where the client encodes and the daemon cannot decode: about a
    thousand levels on Python 3.11, ten thousand on 3.13), every refusal is
    InvalidMessages, never a parse error or a bare RemoteError; the exact depth
    differs by a few levels (docs/PROTOCOL.md)."""
    run, _ = RUNS["openai-chat"]
    config = config_of(daemon)
    refused = {"in process": 0, "by the daemon": 0, "by the client": 0}
    kinds: set[str] = set()
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        limit = decoder_limit()
        for depth in range(limit - 97, limit + 43, 4):
            for where in ("content", "extra"):
                messages = [dict(message) for message in run[:6]]
                if where == "content":
                    messages.append({"role": "user", "content": nested(depth)})
                else:
                    messages[1]["extra"] = nested(depth)
                tries: Sequence[Callable[[], Any]] = (
                    partial(scoutd.Session(config=config).prepare, messages),
                    partial(client.prepare, messages),
                )
                for number, attempt in enumerate(tries):
                    error = in_thread(attempt)
                    if error is None:
                        continue
                    kinds.add(type(error).__name__)
                    assert isinstance(error, InvalidMessages), (depth, where, error)
                    if number == 0:
                        refused["in process"] += 1
                    elif isinstance(error, RemoteError):
                        refused["by the daemon"] += 1
                    else:
                        refused["by the client"] += 1
    assert all(count > 0 for count in refused.values()), refused


@pytest.mark.parametrize("fmt", list(RUNS))
def test_a_closed_session_is_session_closed_on_both_paths(daemon: Daemon, fmt: str) -> None:
    run, _ = RUNS[fmt]
    config = config_of(daemon)
    local = scoutd.Session(config=config)
    local.prepare(run[:5])
    local.close()
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        remote = client.open_session(os.path.join(daemon.dir, f"closed-{fmt}.chat"))
        remote.prepare(run[:5])
        remote.close()
        for attempt_local, attempt_remote in (
            (lambda: local.prepare(run[:7]), lambda: remote.prepare(run[:7])),
            (lambda: local.recall("#1"), lambda: remote.recall("#1")),
        ):
            mine, theirs = failure(attempt_local), failure(attempt_remote)
            assert isinstance(mine, SessionClosed), mine
            assert isinstance(theirs, SessionClosed), theirs
