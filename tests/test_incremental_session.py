"""A session's bookkeeping over reset and truncate (scoutd/incremental.py).

The daemon truncates a session after a failed round and resets it on a new
conversation; the counted size is what ``max_session_bytes`` is checked
against (docs/PROTOCOL.md), so it must follow the conversation exactly.
"""

from __future__ import annotations

import json
from typing import Any

from scoutd import prepare
from scoutd.config import Config, PromptConfig
from scoutd.incremental import SessionPrompt, json_size

from .strategies.conversations import agent_run

EPOCH = Config(prompt=PromptConfig(prompt_strategies=("shorten_tools_epoch_increment", "inbox")))


def _plain_size(messages: list[Any]) -> int:
    """Bytes of each message as compact JSON, added up (an independent count)."""
    return sum(
        len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for m in messages
    )


def test_reset_counts_the_size_from_zero_and_takes_a_measured_size() -> None:
    session = SessionPrompt()
    session.extend(agent_run(5))
    other = agent_run(3)
    session.reset(other)
    assert session.size == _plain_size(other) == json_size(other)
    session.reset(other, size=12_345)  # the caller measured it (from the received bytes)
    assert session.size == 12_345
    session.extend([{"role": "user", "content": "é"}], size=7)
    assert session.size == 12_352


def test_truncate_goes_back_to_a_prefix() -> None:
    run = agent_run(70)
    session = SessionPrompt()
    session.extend(run)
    session.prepare(None, EPOCH)
    session.truncate(41)
    assert session.messages == run[:41]
    assert session.size == _plain_size(run[:41])
    got, stable = session.prepare(None, EPOCH)
    assert got == prepare(run[:41], config=EPOCH)
    assert stable == 0  # nothing to reuse after going back
    session.extend(run[41:])
    assert session.prepare(None, EPOCH)[0] == prepare(run, config=EPOCH)


def test_truncating_to_the_whole_conversation_keeps_the_last_round() -> None:
    run = agent_run(70)
    session = SessionPrompt()
    session.extend(run[:-2])
    session.prepare(None, EPOCH)
    session.truncate(len(run) - 2)  # nothing to drop: the last round stays reusable
    session.truncate(len(run) + 5)
    session.extend(run[-2:])
    got, stable = session.prepare(None, EPOCH)
    assert got == prepare(run, config=EPOCH)
    assert stable > 0
