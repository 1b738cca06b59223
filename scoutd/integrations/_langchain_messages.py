"""LangChain message objects to OpenAI Chat messages and back, for the middleware.

scoutd works on OpenAI Chat messages (docs/FORMATS.md); the agent holds
LangChain messages. :func:`to_chat` maps each message to a chat dict that
carries its position under :data:`ORIGIN` (a key the format adapter keeps on
every message it keeps or edits). A message's role comes from its class, so
that a streamed chunk (``AIMessageChunk``, ...) is what its message is; an
assistant message's calls are its ``tool_calls`` and its
``invalid_tool_calls`` too, which the agent answers as well (LangChain's
``create_agent`` adds an error ``ToolMessage`` for each before every model
call); its thinking blocks (``thinking``, ``redacted_thinking``, ``reasoning``)
go in a field of their own, which the estimate counts with the turn (the
provider gets them back) and scoutd never edits. :func:`from_chat` maps the
prepared prompt back: a message scoutd left as it was is the agent's own
object again; one it edited is a copy of the original with only the edited
part replaced (a tool message's content, an assistant message's calls, each
kept valid or invalid as it was, and the call blocks of its content: a dropped
call's go, a kept Responses ``function_call`` item keeps its ids and takes the
arguments scoutd gave its call); one it added (the compaction notice, inbox
notices) becomes a new ``HumanMessage``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from ..formats.view import ORIGIN_KEY
from ..strategies.media import is_media

__all__ = ["ORIGIN", "from_chat", "to_chat"]

# The key that ties a chat dict to what it came from (never sent, never counted).
ORIGIN = ORIGIN_KEY

_CALL_BLOCKS = frozenset(
    {"tool_use", "tool_call", "function_call", "custom_tool_call", "server_tool_use"}
)
# Call blocks that are Responses items (langchain-openai's ``responses/v1`` content): the
# call's id is their ``call_id`` (their ``id`` is the item's), and the model sends them
# as they are, so a kept call's block carries the arguments scoutd gives it.
_ITEM_BLOCKS = frozenset({"function_call", "custom_tool_call"})
# A turn's thinking as providers' integrations keep it in the content (Anthropic's
# blocks, LangChain's standard reasoning block): sent back, so counted.
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})
# The view field that carries an assistant turn's thinking, so that the estimate
# counts it with its turn (a field the adapter does not know counts as sent).
THINKING = "thinking"
# The roles a generic ChatMessage may carry as its own; any other is a user's.
_CHAT_ROLES = {"assistant": "assistant", "system": "system", "developer": "system"}


def _role(message: BaseMessage) -> str:
    """The chat role of a message, by its class (a chunk's class is its message's)."""
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ChatMessage):
        return _CHAT_ROLES.get(message.role, "user")
    return "user"


def _call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
    }


def _invalid_call(call: InvalidToolCall) -> dict[str, Any]:
    """An invalid call as the provider gets it: its name and its raw arguments text."""
    arguments = call.get("args")
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {
            "name": call.get("name") or "",
            "arguments": arguments if isinstance(arguments, str) else "",
        },
    }


def _content(message: BaseMessage, index: int) -> str | list[dict[str, Any]]:
    """A message's content as scoutd sees it: its text, then a block standing for each
    image or file of its content (named by position, not data), so that each weighs
    what scoutd counts for media (:mod:`scoutd.strategies.media`); a text alone when
    it holds none, and for a tool message (an OpenAI Chat tool message is a text:
    scoutd would not count an output's media, and shortens an output to a text).
    """
    text = str(message.text)  # a str subclass in LangChain 1.x
    blocks = message.content if isinstance(message.content, list) else []
    if isinstance(message, ToolMessage):
        blocks = []
    media = [(n, block) for n, block in enumerate(blocks) if is_media(block)]
    if not media:
        return text
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for number, block in media:
        name = f"langchain:{index}.{number}"
        if isinstance(block, dict) and "image" in str(block.get("type")):
            content.append({"type": "image_url", "image_url": {"url": name}})
        else:
            content.append({"type": "file", "file": {"file_id": name}})
    return content


def _thinking(message: BaseMessage) -> list[Any]:
    """The thinking blocks of an assistant message's content, as they are sent."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return []
    return [
        block
        for block in message.content
        if isinstance(block, dict)
        and type(block.get("type")) is str
        and block["type"] in _THINKING_BLOCKS
    ]


def to_chat(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The OpenAI Chat view of the agent's messages, each tagged with its position."""
    chat: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        item: dict[str, Any] = {
            "role": _role(message),
            "content": _content(message, index),
            ORIGIN: index,
        }
        thought = _thinking(message)
        if thought:
            item[THINKING] = thought
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            calls = [_call(call) for call in message.tool_calls]
            calls += [_invalid_call(call) for call in message.invalid_tool_calls]
            item["tool_calls"] = calls
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
    """The original with scoutd's calls: a kept invalid call stays invalid, as it was."""
    valid = {call.get("id") for call in original.tool_calls}
    invalid = {call.get("id"): call for call in original.invalid_tool_calls}
    calls: list[ToolCall] = []
    kept_invalid: list[InvalidToolCall] = []
    for call in item.get("tool_calls") or ():
        ident = call.get("id")
        if _hashable(ident) and ident not in valid and ident in invalid:
            kept_invalid.append(invalid[ident])
            continue
        calls.append(
            ToolCall(
                name=str(call["function"]["name"]),
                args=_arguments(call["function"].get("arguments")),
                id=ident,
                type="tool_call",
            )
        )
    kept = {call["id"] for call in calls} | {call.get("id") for call in kept_invalid}
    update: dict[str, Any] = {"tool_calls": calls, "invalid_tool_calls": kept_invalid}
    # Provider-specific copies of the calls must not resurrect dropped ones.
    extra = {k: v for k, v in original.additional_kwargs.items() if k != "tool_calls"}
    update["additional_kwargs"] = extra
    if isinstance(original.content, list):  # call blocks (e.g. tool_use) of dropped calls go too
        shortened = _shortened_arguments(original, item)
        update["content"] = [
            _kept_block(block, shortened)
            for block in original.content
            if not _dropped_call_block(block, kept)
        ]
    return original.model_copy(update=update)


def _shortened_arguments(original: AIMessage, item: dict[str, Any]) -> dict[str, str]:
    """The arguments text scoutd gave each valid call it changed, by call id."""
    before = {call.get("id"): _call(call)["function"]["arguments"] for call in original.tool_calls}
    changed: dict[str, str] = {}
    for call in item.get("tool_calls") or ():
        ident = call.get("id")
        arguments = call["function"].get("arguments")
        if (
            type(ident) is str
            and isinstance(arguments, str)
            and before.get(ident, arguments) != arguments
        ):
            changed[ident] = arguments
    return changed


def _kept_block(block: Any, shortened: dict[str, str]) -> Any:
    """A kept block; a Responses call item whose arguments scoutd shortened carries the
    shortened text (the model sends the item, not the message's ``tool_calls``)."""
    if not isinstance(block, dict) or block.get("type") != "function_call":
        return block
    ident = block.get("call_id")
    if type(ident) is not str or ident not in shortened:
        return block
    return {**block, "arguments": shortened[ident]}


def _hashable(ident: Any) -> bool:
    """Whether a call id from scoutd's answer may be looked up (a text, or none)."""
    return ident is None or type(ident) is str


def _dropped_call_block(block: Any, kept: set[Any]) -> bool:
    """Whether ``block`` is a call block (``tool_use``, ...) of a call not ``kept``
    (a Responses item's call is its ``call_id``, any other block's its ``id``).

    A ``type`` or id that is not a string is never hashed: such a type is
    not a call block's, such an id no kept call's (docs/RELIABILITY.md).
    """
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if type(kind) is not str or kind not in _CALL_BLOCKS:
        return False
    ident = block.get("call_id" if kind in _ITEM_BLOCKS else "id")
    return not ((ident is None or type(ident) is str) and ident in kept)


def _edited(original: BaseMessage, item: dict[str, Any]) -> BaseMessage:
    """The original with scoutd's text (a shortened output). A content that is no
    text holds the blocks that stand for media: the original's content stays."""
    if isinstance(original, AIMessage):
        return _edited_ai(original, item)
    content = item.get("content")
    if content is not None and not isinstance(content, str):
        return original
    return original.model_copy(update={"content": content or ""})


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
