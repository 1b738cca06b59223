"""An SDK's own objects sent through the daemon: the JSON the SDK would send goes out.

The daemon's answer for a conversation holding the providers' SDK objects is
the library's answer for that conversation's JSON as the SDK itself sends it
(tests/protocol/sdk_loops.py), round by round in a session and in a whole call
(where the indices answer may give back the caller's own objects: the SDK then
sends the same request).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import scoutd
from scoutd.client import AsyncClient, Client

from ..protocol.sdk_loops import KINDS, loop, sent
from ..support.daemon import Daemon
from .helpers import chat_path, daemon_config

SMALL = {"context_window": 6000}
ROUNDS = 16


def _library(daemon: Daemon, conversation: list[Any], kind: str, save_file: str) -> list[Any]:
    snapshot = daemon_config(daemon)
    snapshot = msgspec.structs.replace(
        snapshot, prompt=msgspec.structs.replace(snapshot.prompt, **SMALL)
    )
    return scoutd.prepare_prompt(conversation, config=snapshot, format=kind, save_file=save_file)


@pytest.mark.parametrize("kind", KINDS)
def test_session_rounds_with_objects(daemon: Daemon, kind: str) -> None:
    save_file = chat_path(daemon, f"sdk-{kind}")
    with Client(daemon.socket_path) as client, client.session(save_file, format=kind) as session:
        conversation, requests = loop(
            kind, ROUNDS, lambda held: session.prepare_prompt(held, config=SMALL)
        )
    per_round = 3 if kind == "openai-responses" else 2
    for done, request in enumerate(requests):
        held = conversation[: 1 + per_round * done]
        assert request == _library(daemon, sent(kind, held), kind, save_file)
    assert requests[-1] != sent(kind, conversation[: 1 + per_round * (ROUNDS - 1)])  # compacted


@pytest.mark.anyio
async def test_whole_call_with_objects_async(daemon: Daemon) -> None:
    kind = "anthropic"
    conversation, _ = loop(kind, ROUNDS)
    save_file = chat_path(daemon, "sdk-whole")
    async with AsyncClient(daemon.socket_path) as client:
        got = await client.prepare_prompt(
            conversation, save_file=save_file, config=SMALL, format=kind
        )
    # The indices answer gives back the caller's own messages where it keeps them
    # whole (docs/PROTOCOL.md), objects included: the SDK sends the same request.
    expected = _library(daemon, sent(kind, conversation), kind, save_file)
    assert sent(kind, got) == expected
