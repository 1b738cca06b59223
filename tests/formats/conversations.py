"""Small hand-written conversations in each provider format, for the adapter tests."""

from __future__ import annotations

import json
from typing import Any

from scoutd import PromptConfig

LONG = "x" * 900  # an output long enough to be truncated


def epoch_window(shortened: int) -> PromptConfig:
    """The epoch strategies keeping the newest pair whole, the ``shortened`` pairs
    before it shortened and dropping the rest (an epoch per call)."""
    return PromptConfig(
        epoch_tool_call_threshold=2,
        epoch_full_tool_calls=1,
        epoch_compacted_tool_calls=shortened,
        epoch_size=1,
    )


def chat(pairs: int, parallel: int = 1, output: str = LONG) -> list[dict[str, Any]]:
    """System, user, then ``pairs`` assistant turns of ``parallel`` calls with their outputs."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix the bug"},
    ]
    for turn in range(pairs):
        ids = [f"c{turn}_{k}" for k in range(parallel)]
        messages.append(
            {
                "role": "assistant",
                "content": f"step {turn}",
                "reasoning_content": f"thinking {turn}",
                "tool_calls": [
                    {
                        "id": ident,
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"cmd": f"ls {ident}"}),
                        },
                    }
                    for ident in ids
                ],
            }
        )
        messages += [
            {"role": "tool", "tool_call_id": ident, "content": f"{ident} {output}"} for ident in ids
        ]
    return messages


def anthropic(pairs: int, output: Any = LONG) -> list[dict[str, Any]]:
    """A user task, then ``pairs`` assistant turns (thinking, text, one call) and results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for turn in range(pairs):
        ident = f"toolu_{turn}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"plan {turn}", "signature": f"sig{turn}"},
                    {"type": "text", "text": f"step {turn}"},
                    {
                        "type": "tool_use",
                        "id": ident,
                        "name": "bash",
                        "input": {"cmd": f"ls {turn}"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": ident,
                        "content": output,
                        "is_error": False,
                    }
                ],
            }
        )
    return messages


def responses(pairs: int, output: str = LONG) -> list[dict[str, Any]]:
    """Responses items: a user message, then reasoning, text, a call and its output per turn."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "fix the bug"}]
    for turn in range(pairs):
        ident = f"call_{turn}"
        items += [
            {"type": "reasoning", "id": f"rs_{turn}", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"step {turn}"}],
            },
            {
                "type": "function_call",
                "id": f"fc_{turn}",
                "call_id": ident,
                "name": "bash",
                "arguments": json.dumps({"cmd": f"ls {turn}"}),
            },
            {"type": "function_call_output", "call_id": ident, "output": f"{ident} {output}"},
        ]
    return items
