"""Thinking and reasoning through the LiteLLM proxy hook, round by round.

An agent posts its whole history at every round, as a client of
``/v1/messages`` (each assistant turn: a ``thinking`` block with its signature,
a text, three parallel ``tool_use`` blocks) or of ``/v1/responses`` (a
``reasoning`` item with its summary and ``encrypted_content``, a message, three
function calls). The hook's prepared request must fit the window by a plain
oracle (4 characters of message JSON per token), keep each kept call's thinking
as the provider requires, leave the request's own lists as they came, and be
what a whole prepare of the same history gives.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("litellm", reason="needs the extra scoutd[litellm]")

import scoutd
from scoutd.integrations.litellm import CHAT_HEADER, ProxySettings, ScoutdProxyHook
from tests.formats.validity import anthropic_problems, responses_problems, thinking_problems

WINDOW = 8_000
TURNS = 12
CALLS = 3
CONFIG = {"context_window": WINDOW}
OUTPUT = "output line\n" * 60


def anthropic_turn(turn: int) -> list[dict[str, Any]]:
    """An assistant turn of thinking and parallel calls, and the user turn of its results."""
    ids = [f"toolu_{turn}_{n}" for n in range(CALLS)]
    said: list[dict[str, Any]] = [
        {
            "type": "thinking",
            "thinking": f"turn {turn} " + "ponder " * 900,
            "signature": f"s{turn}",
        },
        {"type": "text", "text": f"step {turn}"},
    ]
    said += [{"type": "tool_use", "id": i, "name": "bash", "input": {"command": i}} for i in ids]
    results = [{"type": "tool_result", "tool_use_id": i, "content": OUTPUT} for i in ids]
    return [{"role": "assistant", "content": said}, {"role": "user", "content": results}]


def responses_turn(turn: int) -> list[dict[str, Any]]:
    """A reasoning item, a message, parallel calls and their outputs."""
    ids = [f"call_{turn}_{n}" for n in range(CALLS)]
    items: list[dict[str, Any]] = [
        {
            "type": "reasoning",
            "id": f"rs_{turn}",
            "summary": [{"type": "summary_text", "text": f"turn {turn} " + "ponder " * 400}],
            "encrypted_content": "e" * 3_000,
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"step {turn}"}],
        },
    ]
    items += [
        {"type": "function_call", "call_id": i, "name": "bash", "arguments": json.dumps({"c": i})}
        for i in ids
    ]
    items += [{"type": "function_call_output", "call_id": i, "output": OUTPUT} for i in ids]
    return items


CASES = {
    "anthropic": ("anthropic_messages", "messages", anthropic_turn),
    "openai-responses": ("responses", "input", responses_turn),
}


def billed(messages: list[Any]) -> int:
    return sum(len(json.dumps(message)) for message in messages) // 4


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_thinking_is_counted_and_kept_round_by_round(tmp_path: Path, fmt: str) -> None:
    call_type, key, turn_of = CASES[fmt]
    hook = ScoutdProxyHook(ProxySettings(roots=(str(tmp_path),), config=CONFIG))
    headers = {CHAT_HEADER: str(tmp_path / "run.chat")}
    history: list[Any] = [{"role": "user", "content": "look around"}]
    compacted = kept = 0
    try:
        for turn in range(1, TURNS + 1):
            history += turn_of(turn)
            given = copy.deepcopy(history)
            data = {"model": "m", key: given, "proxy_server_request": {"headers": headers}}

            async def call(data: dict[str, Any] = data) -> dict[str, Any]:
                with anyio.fail_after(60):
                    return await hook.async_pre_call_hook(None, None, data, call_type)

            sent = anyio.run(call)[key]
            assert given == history, f"round {turn}: the request's own list was changed"
            assert billed(sent) <= WINDOW, (turn, billed(sent), billed(history))
            assert not thinking_problems(fmt, history, sent), turn
            problems = anthropic_problems if fmt == "anthropic" else responses_problems
            assert not problems(sent), turn
            whole = scoutd.prepare(history, config=CONFIG, format=fmt).messages
            assert sent == whole, f"round {turn}: differs from a whole prepare"
            compacted += billed(history) > WINDOW
            kept += sum(json.dumps(sent).count(marker) for marker in ('"thinking"', '"reasoning"'))
    finally:
        hook.close()
    assert compacted >= TURNS // 2  # the floor: most rounds needed compacting
    assert kept >= TURNS
