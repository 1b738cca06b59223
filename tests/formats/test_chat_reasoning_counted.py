"""A Chat assistant message's ``reasoning_content`` is counted with its turn.

DeepSeek's thinking mode takes back the reasoning of every turn that called a
tool, in every later request (a request without it is refused), so it is billed
as the rest of the message is. Before, the estimate left it out: prompts of the
conversations below were sent at up to 86,440 tokens against a 40,000-token
window. The oracle bills the prepared prompt's JSON at 4 characters a token.
"""

from __future__ import annotations

import json
from typing import Any

import scoutd

WINDOW = 40_000


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for turn in range(turns):
        call = {
            "id": f"c{turn}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat f{turn}"})},
        }
        reasoning = f"{turn} " + "r" * 6_000
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": reasoning,
                "tool_calls": [call],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"c{turn}", "content": f"{turn} " + "o" * 3_000}
        )
    return messages


def _billed(messages: list[Any]) -> int:
    return len(json.dumps(messages, separators=(",", ":"))) // 4


def test_no_prompt_passes_its_window_with_the_reasoning_sent_back() -> None:
    compacted = 0
    for turns in range(10, 80, 5):
        messages = _conversation(turns)
        prepared = scoutd.prepare(messages, format="openai-chat", config={"context_window": WINDOW})
        assert _billed(prepared.messages) <= WINDOW, turns
        compacted += prepared.messages != messages
        kept = [m for m in prepared.messages if m.get("tool_calls")]
        assert all(m["reasoning_content"].startswith(m["tool_calls"][0]["id"][1:]) for m in kept)
    assert compacted >= 8  # the window was reached, and compaction kept the prompt in it
