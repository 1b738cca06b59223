"""What the client sends for the library's arguments, seen in the daemon's answers.

Each argument of ``prepare_prompt`` and ``open_session`` must reach the daemon as
the library would use it: a whole :class:`~scoutd.config.Config` as its
``[prompt]`` table, a format named by the caller, the agent's pid (which an
abort signals). What cannot go out is refused before anything is sent, in
words; a refusal from the daemon keeps the positions of the caller's list.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, overload

import pytest

import scoutd
from scoutd.client import Client
from scoutd.config import Config, PromptConfig
from scoutd.errors import SessionClosed
from scoutd.strategies.inbox import write_abort

from ..strategies.conversations import agent_run
from ..support.daemon import Daemon
from .helpers import ABORT_WAIT, PROMPT, chat_path, daemon_config, refusals

# Not the daemon's table (PROMPT): an answer under it shows the table was sent.
OTHER = PromptConfig(
    epoch_tool_call_threshold=12,
    epoch_full_tool_calls=3,
    epoch_compacted_tool_calls=6,
    epoch_size=4,
)


class Messages(Sequence[Any]):
    """A conversation kept in a class of the agent's own: a sequence, not a list."""

    def __init__(self, items: Sequence[Any]) -> None:
        self._items = list(items)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Messages: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return Messages(self._items[index])
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)


def _bytes_in(daemon: Daemon, session: str) -> list[int]:
    """The size of each request of ``session``, from the daemon's debug log."""
    found = re.findall(
        rf"request prepare_prompt session='{session}' pid=\d+ in=(\d+)B", daemon.log()
    )
    return [int(size) for size in found]


@pytest.mark.parametrize("kind", [list, tuple, Messages])
def test_each_round_of_a_session_is_one_request_that_appends(
    daemon: Daemon, kind: Callable[[list[Any]], Sequence[Any]]
) -> None:
    """Whatever sequence holds the conversation (the library takes any): one request a
    round, no refusal, and after the first only what was appended goes out."""
    messages = agent_run(30)
    config = daemon_config(daemon)
    ends = (20, 24, 28, 30, 30)  # the last one again: nothing new to send
    with Client(daemon.socket_path, timeout=30) as client:
        assert client.prepare_prompt(kind(messages)) == scoutd.prepare_prompt(
            messages, config=config
        )
        with client.session(chat_path(daemon, f"rounds-{id(kind)}")) as session:
            before = daemon.status()["counts"]
            for end in ends:
                expected = scoutd.prepare_prompt(messages[:end], config=config)
                assert session.prepare_prompt(kind(messages[:end])) == expected
            after = daemon.status()["counts"]
            sizes = _bytes_in(daemon, session.id)
    assert after["errors"] == before["errors"]
    assert after["requests"] - before["requests"] == len(ends) + 1  # and the status call
    assert len(sizes) == len(ends)
    first, *appends = sizes
    assert all(size < first / 2 for size in appends), sizes  # 4, 2 or 0 messages, not 24 to 30


def test_a_conversation_cut_back_is_sent_again_once_then_appended(daemon: Daemon) -> None:
    """An agent that takes back its last turns (a retry, a rewind) costs one whole
    call; the rounds after it append to what it sent."""
    messages = agent_run(30)
    config = daemon_config(daemon)
    ends = (20, 24, 12, 16, 28)
    with (
        Client(daemon.socket_path, timeout=30) as client,
        client.session(chat_path(daemon, "cut-back")) as session,
    ):
        before = daemon.status()["counts"]
        for end in ends:
            expected = scoutd.prepare_prompt(messages[:end], config=config)
            assert session.prepare_prompt(messages[:end]) == expected
        after = daemon.status()["counts"]
        sizes = _bytes_in(daemon, session.id)
    assert after["errors"] == before["errors"]
    assert after["requests"] - before["requests"] == len(ends) + 1  # and the status call
    whole_20, append_4, whole_12, append_4_again, append_12 = sizes
    assert append_4 < whole_20 / 2 and whole_12 > whole_20 / 2, sizes  # cut back: sent again
    assert append_4_again < whole_12 / 2 and append_12 < whole_20, sizes  # then appended


def test_a_whole_config_sends_its_prompt_table(daemon: Daemon) -> None:
    messages = agent_run(40)
    config = Config(prompt=OTHER)
    expected = scoutd.prepare_prompt(messages, "shorten_tools_epoch", config=config)
    assert expected != scoutd.prepare_prompt(
        messages, "shorten_tools_epoch", config=daemon_config(daemon)
    )  # the tables differ where it shows
    with Client(daemon.socket_path, timeout=30) as client:
        assert client.prepare_prompt(messages, "shorten_tools_epoch", config=config) == expected
        assert client.prepare_prompt(messages, "shorten_tools_epoch", config=OTHER) == expected


