"""A client against a daemon from before a param it sends (:mod:`.older`).

During an upgrade a newer client meets an older daemon. A param that daemon
does not know is refused as an unknown field; the client must take the
refusal for what it is, go on without the param, and not ask again where the
answer cannot change. ``answer`` has its own tests (test_client_indices.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

import scoutd
from scoutd.client import Client
from scoutd.inbox.writers import write_notice

from ..strategies.conversations import agent_run
from ..support.daemon import Daemon
from .helpers import chat_path, daemon_config, refusals
from .older import OlderDaemon


@pytest.fixture
def without_replacing() -> Iterator[Daemon]:
    with OlderDaemon(without=["delta_replace"]) as daemon:
        yield daemon


def test_a_daemon_without_replacing_deltas_is_sent_running_ones(without_replacing: Daemon) -> None:
    """Refused once per session; every round's prompt is still the library's,
    through the compactions that make a delta more than an append."""
    daemon = without_replacing
    messages = agent_run(70)
    config = daemon_config(daemon)
    rounds = range(10, len(messages) + 1, 6)
    with Client(daemon.socket_path, timeout=30) as client:
        for name in ("first", "second"):  # each session learns it on its own
            before = refusals(daemon)
            rewritten = 0
            previous: list[object] = []
            with client.session(chat_path(daemon, name)) as session:
                for end in rounds:
                    expected = scoutd.prepare_prompt(
                        messages[:end], "shorten_tools_epoch", config=config
                    )
                    assert session.prepare_prompt(messages[:end], "shorten_tools_epoch") == expected
                    rewritten += expected[: len(previous)] != previous
                    previous = expected
            assert refusals(daemon) == before + 1
            assert rewritten >= 2  # rounds whose prompt is not the last one extended


@pytest.fixture
def without_redeliver() -> Iterator[Daemon]:
    with OlderDaemon(without=["redeliver"]) as daemon:
        yield daemon


def test_a_daemon_without_redeliver_cannot_give_a_notice_back_and_the_client_says_so(
    without_redeliver: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    """An answer prepared on a message edited since is dropped and the conversation
    sent again, asking for the notices that answer took; an older daemon refuses
    the question, so the call goes again without it, once, and the log says the
    notice is lost (tests/client/test_client_sessions.py has the daemon that can)."""
    daemon = without_redeliver
    save_file = chat_path(daemon, "lost-notice")
    strategies = ["none", "inbox"]
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    with Client(daemon.socket_path, timeout=30) as client, client.session(save_file) as session:
        assert session.prepare_prompt(messages, strategies) == messages
        write_notice(save_file, "Mind the tests.")
        messages[1] = {"role": "assistant", "content": "a different answer"}
        messages.append({"role": "user", "content": "next"})
        before = refusals(daemon)
        with caplog.at_level(logging.WARNING, logger="scoutd.client"):
            prepared = session.prepare(messages, strategies)
        assert prepared.messages == messages  # the notice went with the answer dropped
        assert refusals(daemon) == before + 1
        assert client.status()["counts"]["notices_delivered"] == 1
        assert f"scoutd session {session.id}: the daemon cannot deliver again" in caplog.text
        messages.append({"role": "assistant", "content": "done"})
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="scoutd.client"):
            assert session.prepare_prompt(messages, strategies) == messages
        assert refusals(daemon) == before + 1 and not caplog.text  # asked no more
