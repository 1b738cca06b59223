"""The client library's sessions against the real daemon, checked by in-process ones.

A drawn sequence of rounds over sessions in every format, on two
:class:`scoutd.Client` connections: the conversation grows, repeats, has an
earlier message replaced by another object or a top-level key reassigned in
place, shrinks; sessions are closed and opened again; recalls are asked. Every
prompt a client session returns equals :func:`scoutd.prepare` of the caller's
conversation, and an in-process :class:`scoutd.Session` fed the same
conversation gives the same prompt and recall answers (docs/PROTOCOL.md,
"Incremental sessions": the client sends the tail, applies the checked delta and
falls back to a whole send when needed).
"""

from __future__ import annotations

import copy
import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import scoutd

from ..support.daemon import Daemon
from .test_session_protocol_stateful import CONFIG, FORMATS, PROMPT, compact, source

STRATEGIES: list[str | None] = [None, "shorten_tools_epoch_increment", "shorten_tools"]
STEPS = 160


def _longest_key(message: dict[str, Any]) -> str:
    """The top-level key whose JSON is the longest (the one worth changing)."""
    return max(message, key=lambda key: len(json.dumps(message[key])))


@dataclass
class Chat:
    """One agent: its conversation, its daemon session and its in-process twin."""

    fmt: str
    strategies: str | None
    source: list[dict[str, Any]]
    client: scoutd.Client
    session: Any  # scoutd.client.Session
    twin: scoutd.Session
    conv: list[Any]
    in_place: bool = False  # a message was changed in place: the twin may differ (documented)
    prepared: bool = False  # the daemon holds the conversation of a round


class Agents:
    def __init__(self, daemon: Daemon, rng: random.Random, clients: list[scoutd.Client]) -> None:
        self.daemon, self.rng, self.clients = daemon, rng, clients
        self.seen: Counter[str] = Counter()
        self.opened = 0

    def open(self, fmt: str, strategies: str | None, source: list[Any], conv: list[Any]) -> Chat:
        self.opened += 1
        client = self.rng.choice(self.clients)
        save = os.path.join(self.daemon.dir, f"agent{self.opened}.chat")
        session = client.open_session(save, format=fmt)
        twin = scoutd.Session(format=fmt, strategies=strategies, config=CONFIG)
        return Chat(fmt, strategies, source, client, session, twin, conv)

    def round(self, chat: Chat) -> None:
        prompt = chat.session.prepare_prompt(chat.conv, chat.strategies)
        whole = scoutd.prepare(chat.conv, chat.strategies, format=chat.fmt, config=CONFIG)
        assert compact(prompt) == compact(whole.messages), (chat.fmt, chat.strategies)
        if not chat.in_place:
            assert compact(chat.twin.prepare_prompt(chat.conv)) == compact(prompt)
        chat.prepared = True
        self.seen[f"round {chat.fmt}"] += 1

    def step(self, chat: Chat) -> Chat:
        op = self.rng.choices(
            ["grow", "same", "replace", "reassign", "shrink", "recall", "reopen"],
            [8, 1, 2, 1, 1, 2, 1],
        )[0]
        self.seen[op] += 1
        conv = chat.conv
        if op == "grow":
            chat.conv = conv + chat.source[len(conv) : len(conv) + self.rng.randint(1, 4)]
        elif op == "replace" and conv:
            at = self.rng.randrange(len(conv))
            edited = copy.deepcopy(conv[at])
            key = _longest_key(edited)
            edited[key] = json.loads(json.dumps(edited[key]).replace("o", "0", 1))
            chat.conv = [*conv[:at], edited, *conv[at + 1 :]]
        elif op == "reassign" and conv:
            message = conv[self.rng.randrange(len(conv))]
            key = _longest_key(message)
            message[key] = json.loads(json.dumps(message[key]).replace("o", "O", 1))
            chat.in_place = True
        elif op == "shrink":
            chat.conv = conv[: self.rng.randint(0, len(conv))]
        elif op == "recall":
            if conv and chat.prepared and not chat.in_place:
                chat.twin.prepare(conv)
                query: dict[str, Any] = self.rng.choice(
                    [{"handle": h} for h in (1, 2, "#3", 50, "x")]
                    + [{"search": t} for t in ("row 2", "ls", "zzz")]
                )
                assert chat.session.recall(**query) == chat.twin.recall(**query), query
            return chat
        elif op == "reopen":
            chat.session.close()
            chat.twin.close()
            return self.open(chat.fmt, chat.strategies, chat.source, chat.conv)
        self.round(chat)
        return chat


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT) as running:
        yield running


@pytest.mark.parametrize("seed", range(6))
def test_client_sessions_match_in_process_sessions(daemon: Daemon, seed: int) -> None:
    rng = random.Random(seed)
    with (
        scoutd.Client(daemon.socket_path, timeout=20.0) as first,
        scoutd.Client(daemon.socket_path, timeout=20.0) as second,
    ):
        agents = Agents(daemon, rng, [first, second])
        chats = [
            agents.open(fmt, rng.choice(STRATEGIES), src := source(fmt, rng, 9), src[:2])
            for fmt in FORMATS
        ]
        for _ in range(STEPS):
            at = rng.randrange(len(chats))
            chats[at] = agents.step(chats[at])
        for chat in chats:
            chat.session.close()
    seen = agents.seen
    assert all(seen[f"round {fmt}"] >= 15 for fmt in FORMATS), seen
    assert seen["replace"] >= 5 and seen["reopen"] >= 2, seen
