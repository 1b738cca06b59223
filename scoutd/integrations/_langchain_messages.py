"""LangChain message objects to OpenAI Chat messages and back, for the middleware.

scoutd works on OpenAI Chat messages (docs/FORMATS.md); the agent holds
LangChain messages. :func:`to_chat` maps each message to a chat dict that
carries its position under :data:`ORIGIN` (a key the format adapter keeps on
every message it keeps or edits). :func:`from_chat` maps the prepared prompt
back: a message scoutd left as it was is the agent's own object again; one it
edited is a copy of the original with only the edited part replaced (a tool
message's content, an assistant message's calls); one it added (the
compaction notice, inbox notices) becomes a new ``HumanMessage``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

__all__ = ["ORIGIN", "from_chat", "to_chat"]

# The key that ties a chat dict to the agent's message it came from.
ORIGIN = "scoutd_origin"

_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call", "server_tool_use"})
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
    }


def to_chat(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The OpenAI Chat view of the agent's messages, each tagged with its position."""
    chat: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        item: dict[str, Any] = {
            "role": _ROLES.get(message.type, "user"),
            "content": str(message.text),  # a str subclass in LangChain 1.x
            ORIGIN: index,
        }
        if isinstance(message, AIMessage) and message.tool_calls:
            item["tool_calls"] = [_call(call) for call in message.tool_calls]
        elif isinstance(message, ToolMessage):
            item["tool_call_id"] = message.tool_call_id
        chat.append(item)
    return chat


def _arguments(text: Any) -> dict[str, Any]:
    """A call's arguments as LangChain holds them (scoutd keeps them a JSON object text)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"arguments": text}


def _edited_ai(original: AIMessage, item: dict[str, Any]) -> AIMessage:
    calls = [
        ToolCall(
            name=str(call["function"]["name"]),
            args=_arguments(call["function"].get("arguments")),
            id=call.get("id"),
            type="tool_call",
        )
        for call in item.get("tool_calls") or ()
    ]
    kept = {call["id"] for call in calls}
    update: dict[str, Any] = {"tool_calls": calls, "invalid_tool_calls": []}
    # Provider-specific copies of the calls must not resurrect dropped ones.
    extra = {k: v for k, v in original.additional_kwargs.items() if k != "tool_calls"}
    update["additional_kwargs"] = extra
    if isinstance(original.content, list):  # call blocks (e.g. tool_use) of dropped calls go too
        update["content"] = [
            block for block in original.content if not _dropped_call_block(block, kept)
        ]
    return original.model_copy(update=update)


def _dropped_call_block(block: Any, kept: set[Any]) -> bool:
    """Whether ``block`` is a call block (``tool_use``, ...) of a call not ``kept``.

    A ``type`` or ``id`` that is not a string is never hashed: such a type is
    not a call block's, such an id no kept call's (docs/RELIABILITY.md).
    """
    if not isinstance(block, dict):
        return False
    kind, ident = block.get("type"), block.get("id")
    if type(kind) is not str or kind not in _CALL_BLOCKS:
        return False
    return not ((ident is None or type(ident) is str) and ident in kept)


def _edited(original: BaseMessage, item: dict[str, Any]) -> BaseMessage:
    if isinstance(original, AIMessage):
        return _edited_ai(original, item)
    return original.model_copy(update={"content": item.get("content") or ""})


def _added(item: Any) -> BaseMessage:
    content = item.get("content") if isinstance(item, dict) else None
    text = content if isinstance(content, str) else json.dumps(content)
    if isinstance(item, dict) and item.get("role") == "system":
        return SystemMessage(content=text)
    return HumanMessage(content=text)


def from_chat(
    prepared: Sequence[Any], sent: Sequence[dict[str, Any]], messages: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The agent's messages for the prepared prompt (``sent`` is what :func:`to_chat` gave)."""
    result: list[BaseMessage] = []
    for item in prepared:
        origin = item.get(ORIGIN) if isinstance(item, dict) else None
        if not isinstance(origin, int) or isinstance(origin, bool) or not 0 <= origin < len(sent):
            result.append(_added(item))
        elif item is sent[origin] or item == sent[origin]:
            result.append(messages[origin])
        else:
            result.append(_edited(messages[origin], item))
    return result
