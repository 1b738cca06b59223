"""``Session.held_bytes``: the memory an in-process session's conversation holds,
counted as the daemon counts its sessions, each message once while it grows."""

from __future__ import annotations

import json
from typing import Any

import pytest

import scoutd
from scoutd.errors import InvalidMessages

from ..strategies.conversations import agent_run


def oracle(messages: list[Any]) -> int:
    """The model of docs/RELIABILITY.md spelt out plainly: 5 bytes per byte of each
    message's compact JSON, 320 per JSON value (every object, array and scalar)."""

    def values(value: Any) -> int:
        if isinstance(value, dict):
            return sum(1 + values(v) for v in value.values())
        if isinstance(value, list):
            return sum(1 + values(v) for v in value)
        return 0

    text = sum(
        len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for m in messages
    )
    return 5 * text + 320 * (len(messages) + sum(values(m) for m in messages))


def test_the_count_follows_the_conversation_through_growth_replacement_and_failure() -> None:
    run = agent_run(12, output_size=300)
    with scoutd.Session() as session:
        assert session.held_bytes() == 0
        for end in (3, 3, 8, len(run)):
            session.prepare(run[:end])
            assert session.held_bytes() == oracle(run[:end])
        other = [{"role": "user", "content": "another conversation: é ✓"}]
        session.prepare(other)  # not a continuation: the session starts over
        assert session.held_bytes() == oracle(other)
        session.prepare(run[:5])
        with pytest.raises(InvalidMessages):
            session.prepare([*run[:5], "not a message"])  # refused: the session keeps what it held
        assert session.held_bytes() == oracle(run[:5])
        deep: Any = "x"
        for _ in range(100_000):
            deep = [deep]
        with pytest.raises(InvalidMessages):  # too deep to walk: refused, nothing changed
            session.prepare([*run[:5], {"role": "user", "content": deep}])
        assert session.held_bytes() == oracle(run[:5])
        session.prepare(run[:5])
        assert session.held_bytes() == oracle(run[:5])
        session.close()
        assert session.held_bytes() == 0


def test_rounds_never_asked_count_at_the_first_question() -> None:
    run = agent_run(6, output_size=50)
    session = scoutd.Session()
    for end in range(2, len(run) + 1, 3):
        session.prepare(run[:end])
    assert session.held_bytes() == oracle(run)
