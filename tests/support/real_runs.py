"""Recorded real agent runs for the economy tests, as scoutd's tool-role messages.

The runs live beside the repository in ``../shared/real/`` (or the directory
named by ``SCOUTD_REAL_DIR``): ``runs.jsonl.gz`` in the OpenAI Chat format and
``anthropic.jsonl.gz`` in the Anthropic Messages format, one run a line with a
``messages`` list. The plain converters below turn each into scoutd's tool
roles (docs/STRATEGIES.md): every tool call becomes a ``function_call``, every
result a ``function_call_output``, and every other part of a message keeps its
role and content, so a prompt's size and its message boundaries stay close to
what the provider receives.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]
FILES = {"openai": "runs.jsonl.gz", "anthropic": "anthropic.jsonl.gz"}


def real_dir() -> Path:
    """Where the recorded runs are."""
    return Path(os.environ.get("SCOUTD_REAL_DIR") or REPOSITORY.parent / "shared" / "real")


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def from_openai_chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI Chat Completions messages as scoutd messages."""
    out: list[dict[str, Any]] = []
    names: dict[str, Any] = {}
    for message in messages:
        role = message.get("role")
        if role == "tool":
            ident = message.get("tool_call_id")
            body = {"name": names.get(ident), "content": message.get("content"), "id": ident}
            out.append({"role": "function_call_output", "content": _encode(body)})
            continue
        content = message.get("content")
        if content:
            out.append({"role": role, "content": content})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            names[call.get("id")] = function.get("name")
            body = {
                "name": function.get("name"),
                "arguments": _arguments(function.get("arguments")),
                "id": call.get("id"),
            }
            out.append({"role": "function_call", "content": _encode(body)})
    return out


def from_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic Messages as scoutd messages (runs of other blocks stay one message)."""
    out: list[dict[str, Any]] = []
    names: dict[str, Any] = {}
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if not isinstance(content, list):
            out.append({"role": role, "content": content})
            continue
        pending: list[Any] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in ("tool_use", "tool_result"):
                pending.append(block)
                continue
            if pending:
                out.append({"role": role, "content": pending})
                pending = []
            if kind == "tool_use":
                names[block.get("id")] = block.get("name")
                body = {
                    "name": block.get("name"),
                    "arguments": block.get("input"),
                    "id": block.get("id"),
                }
                out.append({"role": "function_call", "content": _encode(body)})
            else:
                ident = block.get("tool_use_id")
                body = {"name": names.get(ident), "content": block.get("content"), "id": ident}
                out.append({"role": "function_call_output", "content": _encode(body)})
        if pending:
            out.append({"role": role, "content": pending})
    return out


CONVERTERS = {"openai": from_openai_chat, "anthropic": from_anthropic}


def load_runs(kind: str) -> list[dict[str, Any]]:
    """The runs of one file: each with ``format``, ``messages`` (scoutd's) and ``outputs``."""
    path = real_dir() / FILES[kind]
    runs = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            messages = CONVERTERS[kind](record["messages"])
            outputs = sum(1 for m in messages if m["role"] == "function_call_output")
            runs.append({"format": kind, "messages": messages, "outputs": outputs})
    return runs
