"""Independent validity checkers, one per provider format (test code only).

Each returns a Counter of the problems found, by kind and tool id, so that a
prepared prompt can be checked to have no problem its input did not have.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any


def chat_problems(messages: list[Any]) -> Counter[tuple[str, str]]:
    """OpenAI Chat: calls answered right after their assistant message, exactly once;
    a legacy ``function`` message right after the ``function_call`` it answers."""
    problems: Counter[tuple[str, str]] = Counter()
    i = 0
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        if role == "tool":
            problems["tool message without its call", str(message.get("tool_call_id"))] += 1
            i += 1
            continue
        if role == "function":
            problems["function message without its call", str(message.get("name"))] += 1
            i += 1
            continue
        legacy = message.get("function_call") if role == "assistant" else None
        if legacy is not None:  # answered by the one function message right after it
            following = messages[i + 1] if i + 1 < len(messages) else {}
            i += 1 + (following.get("role") == "function")
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        if role == "assistant" and not calls and not message.get("content"):
            problems["empty assistant message", ""] += 1
        if not calls:
            i += 1
            continue
        ids = []
        for call in calls:
            ids.append(call.get("id"))
            if call.get("type", "function") != "function":
                continue  # a custom call: its input is free text
            arguments = call.get("function", {}).get("arguments")
            if not isinstance(arguments, str):
                problems["arguments not a string", str(call.get("id"))] += 1
            else:
                try:
                    json.loads(arguments)
                except ValueError:
                    problems["arguments not JSON", str(call.get("id"))] += 1
        j = i + 1
        answered: Counter[str] = Counter()
        while j < len(messages) and messages[j].get("role") == "tool":
            answered[messages[j].get("tool_call_id")] += 1
            j += 1
        for ident in ids:
            if answered[ident] != 1:
                problems["call not answered once", str(ident)] += 1
        for ident in answered:
            if ident not in ids:
                problems["tool message without its call", str(ident)] += 1
        i = j
    return problems


def _text_blank(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def anthropic_problems(messages: list[Any]) -> Counter[tuple[str, str]]:
    """Anthropic: alternation, results first in the next user turn, no empty content."""
    problems: Counter[tuple[str, str]] = Counter()
    if messages and messages[0].get("role") != "user":
        problems["first turn not user", ""] += 1
    previous_role = None
    pending: list[str] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == previous_role:
            problems["roles do not alternate", role] += 1
        previous_role = role
        if content == [] or content == "":
            problems["empty content", role] += 1
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            if not isinstance(block, dict) or "type" not in block:
                problems["block without type", role] += 1
            elif _text_blank(block):
                problems["blank text block", role] += 1
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if role == "user":
            for ident in pending:
                if results.count(ident) != 1:
                    problems["tool_use not answered once", ident] += 1
            for ident in results:
                if ident not in pending:
                    problems["tool_result without tool_use", ident] += 1
            leading = 0
            while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
                leading += 1
            if leading != len(results):
                problems["tool_result after other blocks", ""] += 1
            pending = []
        else:
            for ident in pending:  # a turn of calls followed by another, not by its results
                problems["tool_use not answered once", ident] += 1
            pending = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            for block in blocks:
                if block.get("type") == "tool_use" and not isinstance(block.get("input"), dict):
                    problems["input not an object", block.get("id")] += 1
    for ident in pending:
        problems["tool_use not answered once", ident] += 1
    return problems


def responses_problems(items: list[Any]) -> Counter[tuple[str, str]]:
    """Responses: one output per call, after it; reasoning followed by its item."""
    problems: Counter[tuple[str, str]] = Counter()
    calls: Counter[str] = Counter()
    outputs: Counter[str] = Counter()
    for position, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            calls[item.get("call_id")] += 1
            if not isinstance(item.get("arguments"), str):
                problems["arguments not a string", item.get("call_id")] += 1
        elif kind == "function_call_output":
            ident = item.get("call_id")
            if not calls[ident]:
                problems["output before or without its call", ident] += 1
            outputs[ident] += 1
        elif kind == "reasoning":
            following = items[position + 1] if position + 1 < len(items) else {}
            if following.get("type") not in ("function_call", "message") or (
                following.get("type") == "message" and following.get("role") != "assistant"
            ):
                problems["reasoning without its item", str(item.get("id"))] += 1
    for ident, count in calls.items():
        if count != 1 or outputs[ident] != 1:
            problems["call not answered once", ident] += 1
    return problems


CHECKERS = {
    "openai-chat": chat_problems,
    "anthropic": anthropic_problems,
    "openai-responses": responses_problems,
}


def new_problems(fmt: str, given: list[Any], prepared: list[Any]) -> Counter[tuple[str, str]]:
    """Problems of ``prepared`` that ``given`` did not have."""
    check = CHECKERS[fmt]
    return check(prepared) - check(given)
