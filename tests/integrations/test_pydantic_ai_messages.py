"""Pydantic AI messages to OpenAI Chat and back (scoutd/integrations/_pydantic_ai_messages.py).

What scoutd keeps comes back as the agent's own objects; what it edits or
drops changes only those parts of a copy; what it never sees (thinking,
native tool calls, retry feedback) survives; what it adds is a new request.
"""

from __future__ import annotations

import ast
import copy
import importlib
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

import scoutd
from scoutd.integrations._pydantic_ai_messages import ORIGIN, from_chat, to_chat
from tests.integrations.test_docs_samples import install_line, sample


def history() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[SystemPromptPart("be careful"), UserPromptPart("fix the tests")]),
        ModelResponse(
            parts=[
                ThinkingPart("let me look", signature="sig-1"),
                TextPart("Looking."),
                ToolCallPart("bash", {"command": "ls"}, tool_call_id="c1"),
                ToolCallPart("bash", '{"command": "cat a.py"}', tool_call_id="c2"),
                NativeToolCallPart("web_search", {"q": "x"}, tool_call_id="n1"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("bash", "a.py\nb.py\n", tool_call_id="c1"),
                ToolReturnPart(
                    "bash",
                    "no such command",
                    tool_call_id="c2",
                    outcome="retried",
                    retry=RetryInfo("model_retry"),
                ),
            ]
        ),
        ModelResponse(parts=[TextPart("done?")]),
        ModelRequest(parts=[RetryFeedbackPart("say more", retry=RetryInfo("model_retry"))]),
    ]


def plain(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k != ORIGIN} for item in items]


def test_the_chat_view_carries_ids_and_leaves_the_other_parts_out() -> None:
    sent = to_chat(history())
    assert plain(sent.chat) == [
        {"role": "system", "content": "be careful"},
        {"role": "user", "content": "fix the tests"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"cat a.py"}'},
                },
            ],
            # sent back with the turn: counted (a field the Chat view does not show)
            "thinking": [{"thinking": "let me look", "signature": "sig-1"}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py\n"},
        {"role": "tool", "tool_call_id": "c2", "content": "no such command"},
        {"role": "assistant", "content": "done?"},
        {"role": "user", "content": sent.chat[-1]["content"]},
    ]
    assert "say more" in sent.chat[-1]["content"]


def test_what_scoutd_keeps_is_the_agents_own_objects() -> None:
    messages = history()
    sent = to_chat(messages)
    back = from_chat(copy.deepcopy(sent.chat), sent, messages)
    assert len(back) == len(messages)
    assert all(a is b for a, b in zip(back, messages, strict=True))


def test_an_edit_changes_only_its_part_of_a_copy() -> None:
    messages: list[Any] = history()
    before = copy.deepcopy(messages)
    sent = to_chat(messages)
    prepared = copy.deepcopy(sent.chat)
    prepared[3]["content"] = "[output shortened]"
    del prepared[2]["tool_calls"][1]  # scoutd drops call c2 and its return
    del prepared[4]
    prepared.append({"role": "user", "content": "operator notice"})
    back: list[Any] = from_chat(prepared, sent, messages)
    assert messages == before  # the agent's history is untouched
    assert back[0] is messages[0] and back[3] is messages[3] and back[4] is messages[4]
    response = back[1]
    assert isinstance(response, ModelResponse) and response is not messages[1]
    kinds = [type(p).__name__ for p in response.parts]
    assert kinds == ["ThinkingPart", "TextPart", "ToolCallPart", "NativeToolCallPart"]
    assert response.parts[0] is messages[1].parts[0]  # thinking and its signature survive
    assert response.model_name == messages[1].model_name
    returns = back[2]
    assert isinstance(returns, ModelRequest) and len(returns.parts) == 1
    part = returns.parts[0]
    assert isinstance(part, ToolReturnPart)
    assert (part.tool_call_id, part.content) == ("c1", "[output shortened]")
    assert part.timestamp == messages[2].parts[0].timestamp
    added = back[-1]
    assert isinstance(added, ModelRequest)
    (notice,) = added.parts
    assert isinstance(notice, UserPromptPart) and notice.content == "operator notice"


def test_a_retry_feedback_stays_whole_and_a_dropped_request_goes() -> None:
    messages = history()
    sent = to_chat(messages)
    prepared = copy.deepcopy(sent.chat)
    prepared[-1]["content"] = "shortened"  # scoutd never edits users' text; if it did
    del prepared[3:5]  # both returns of a request, and the calls with them
    prepared[2].pop("tool_calls")
    back = from_chat(prepared, sent, messages)
    assert len(back) == len(messages) - 1
    assert back[-1].parts[0] is messages[-1].parts[0]
    assert [type(p).__name__ for p in back[1].parts] == [
        "ThinkingPart",
        "TextPart",
        "NativeToolCallPart",
    ]


def test_a_real_prepare_round_trips() -> None:
    """scoutd's own prepare over the chat view gives back messages of the same run."""
    messages = history()
    sent = to_chat(messages)
    prepared = scoutd.prepare(sent.chat, format="openai-chat").messages
    back = from_chat(prepared, sent, messages)
    assert all(a is b for a, b in zip(back, messages, strict=True))


def test_the_docs_sample_is_a_script_its_install_line_can_run() -> None:
    """docs/INTEGRATIONS.md: the script compiles, its names exist, its model extra is in."""
    source = sample("Pydantic AI")
    compile(source, "INTEGRATIONS.md (Pydantic AI)", "exec")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            assert all(hasattr(module, alias.name) for alias in node.names), node.module
    installed = install_line("Pydantic AI")
    assert "scoutd[pydantic-ai]" in installed
    assert '"openai:' in source and "pydantic-ai-slim[openai]" in installed
    assert "ScoutdCapability(save_file=SAVE_FILE)" in source
