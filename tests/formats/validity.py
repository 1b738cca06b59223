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


_THOUGHTS = ("thinking", "redacted_thinking")


def _anthropic_thinking(given: list[Any], prepared: list[Any]) -> Counter[tuple[str, str]]:
    """An assistant turn that keeps a ``tool_use`` block keeps its thinking blocks as
    they were, in their order, each where it stood among the turn's blocks kept."""
    problems: Counter[tuple[str, str]] = Counter()
    turns: dict[str, list[Any]] = {}  # a tool_use id -> the blocks of its given turn
    for message in given:
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_use":
                    turns[str(block.get("id"))] = message["content"]
    for message in prepared:
        blocks = message.get("content")
        if message.get("role") != "assistant" or not isinstance(blocks, list):
            continue
        uses = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        if not uses or uses[0] not in turns:
            continue
        original = turns[uses[0]]
        thinking = [b for b in original if b.get("type") in _THOUGHTS]
        if [b for b in blocks if b.get("type") in _THOUGHTS] != thinking:
            problems["thinking not kept as it was", uses[0]] += 1
        elif [b for b in blocks if b in original] != [b for b in original if b in blocks]:
            problems["thinking moved", uses[0]] += 1
        elif original and original[0].get("type") in _THOUGHTS and blocks[0] != original[0]:
            problems["thinking not first", uses[0]] += 1
    return problems


def _in_turn(item: Any) -> bool:
    return item.get("type") in ("reasoning", "function_call") or (
        item.get("type") == "message" and item.get("role") == "assistant"
    )


def _reasoning_of_calls(items: list[Any]) -> dict[str, Any]:
    """Each ``function_call``'s reasoning: the nearest ``reasoning`` item before it
    with only items of a model turn between (None without)."""
    found: dict[str, Any] = {}
    reasoning: Any = None
    for item in items:
        if not _in_turn(item):
            reasoning = None
        elif item.get("type") == "reasoning":
            reasoning = item
        elif item.get("type") == "function_call":
            found[str(item.get("call_id"))] = reasoning
    return found


def _responses_reasoning(given: list[Any], prepared: list[Any]) -> Counter[tuple[str, str]]:
    """Every ``function_call`` sent keeps its turn's reasoning item, unmodified, before it
    in its turn; a reasoning item sent is one of the conversation's, followed by an item
    of its turn."""
    problems: Counter[tuple[str, str]] = Counter()
    before, after = _reasoning_of_calls(given), _reasoning_of_calls(prepared)
    for ident, reasoning in after.items():
        if ident in before and before[ident] is not None and reasoning != before[ident]:
            problems["call without its reasoning", ident] += 1
    thoughts = [item for item in given if item.get("type") == "reasoning"]
    for item in prepared:
        if item.get("type") == "reasoning" and item not in thoughts:
            problems["reasoning changed", str(item.get("id"))] += 1
    return problems


def thinking_problems(fmt: str, given: list[Any], prepared: list[Any]) -> Counter[tuple[str, str]]:
    """What the provider rejects of the thinking a prompt sends back: an Anthropic turn
    of calls kept without its thinking blocks as they were (the API requires those of
    the tool loop in progress unmodified, and first in their message), a Responses
    call kept without its turn's reasoning item (the API rejects a call item without
    it). Empty for a format without thinking."""
    if fmt == "anthropic":
        return _anthropic_thinking(given, prepared)
    if fmt == "openai-responses":
        return _responses_reasoning(given, prepared)
    return Counter()
