"""Pydantic AI messages to OpenAI Chat messages and back, for the capability.

scoutd works on OpenAI Chat messages (docs/FORMATS.md); a Pydantic AI agent
holds ``ModelRequest``/``ModelResponse`` objects made of parts. :func:`to_chat`
maps the parts scoutd understands to chat dicts, each tagged under
:data:`ORIGIN` with its slot (the message and part it came from):

- a request's ``SystemPromptPart`` is a system message, a ``UserPromptPart`` a
  user message (its images, audio and files as content blocks that stand for
  them, so that each weighs what scoutd counts for media, not the text of its
  data), a ``ToolReturnPart`` (a tool retry too) or a legacy ``RetryPromptPart``
  naming a tool a tool message with its call id, a ``RetryFeedbackPart`` (or a
  legacy retry that names no call) a user message;
- a response is one assistant message: its ``TextPart`` texts and its
  ``ToolCallPart`` calls, with their ids, and its ``ThinkingPart`` texts,
  signatures and provider details in a field of their own, which the
  estimate counts with the turn (the provider gets them back) and scoutd
  never edits.

Every other part (native tool calls and returns, files, the
framework's own delta and instruction parts) is not sent and stays where it
is. :func:`from_chat` maps the prepared prompt back: a message scoutd left
whole is the agent's own object; one it edited or shortened is a copy with
only those parts replaced or dropped (``dataclasses.replace``; a message
whose sent parts were all dropped goes, with its other parts; a request none
of whose parts is sent stays, in its place); one it added (the compaction
notice, inbox notices) is a new ``ModelRequest`` with a ``UserPromptPart``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CachePoint,
    FileUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserPromptPart,
)

from ..formats.view import ORIGIN_KEY

__all__ = ["ORIGIN", "Sent", "from_chat", "to_chat"]

# The key that ties a chat dict to the slot (message, parts) it came from (never sent,
# never counted).
ORIGIN = ORIGIN_KEY
# The view field that carries a response's thinking, so that the estimate counts it
# with its turn (a field the adapter does not know counts as sent).
THINKING = "thinking"


@dataclass(frozen=True)
class _Slot:
    """Where a chat dict came from: a message, and its part (``None``: a whole response)."""

    message: int
    part: int | None


@dataclass
class Sent:
    """What :func:`to_chat` sent: the chat dicts and the slot of each."""

    chat: list[dict[str, Any]]
    slots: list[_Slot]


def _media_block(item: Any) -> dict[str, Any] | None:
    """The content block that stands for an image, audio or a file in a prompt, or None.

    It names the item by its identifier, not its data: the view is only
    counted (a user prompt with media is never edited), and a media block
    weighs a fixed cost there (:mod:`scoutd.strategies.media`).
    """
    if not isinstance(item, FileUrl | BinaryContent | UploadedFile):
        return None
    name = f"pydantic-ai:{item.identifier}"
    if isinstance(item, ImageUrl) or (isinstance(item, BinaryContent) and item.is_image):
        return {"type": "image_url", "image_url": {"url": name}}
    if isinstance(item, AudioUrl) or (isinstance(item, BinaryContent) and item.is_audio):
        return {"type": "input_audio", "input_audio": {"data": name, "format": "wav"}}
    return {"type": "file", "file": {"file_id": name}}


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    """A user prompt's content: a string as it is, the items of a list joined as text
    (others as JSON), or, when the list holds media, text and media blocks."""
    if isinstance(content, str):
        return content
    if not any(_media_block(item) is not None for item in content):
        texts = [_item_text(item) for item in content if not isinstance(item, CachePoint)]
        return "\n".join(texts)
    blocks: list[dict[str, Any]] = []
    for item in content:
        block = _media_block(item)
        if block is None and not isinstance(item, CachePoint):
            block = {"type": "text", "text": _item_text(item)}
        if block is not None:
            blocks.append(block)
    return blocks


def _item_text(item: Any) -> str:
    """A prompt item's text: a string or a text item's content, anything else as JSON."""
    if isinstance(item, str):
        return item
    if isinstance(item, TextContent):
        return item.content
    return json.dumps(item, default=str)


def _request_item(part: ModelRequestPart) -> dict[str, Any] | None:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content)}
    if isinstance(part, ToolReturnPart):
        # Unwrapped: the provider mapping wraps a failed or retried return again.
        text = part.model_response_str(wrap_if_error=False)
        return {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
    if isinstance(part, RetryFeedbackPart):
        return {"role": "user", "content": part.model_response()}
    if isinstance(part, RetryPromptPart):  # deprecated, still held by older histories
        if part.tool_name is None:
            return {"role": "user", "content": part.model_response()}
        return {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()}
    return None


def _response_item(message: ModelResponse) -> dict[str, Any]:
    texts = [part.content for part in message.parts if isinstance(part, TextPart)]
    item: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    calls = [
        {
            "id": part.tool_call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
        }
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    if calls:
        item["tool_calls"] = calls
    thought = [_thought(part) for part in message.parts if isinstance(part, ThinkingPart)]
    if thought:  # sent back to the provider (its signature too): counted, never edited
        item[THINKING] = thought
    return item


def _thought(part: ThinkingPart) -> dict[str, Any]:
    """What a thinking part sends back, as the estimate counts it: its text, its
    signature and its provider details (where a model keeps more of the thinking it
    sends: a gpt-oss model's raw chain of thought, ``raw_content``, goes back as the
    Responses reasoning item's content), the latter as JSON text."""
    thought: dict[str, Any] = {"thinking": part.content, "signature": part.signature}
    if part.provider_details:
        try:
            details = json.dumps(part.provider_details, default=str)
        except (TypeError, ValueError, RecursionError):  # keys JSON has no form for
            details = str(part.provider_details)
        thought["details"] = details
    return thought


def to_chat(messages: Sequence[ModelMessage]) -> Sent:
    """The OpenAI Chat view of the agent's messages, each dict tagged with its slot."""
    sent = Sent([], [])
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            found = [(_response_item(message), _Slot(index, None))]
        else:
            found = []
            for number, part in enumerate(message.parts):
                item = _request_item(part)
                if item is not None:
                    found.append((item, _Slot(index, number)))
        for item, slot in found:
            item[ORIGIN] = len(sent.chat)
            sent.chat.append(item)
            sent.slots.append(slot)
    return sent


def _edited_request_part(part: ModelRequestPart, item: dict[str, Any]) -> ModelRequestPart:
    """``part`` with scoutd's text: a plain tool return, a system or a text user prompt.

    Others stay whole: the framework's own returns (tool search, capability
    loads), retry feedback and legacy retries hold structured content that a
    text cannot replace.
    """
    content = item.get("content")
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    if type(part) is ToolReturnPart:
        plain: ToolReturnPart[Any] = part
        return replace(plain, content=text)
    if isinstance(part, SystemPromptPart):
        return replace(part, content=text)
    if isinstance(part, UserPromptPart) and isinstance(part.content, str):
        return replace(part, content=text)
    return part


def _edited_response(message: ModelResponse, item: dict[str, Any]) -> ModelResponse:
    """The response with scoutd's text and calls: dropped calls go, other parts stay."""
    calls = {
        call.get("id"): call
        for call in item.get("tool_calls") or ()
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    }
    text = item.get("content")
    text_changed = text != _response_item(message)["content"]
    parts: list[ModelResponsePart] = []
    text_placed = False
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            call = calls.get(part.tool_call_id)
            if call is None:
                continue
            arguments = call["function"].get("arguments")
            if arguments != part.args_as_json_str():
                part = replace(part, args=arguments)
        elif isinstance(part, TextPart) and text_changed:
            if text_placed or not isinstance(text, str) or not text:
                continue
            part, text_placed = replace(part, content=text), True
        parts.append(part)
    return replace(message, parts=parts)


def _added(item: Any) -> ModelRequest:
    content = item.get("content") if isinstance(item, dict) else item
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    if isinstance(item, dict) and item.get("role") == "system":
        return ModelRequest(parts=[SystemPromptPart(content=text)])
    return ModelRequest(parts=[UserPromptPart(content=text)])


def _request(
    message: ModelRequest,
    index: int,
    chosen: dict[int, dict[str, Any] | None],
    sent: Sent,
    first: bool,
) -> ModelRequest | None:
    """The request for the items of one run of ``chosen`` (part -> prepared item, None: as sent)."""
    mapped = {slot.part for slot in sent.slots if slot.message == index}
    parts: list[ModelRequestPart] = []
    for number, part in enumerate(message.parts):
        if number not in mapped:
            if first:  # parts never sent stay with the message's first run
                parts.append(part)
        elif number in chosen:
            item = chosen[number]
            parts.append(part if item is None else _edited_request_part(part, item))
    if not any(number in mapped for number in chosen):
        return None
    if first and len(chosen) == len(mapped) and all(v is None for v in chosen.values()):
        return message
    return replace(message, parts=parts)


def _origin(item: Any, sent: Sent) -> int | None:
    origin = item.get(ORIGIN) if isinstance(item, dict) else None
    if not isinstance(origin, int) or isinstance(origin, bool):
        return None
    return origin if 0 <= origin < len(sent.chat) else None


def from_chat(
    prepared: Sequence[Any], sent: Sent, messages: Sequence[ModelMessage]
) -> list[ModelMessage]:
    """The agent's messages for the prepared prompt (``sent`` is what :func:`to_chat` gave)."""
    result: list[ModelMessage] = []
    seen: set[int] = set()
    run_index: int | None = None
    run: dict[int, dict[str, Any] | None] = {}
    # Requests none of whose parts is sent (framework parts only): scoutd never saw
    # them, so they stay, each before the first message that came after it.
    unsent = iter(sorted(set(range(len(messages))) - {slot.message for slot in sent.slots}))
    waiting = next(unsent, None)

    def place(before: int | None) -> None:
        nonlocal waiting
        while waiting is not None and (before is None or waiting < before):
            result.append(messages[waiting])
            waiting = next(unsent, None)

    def flush() -> None:
        nonlocal run_index
        if run_index is not None:
            message = messages[run_index]
            assert isinstance(message, ModelRequest)
            built = _request(message, run_index, run, sent, run_index not in seen)
            seen.add(run_index)
            if built is not None:
                result.append(built)
        run_index = None
        run.clear()

    for item in prepared:
        origin = _origin(item, sent)
        if origin is None:
            flush()
            result.append(_added(item))
            continue
        slot = sent.slots[origin]
        if waiting is not None and waiting < slot.message:
            flush()
            place(slot.message)
        unchanged = item is sent.chat[origin] or item == sent.chat[origin]
        if slot.part is None:
            flush()
            message = messages[slot.message]
            assert isinstance(message, ModelResponse)
            result.append(message if unchanged else _edited_response(message, item))
            continue
        if slot.message != run_index:
            flush()
            run_index = slot.message
        run[slot.part] = None if unchanged else item
    flush()
    place(None)
    return result
