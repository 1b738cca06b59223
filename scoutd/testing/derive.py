"""Conversions of OpenAI Chat conversations into the other formats, for tests and benchmarks.

Written from the providers' documented shapes, independently of
:mod:`scoutd.formats`, so that the real OpenAI runs can be replayed as
Anthropic and Responses conversations too.
"""

from __future__ import annotations

import json
from typing import Any


def _arguments_object(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {"raw": text}
    return value if isinstance(value, dict) else {"raw": text}


def to_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic Messages form: no system message, tool results in user turns,
    reasoning as a signed thinking block, consecutive user turns merged."""
    out: list[dict[str, Any]] = []

    def add_user(blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == "user":
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": "user", "content": blocks})

    for message in messages:
        role = message["role"]
        content = message.get("content")
        if role == "system":
            continue
        if role == "user":
            add_user([{"type": "text", "text": content}])
        elif role == "tool":
            add_user(
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message["tool_call_id"],
                        "content": content,
                    }
                ]
            )
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("reasoning_content"):
                thinking = message["reasoning_content"]
                blocks.append({"type": "thinking", "thinking": thinking, "signature": "sig"})
            if content:
                blocks.append({"type": "text", "text": content})
            for call in message.get("tool_calls") or []:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": _arguments_object(call["function"]["arguments"]),
                    }
                )
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "."}]})
    return out


def to_responses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI Responses input items: messages, reasoning, calls and outputs."""
    out: list[dict[str, Any]] = []
    for number, message in enumerate(messages):
        role = message["role"]
        content = message.get("content")
        if role in ("system", "user"):
            out.append({"type": "message", "role": role, "content": content})
        elif role == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": content,
                }
            )
        elif role == "assistant":
            if message.get("reasoning_content"):
                summary = [{"type": "summary_text", "text": message["reasoning_content"]}]
                out.append({"type": "reasoning", "id": f"rs_{number}", "summary": summary})
            if content:
                text = [{"type": "output_text", "text": content, "annotations": []}]
                out.append({"type": "message", "role": "assistant", "content": text})
            for call in message.get("tool_calls") or []:
                out.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{call['id']}",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    }
                )
    return out