def test_a_named_format_is_the_one_the_daemon_reads(daemon: Daemon) -> None:
    """Scoutd-role messages read as OpenAI Chat hold no tool traffic to compact."""
    messages = agent_run(50)
    config = daemon_config(daemon)
    as_chat = scoutd.prepare_prompt(
        messages, "shorten_tools_epoch", config=config, format="openai-chat"
    )
    detected = scoutd.prepare_prompt(messages, "shorten_tools_epoch", config=config)
    assert as_chat != detected
    with Client(daemon.socket_path, timeout=30) as client:
        given = client.prepare_prompt(messages, "shorten_tools_epoch", format="openai-chat")
        assert given == as_chat
        assert client.prepare_prompt(messages, "shorten_tools_epoch") == detected
        for format, expected in (("openai-chat", as_chat), ("auto", detected)):
            with client.session(chat_path(daemon, f"format-{format}"), format=format) as session:
                assert session.prepare_prompt(messages, "shorten_tools_epoch") == expected


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        (
            {"messages": "a chat as text"},
            scoutd.InvalidMessages,
            "must be a list of messages, got str",
        ),
        ({"config": 42}, TypeError, "mapping of [prompt] overrides or a PromptConfig, got int"),
        ({"strategies": [len]}, TypeError, "a callable cannot be sent to the daemon"),
    ],
)
def test_what_cannot_be_sent_is_refused_in_words_before_sending(
    daemon: Daemon, arguments: dict[str, Any], error: type[Exception], words: str
) -> None:
    call: dict[str, Any] = {"messages": agent_run(2), **arguments}
    before = refusals(daemon)
    with Client(daemon.socket_path, timeout=30) as client:
        with pytest.raises(error) as raised:
            client.prepare_prompt(**call)
        assert words in str(raised.value)
        if error is scoutd.InvalidMessages:
            assert raised.value.position is None  # type: ignore[attr-defined]
    assert refusals(daemon) == before  # nothing went out


def test_a_refused_message_keeps_its_place_in_the_callers_list(daemon: Daemon) -> None:
    messages = agent_run(6)
    bad: list[Any] = [*messages, 42]
    with pytest.raises(scoutd.InvalidMessages) as in_process:
        scoutd.prepare_prompt(bad)
    position = len(messages)
    assert in_process.value.position == position
    before = refusals(daemon)
    with Client(daemon.socket_path, timeout=30) as client:
        with pytest.raises(scoutd.InvalidMessages) as whole:
            client.prepare_prompt(bad)
        assert whole.value.position == position
        assert refusals(daemon) == before + 1  # a refusal of the messages is not retried
        with client.session(chat_path(daemon, "refused")) as session:
            session.prepare_prompt(messages[:3])
            session.prepare_prompt(messages)  # the daemon holds them: the next call appends
            before = refusals(daemon)
            with pytest.raises(scoutd.InvalidMessages) as appended:
                session.prepare_prompt(bad)
            assert appended.value.position == position  # not its place in the append
            assert refusals(daemon) == before + 1  # taken for no refusal of a param
            assert not session.aborted


def test_a_closed_sessions_recall_names_it(daemon: Daemon) -> None:
    with Client(daemon.socket_path, timeout=30) as client:
        session = client.open_session(chat_path(daemon, "recall-closed"))
        session.prepare_prompt(agent_run(3))
        session.close()
        with pytest.raises(SessionClosed, match=f"unknown session '{session.id}'"):
            session.recall(1)


def test_the_agents_pid_is_what_an_abort_signals() -> None:
    """``abort_signal``: the daemon signals the pid the session was opened with."""
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Daemon(prompt=PROMPT, daemon={"abort_signal": "TERM"}) as daemon:
            save_file = chat_path(daemon, "signalled")
            with (
                Client(daemon.socket_path, timeout=30) as client,
                client.session(save_file, pid=agent.pid) as session,
            ):
                session.prepare_prompt(agent_run(2))
                write_abort(save_file, "stop the agent")
                assert session.wait_aborted(ABORT_WAIT)
                assert session.reason == "stop the agent"
            assert agent.wait(timeout=ABORT_WAIT) == -15  # SIGTERM
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(timeout=ABORT_WAIT)
