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
from ..protocol.test_sdk_objects_hostile import _turn
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


def _blocks(refusal_set: bool) -> dict[str, Any]:
    """An assistant turn of Anthropic blocks (a dict holding a list of objects), the
    text block's ``citations`` set to its default or not: equal, other JSON."""
    from anthropic.types import TextBlock

    fields: dict[str, Any] = {"type": "text", "text": "Reading it."}
    if refusal_set:
        fields["citations"] = None
    return {"role": "assistant", "content": [TextBlock(**fields)]}


@pytest.mark.parametrize("same_json", [False, True])
@pytest.mark.parametrize(("kind", "turn"), [("openai-chat", _turn), ("anthropic", _blocks)])
def test_an_equal_object_that_sends_other_json_is_noticed(
    daemon: Daemon, kind: str, turn: Any, same_json: bool
) -> None:
    """A turn replaced between rounds by an equal object: one that sends other JSON
    makes the session send the conversation again, so that its prompt is the SDK's
    JSON of the new conversation, as a whole call's (before: the daemon kept the JSON
    first sent); one that sends the same JSON keeps the session's rounds appending."""
    user = {"role": "user", "content": "start"}
    first: list[Any] = [user, turn(False), {"role": "user", "content": "go on"}]
    second = [user, turn(not same_json), first[2], {"role": "assistant", "content": "ok"}]
    assert second[1] == first[1] and second[1] is not first[1]
    assert (sent(kind, second[1:2]) == sent(kind, first[1:2])) is same_json
    save_file = chat_path(daemon, f"sdk-equal-{kind}-{same_json}")
    with Client(daemon.socket_path) as client, client.session(save_file, format=kind) as session:
        session.prepare_prompt(first, strategies="none")
        assert session._conversation._unchanged(second) is same_json
        prompt = session.prepare_prompt(second, strategies="none")
    assert prompt == sent(kind, second)


@pytest.mark.parametrize("same_json", [False, True])
@pytest.mark.parametrize(("kind", "turn"), [("openai-chat", _turn), ("anthropic", _blocks)])
def test_an_object_sent_in_an_appended_round_is_checked_where_it_sits(
    daemon: Daemon, kind: str, turn: Any, same_json: bool
) -> None:
    """As above, the object first sent in a round that appended: the session
    remembers it at its place in the whole conversation, not in the append."""
    user = {"role": "user", "content": "start"}
    first: list[Any] = [user]
    second: list[Any] = [user, turn(False), {"role": "user", "content": "go on"}]
    third = [user, turn(not same_json), second[2], {"role": "assistant", "content": "ok"}]
    save_file = chat_path(daemon, f"sdk-appended-{kind}-{same_json}")
    with Client(daemon.socket_path) as client, client.session(save_file, format=kind) as session:
        session.prepare_prompt(first, strategies="none")
        session.prepare_prompt(second, strategies="none")  # appends the object at 1
        assert session._conversation._unchanged(third) is same_json
        prompt = session.prepare_prompt(third, strategies="none")
    assert prompt == sent(kind, third)
