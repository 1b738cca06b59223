"""Calls of one session sent back to back run in the order they arrived.

A client may send several calls of a session without waiting for the answers
(docs/PROTOCOL.md: "One session handles one ``prepare_prompt`` at a time (calls
queue)"). Each round is then prepared on the conversation the ones before it
left, each delta is of the prompt the one before it answered, and a recall sent
after a round answers from that round's conversation, whatever each call
carries: the session's own ``save_file`` (checked in a worker thread) or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import scoutd
from scoutd.delta import DeltaDecoder

from ..support.daemon import Daemon, LineClient, conversation

RUN = conversation(60, output_size=60, user_every=0)
TRIALS = 12


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


def _open(client: LineClient, daemon: Daemon, name: str) -> tuple[str, str]:
    save = os.path.join(daemon.dir, name)
    answer = client.call("session.open", {"save_file": save})
    session: str = answer["result"]["session"]
    return session, save


def test_rounds_sent_back_to_back_run_in_order(daemon: Daemon) -> None:
    """Eight appends sent at once, every other one naming the session's save file:
    each is prepared on the one before (none refused at ``base``), and applying
    the deltas in turn rebuilds each prompt. A round naming its save file used to
    wait for the path check in a worker thread while the next one took the
    session first (76 of 96 rounds were refused at ``base``)."""
    refused = rounds = 0
    with daemon.connect() as client:
        session, save = _open(client, daemon, "order.chat")
        for trial in range(TRIALS):
            start = client.call(
                "prepare_prompt",
                {"session": session, "messages": [], "strategies": "none", "delta": True},
            )
            decoder = DeltaDecoder()
            decoder.apply(start["result"])
            sent: list[tuple[int, list[Any]]] = []
            held: list[Any] = []
            for k in range(8):
                params: dict[str, Any] = {
                    "session": session,
                    "append": RUN[len(held) : len(held) + 2],
                    "base": len(held),
                    "strategies": "none",
                    "delta": True,
                }
                if (k + trial) % 2 == 0:
                    params["save_file"] = save
                held = held + params["append"]
                sent.append((client.request("prepare_prompt", params), held))
            for rid, expected in sent:
                answer = client.response(rid)
                rounds += 1
                if "error" in answer:
                    refused += 1
                    continue
                assert decoder.apply(answer["result"]) == expected
    assert rounds == 8 * TRIALS
    assert refused == 0, f"{refused} of {rounds} rounds refused"


def test_a_recall_after_a_round_answers_from_that_round(daemon: Daemon) -> None:
    """A recall sent right after a round that appended output #5 finds it (it used
    to overtake the round, 9 or 10 times in 12, and answer "no output #5")."""
    missed = 0
    with daemon.connect() as client:
        session, save = _open(client, daemon, "recall-order.chat")
        for _ in range(TRIALS):
            client.call(
                "prepare_prompt", {"session": session, "messages": RUN[:2], "strategies": "none"}
            )
            grow = {
                "session": session,
                "append": RUN[2:20],
                "base": 2,
                "strategies": "none",
                "save_file": save,
            }
            first = client.request("prepare_prompt", grow)
            second = client.request("session.recall", {"session": session, "handle": 5})
            assert "result" in client.response(first)
            if not client.response(second)["result"]["found"]:
                missed += 1
    assert missed == 0, f"{missed} of {TRIALS} recalls answered from the conversation before"


def test_whole_conversations_back_to_back_leave_the_last_one(daemon: Daemon) -> None:
    """Two whole conversations of one length sent at once, the first naming the
    save file: the daemon keeps the second, so the next append (whose ``base``
    only counts messages) is prepared on it, not silently on the first (as 4 to
    8 rounds in 12 were)."""
    wrong = 0
    with daemon.connect() as client:
        session, save = _open(client, daemon, "whole-order.chat")
        for trial in range(TRIALS):
            first = RUN[:10]
            second = [*RUN[:9], {"role": "user", "content": f"edited {trial}"}]
            one = {"session": session, "messages": first, "save_file": save}
            two = {"session": session, "messages": second}
            ids = [client.request("prepare_prompt", one), client.request("prepare_prompt", two)]
            for rid in ids:
                assert "result" in client.response(rid)
            tail = RUN[10:12]
            answer = client.call("prepare_prompt", {"session": session, "append": tail, "base": 10})
            if answer["result"]["messages"] != scoutd.prepare([*second, *tail]).messages:
                wrong += 1
    assert wrong == 0, f"{wrong} of {TRIALS} rounds prepared on a conversation replaced since"


def test_a_large_round_is_not_overtaken_by_a_small_one(daemon: Daemon) -> None:
    """A round of 2 MB (decoded in a worker thread, past 256 KiB) then a small one
    sent right after it: the small one is prepared on the large one's conversation.
    It used to be decoded and run first, and refused at ``base`` (6 times in 10)."""
    refused = 0
    big = {"role": "user", "content": "x" * 2_000_000}
    with daemon.connect() as client:
        session, _ = _open(client, daemon, "large-order.chat")
        for _ in range(TRIALS):
            client.call(
                "prepare_prompt", {"session": session, "messages": RUN[:2], "strategies": "none"}
            )
            large = {"session": session, "append": [big], "base": 2, "strategies": "none"}
            small = {"session": session, "append": RUN[2:4], "base": 3, "strategies": "none"}
            ids = [client.request("prepare_prompt", large), client.request("prepare_prompt", small)]
            answers = [client.response(rid) for rid in ids]
            assert "result" in answers[0], answers[0]
            refused += "error" in answers[1]
    assert refused == 0, f"{refused} of {TRIALS} small rounds ran before the large one"
