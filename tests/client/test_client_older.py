"""A client against a daemon from before a param it sends (:mod:`.older`).

During an upgrade a newer client meets an older daemon. A param that daemon
does not know is refused as an unknown field; the client must take the
refusal for what it is, go on without the param, and not ask again where the
answer cannot change. ``answer`` has its own tests (test_client_indices.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import scoutd
from scoutd.client import Client

from ..strategies.conversations import agent_run
from ..support.daemon import Daemon
from .helpers import chat_path, daemon_config
from .older import OlderDaemon, refusals


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
