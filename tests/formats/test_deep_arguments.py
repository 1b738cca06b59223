"""What the scout format passes through,
every provider format passes through too (docs/FORMATS.md, "Bad input passes through")."""

from __future__ import annotations

import json
from typing import Any

import pytest

import scoutd
from scoutd import PromptConfig, prepare

TIGHT = PromptConfig(
    epoch_tool_call_threshold=1, epoch_full_tool_calls=1, epoch_compacted_tool_calls=1, epoch_size=1
)
# An arguments text nested deeper than the JSON decoder goes (the interpreter's
# recursion limit): 3 kB that a model may write, valid JSON all the same.
DEEP_ARGUMENTS = '{"a":' + "[" * 3000 + "]" * 3000 + "}"


def _chat(arguments: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k in range(4):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "bash"}}
        call["function"]["arguments"] = arguments if k == 1 else json.dumps({"cmd": "ls"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": "o" * 900})
    return messages


def _responses(arguments: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "go"}]
    for k in range(4):
        args = arguments if k == 1 else json.dumps({"cmd": "ls"})
        items.append(
            {"type": "function_call", "call_id": f"c{k}", "name": "bash", "arguments": args}
        )
        items.append({"type": "function_call_output", "call_id": f"c{k}", "output": "o" * 900})
    return items


def _paired(messages: list[Any]) -> bool:
    """Every call answered once, right after it (the checker in validity.py decodes the
    arguments, which this test's cannot be)."""
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    calls += [m["call_id"] for m in messages if m.get("type") == "function_call"]
    answers = [m.get("tool_call_id") or m.get("call_id") for m in messages]
    answers = [
        a for a, m in zip(answers, messages, strict=True) if "output" in m or "tool_call_id" in m
    ]
    return calls == answers and len(set(calls)) == len(calls)


@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses"])
@pytest.mark.parametrize("strategy", ["none", "shorten_tools_epoch", "shorten_tools_cost_aware"])
def test_arguments_nested_past_the_decoder_pass_through(fmt: str, strategy: str) -> None:
    """A too-deep arguments text is unusable, as in the scout format, not a refusal of
    the whole conversation (which would stop the agent at every later call)."""
    messages = (_chat if fmt == "openai-chat" else _responses)(DEEP_ARGUMENTS)
    before = json.dumps(messages)
    config = TIGHT
    prepared = prepare(messages, strategy, config=config, format=fmt)
    assert json.dumps(messages) == before
    assert _paired(prepared.messages)
    deep = [m for m in prepared.messages if DEEP_ARGUMENTS in repr(m)]
    assert len(deep) == 1  # the call with it kept, its text untouched
    with scoutd.Session(format=fmt, strategies=strategy, config=config) as session:
        for n in range(1, len(messages) + 1):
            whole = prepare(messages[:n], strategy, config=config, format=fmt).messages
            assert session.prepare_prompt(messages[:n]) == whole
