"""Tool traffic the adapters pass through stays with what belongs with it (docs/FORMATS.md).

The default strategy drops the assistant remarks among the pairs it drops. An
assistant message holding calls the adapter does not read (legacy calls, a
malformed group) is no remark: it goes, or stays, with the messages
answering it. A Responses ``reasoning`` item goes with its turn, also when its
turn is an answer without calls that the strategy dropped as a remark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scoutd import Config, PromptConfig, Session, prepare

from .conversations import anthropic, chat, responses
from .validity import new_problems

# Compacts the hand-built runs below at once: everything but the newest output dropped.
DROP_ALL = PromptConfig(
    context_window=4000, cost_full_tool_outputs=1, cost_compacted_tool_calls=0, cost_keep_share=0
)
STRATEGY = "shorten_tools_cost_aware"
PAIRS = 30  # pairs of 900 characters: well past the window


def _custom_group() -> list[dict[str, Any]]:
    """A Chat custom tool call whose ``input`` is no text (malformed) and its answer."""
    call = {"id": "cu_1", "type": "custom", "custom": {"name": "patch", "input": ["*** Begin"]}}
    return [
        {"role": "assistant", "content": "patching", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "cu_1", "content": "done"},
    ]


def _legacy_group() -> list[dict[str, Any]]:
    """A Chat legacy ``function_call`` and its ``function`` answer."""
    call = {"name": "bash", "arguments": json.dumps({"cmd": "ls"})}
    return [
        {"role": "assistant", "content": None, "function_call": call},
        {"role": "function", "name": "bash", "content": "a b c"},
    ]


def _malformed_group() -> list[dict[str, Any]]:
    """A Chat call whose arguments are an object, not a JSON text: malformed."""
    call = {"id": "m_1", "type": "function", "function": {"name": "bash", "arguments": {}}}
    return [
        {"role": "assistant", "content": "odd", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "m_1", "content": "out"},
    ]


def _anthropic_group() -> list[dict[str, Any]]:
    """An Anthropic call whose ``input`` is no object (malformed) and its result."""
    use = {"type": "tool_use", "id": "toolu_x", "name": "bash", "input": "ls"}
    result = {"type": "tool_result", "tool_use_id": "toolu_x", "content": "out"}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


# format, conversation builder, where the group goes (after the first pair), the group
CASES = {
    "chat custom call, input not a text": ("openai-chat", chat, 4, _custom_group),
    "chat legacy function_call": ("openai-chat", chat, 4, _legacy_group),
    "chat malformed arguments": ("openai-chat", chat, 4, _malformed_group),
    "anthropic malformed input": ("anthropic", anthropic, 3, _anthropic_group),
}


def _with_group(name: str) -> tuple[str, list[Any], list[Any]]:
    fmt, build, at, group = CASES[name]
    messages = build(PAIRS)
    added = group()
    messages[at:at] = added
    return fmt, messages, added


def _holds(sent: Any, given: Any) -> bool:
    """Whether ``sent`` is ``given``, or an Anthropic turn joined with ``given``'s very
    blocks (a notice joins the user turn before it)."""
    if sent is given:
        return True
    blocks, wanted = sent.get("content"), given.get("content")
    if type(blocks) is not list or type(wanted) is not list:
        return False
    return all(any(block is mine for block in blocks) for mine in wanted)


def _kept_together(prompt: list[Any], group: list[Any]) -> bool:
    """Whether ``group`` is in ``prompt`` whole, side by side, in order, its call the very
    object it was."""
    for start in range(len(prompt) - len(group) + 1):
        if prompt[start] is group[0] and all(
            _holds(prompt[start + k], m) for k, m in enumerate(group)
        ):
            return True
    return False


@pytest.mark.parametrize("name", CASES)
def test_calls_passed_through_stay_with_their_answers(name: str) -> None:
    """A group passed through comes back whole, never an answer without its call."""
    fmt, messages, group = _with_group(name)
    prepared = prepare(messages, STRATEGY, config=DROP_ALL, format=fmt)
    assert prepared.report[-1].outputs_dropped >= PAIRS // 2  # the pairs around it went
    assert not new_problems(fmt, messages, prepared.messages)
    assert _kept_together(prepared.messages, group)  # the exact rule, checked apart


@pytest.mark.parametrize("name", CASES)
def test_a_session_keeps_the_group_as_prepare_does(name: str, tmp_path: Path) -> None:
    """Round by round, a session's prompt is the one a whole prepare gives."""
    fmt, messages, group = _with_group(name)
    config = Config(prompt=DROP_ALL)
    with Session(str(tmp_path / "chat.json"), strategies=STRATEGY, config=config) as session:
        for end in range(len(messages) - 20, len(messages) + 1, 2):
            prompt = session.prepare(messages[:end]).messages
    assert prompt == prepare(messages, STRATEGY, config=DROP_ALL, format=fmt).messages
    assert _kept_together(prompt, group)


def _reasoning_then_answer() -> list[dict[str, Any]]:
    """Responses turns, a reasoning item and an answer without calls among them, then
    the user's next request."""
    items = responses(PAIRS)
    items[5:5] = [
        {"type": "reasoning", "id": "rs_answer", "summary": []},
        {"type": "message", "role": "assistant", "content": "done", "id": "msg_answer"},
        {"type": "message", "role": "user", "content": "now the next thing"},
    ]
    return items


def _lone_reasoning(items: list[Any]) -> list[str]:
    """The ids of the reasoning items not followed by an assistant message or a call."""
    lone = []
    for position, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        following = items[position + 1] if position + 1 < len(items) else {}
        kind = following.get("type")
        if not (kind == "function_call" or following.get("role") == "assistant"):
            lone.append(item["id"])
    return lone


def test_responses_reasoning_goes_with_an_answer_dropped_as_a_remark() -> None:
    """The answer dropped as a remark takes its reasoning along; the user stays."""
    items = _reasoning_then_answer()
    prepared = prepare(items, STRATEGY, config=DROP_ALL, format="openai-responses")
    kept = {item.get("id") for item in prepared.messages}
    assert "msg_answer" not in kept  # dropped as a remark among dropped pairs
    assert "rs_answer" not in kept
    assert any(item.get("content") == "now the next thing" for item in prepared.messages)
    assert not new_problems("openai-responses", items, prepared.messages)
    assert _lone_reasoning(prepared.messages) == []  # the exact rule, checked apart


def test_responses_reasoning_stays_with_its_answer_and_a_lone_one_is_the_inputs() -> None:
    """A reasoning item whose answer stays stays; one alone in the input is left alone."""
    items = _reasoning_then_answer()
    items[-4:-4] = [{"type": "reasoning", "id": "rs_alone", "summary": []}, dict(items[7])]
    assert _lone_reasoning(items) == ["rs_alone"]
    prepared = prepare(items, STRATEGY, config=DROP_ALL, format="openai-responses")
    assert _lone_reasoning(prepared.messages) == ["rs_alone"]
    untouched = prepare(items, "none", format="openai-responses")
    assert untouched.messages == items
