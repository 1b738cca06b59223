"""Recall answers the same text in process and through the daemon, whatever it is asked.

A model calls recall with what it likes: a handle that is a boolean, a float,
an integer past 64 bits, a text longer than the wire's bound, a search past
its bound, a lone surrogate. ``scoutd.Session.recall`` answers each with a
tool-error text; the client sent them as they were and the daemon's wire
types refused them (``RemoteError`` -32602) or, escaped, read another text.
And before any round the daemon says that it holds no conversation yet,
where the session in process answered about an empty one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import scoutd
from scoutd.config import Config, load_config
from scoutd.protocol.messages import MAX_RECALL_HANDLE, MAX_RECALL_SEARCH
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.daemon import Daemon
from tests.test_parity_errors import chat_run

PROMPT = {"recall": True, "context_window": 6000, "cost_full_tool_outputs": 4}
CALL_TIMEOUT = 20.0
RUNS: dict[str, list[dict[str, Any]]] = {
    "openai-chat": chat_run(30),
    "anthropic": to_anthropic(chat_run(30)),
    "openai-responses": to_responses(chat_run(30)),
}
# (handle, search) as a model may send them: plain ones and those the wire cannot carry.
QUESTIONS: list[tuple[Any, Any]] = [
    ("#1", None),
    ("#3", None),
    ("#999", None),
    (2, None),
    (None, "line"),
    (None, "nowhere to be found"),
    (None, None),
    ("", ""),
    ("x", None),
    ("#0", None),
    (-1, None),
    (0, None),
    (True, None),
    (False, None),
    (1.0, None),
    (2**64, None),
    (10**30, None),
    (-(2**63) - 1, None),
    ("#" + "9" * (MAX_RECALL_HANDLE + 10), None),
    (" " * (MAX_RECALL_HANDLE + 1) + "#1", None),
    (None, "l" * (MAX_RECALL_SEARCH + 1)),
    (None, "ab"),
    ("#1\udce9", None),
    (None, "lin\udce9"),
    (["#1"], None),
    (None, 42),
    ("#1", "line"),
]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT) as running:
        yield running


def answer(session: Any, handle: Any, search: Any) -> str:
    """The recall answer, or the error's class and text."""
    try:
        text: str = session.recall(handle, search)
    except Exception as exc:  # compared by the caller
        return f"{type(exc).__name__}: {exc}"
    return text


def compare(local: scoutd.Session, remote: scoutd.client.Session) -> list[tuple[Any, str, str]]:
    """The questions answered otherwise through the daemon."""
    differ = []
    for handle, search in QUESTIONS:
        mine, theirs = answer(local, handle, search), answer(remote, handle, search)
        if mine != theirs:
            differ.append(((handle, search), mine[:90], theirs[:90]))
    return differ


@pytest.mark.parametrize("fmt", list(RUNS))
def test_recall_answers_alike_before_any_round_and_after_rounds(daemon: Daemon, fmt: str) -> None:
    run = RUNS[fmt]
    config: Config = load_config(daemon.config_path)
    local = scoutd.Session(config=config)
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        remote = client.open_session(os.path.join(daemon.dir, f"recall-{fmt}.chat"))
        before = compare(local, remote)
        failed = [*run[:5], "not a message"]  # a first round that fails holds nothing either
        for session in (local, remote):
            with pytest.raises(scoutd.InvalidMessages):
                session.prepare(failed)
        after_failure = compare(local, remote)
        for session in (local, remote):
            assert session.prepare([]).messages == []
        after_empty = compare(local, remote)
        for end in (20, len(run)):
            assert local.prepare(run[:end]).messages == remote.prepare(run[:end]).messages
        after_rounds = compare(local, remote)
        found = sum(answer(local, h, s).startswith(("#", "line")) for h, s in QUESTIONS)
        remote.close()
    stages = {
        "before any round": before,
        "after a failed first round": after_failure,
        "after an empty round": after_empty,
        "after rounds": after_rounds,
    }
    counts = {stage: len(differ) for stage, differ in stages.items()}
    assert not any(counts.values()), (counts, stages)
    assert found >= 4  # outputs found, not only error texts
