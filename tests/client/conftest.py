"""Daemons of the client tests (scoutd.Client and scoutd.AsyncClient), and peers that
are none (:mod:`.peers`)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest

from ..support.daemon import Daemon
from .helpers import PROMPT
from .peers import Peer


@pytest.fixture(scope="package")
def daemon() -> Iterator[Daemon]:
    """One daemon shared by the client tests that do not change its state."""
    with Daemon(prompt=PROMPT) as running:
        yield running


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon for one test (it reloads, stops or limits it)."""
    with Daemon(prompt=PROMPT, daemon={"max_request_bytes": 262144}) as running:
        yield running


@pytest.fixture
def make_peer() -> Iterator[Callable[[Callable[[Peer, socket.socket, int], None]], Peer]]:
    """Make peers served by the scripts given; each is closed when the test ends."""
    peers: list[Peer] = []

    def make(script: Callable[[Peer, socket.socket, int], None]) -> Peer:
        peers.append(Peer(script))
        return peers[-1]

    yield make
    for peer in peers:
        peer.close()
