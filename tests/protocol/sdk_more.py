"""The SDKs' richer response objects in their documented loops, with a scripted model.

Beyond one plain tool call a round (tests/protocol/sdk_loops.py): structured
outputs (``client.chat.completions.parse``, ``client.responses.parse``, whose
objects carry ``parsed`` values), Responses output items of the hosted tools
(``web_search_call``, ``file_search_call``) and reasoning items with summaries
and encrypted content, messages with annotations, and Anthropic's server tool
blocks, citations, ``redacted_thinking`` and a message streamed and assembled by
the SDK (``client.messages.stream(...).get_final_message()``). The model is a
``MockTransport`` that records each request body: the oracle is the JSON the
SDK itself sends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx2
import openai
import pydantic

from .sdk_loops import KINDS, Prepare, sdk_client

__all__ = ["KINDS", "Answer", "litellm_loop", "litellm_sent", "rich_loop", "sent_by"]


class Answer(pydantic.BaseModel):
    """The structured output and tool arguments the parse helpers turn into ``parsed``."""

    path: str
    lines: int


def _output(number: int) -> str:
    """A tool output long enough that compaction has something to do."""
    return "".join(f"row {n} of r{number}.txt: item_{number}_{n}\n" for n in range(60))


def _chat(number: int) -> dict[str, Any]:
    arguments = json.dumps({"path": f"r{number}.txt", "lines": number})
    message = {
        "role": "assistant",
        "content": json.dumps({"path": f"r{number}.txt", "lines": 60}),
        "refusal": None,
        "tool_calls": [
            {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": "Answer", "arguments": arguments},
            }
        ],
    }
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [choice],
    }


def _responses(number: int) -> dict[str, Any]:
    text = json.dumps({"path": f"r{number}.txt", "lines": 60})
    annotation = {
        "type": "url_citation",
        "url": f"https://example.invalid/{number}",
        "title": "a source",
        "start_index": 0,
        "end_index": 4,
    }
    output = [
        {
            "type": "web_search_call",
            "id": f"ws_{number}",
            "status": "completed",
            "action": {"type": "search", "query": f"r{number}"},
        },
        {
            "type": "file_search_call",
            "id": f"fs_{number}",
            "status": "completed",
            "queries": [f"r{number}"],
            "results": None,
        },
        {
            "type": "reasoning",
            "id": f"rs_{number}",
            "summary": [{"type": "summary_text", "text": f"look at r{number}"}],
            "encrypted_content": f"opaque-{number}",
        },
        {
            "type": "message",
            "id": f"msg_{number}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [annotation]}],
        },
        {
            "type": "function_call",
            "id": f"fc_{number}",
            "call_id": f"call_{number}",
            "name": "bash",
            "arguments": json.dumps({"command": f"cat r{number}.txt"}),
            "status": "completed",
        },
    ]
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 1,
        "model": "scripted",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": output,
    }


def _anthropic_blocks(number: int) -> list[dict[str, Any]]:
    result = {
        "type": "web_search_result",
        "url": f"https://example.invalid/{number}",
        "title": "a source",
        "encrypted_content": f"page-{number}",
        "page_age": None,
    }
    citation = {
        "type": "web_search_result_location",
        "url": result["url"],
        "title": "a source",
        "encrypted_index": f"index-{number}",
        "cited_text": "a line",
    }
    return [
        {"type": "thinking", "thinking": f"find r{number}", "signature": f"sig{number}"},
        {"type": "redacted_thinking", "data": f"hidden-{number}"},
        {"type": "server_tool_use", "id": f"srv_{number}", "name": "web_search", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": f"srv_{number}", "content": [result]},
        {"type": "text", "text": f"Found r{number}.", "citations": [citation]},
        {"type": "tool_use", "id": f"call_{number}", "name": "bash", "input": {"n": number}},
    ]


def _anthropic(number: int) -> dict[str, Any]:
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": _anthropic_blocks(number),
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def _stream(number: int) -> bytes:
    """Round ``number``'s Anthropic answer as server-sent events, block by block."""
    whole = _anthropic(number)
    start = dict(whole, content=[], stop_reason=None)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "tool_use":
            opening = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        elif block["type"] == "text":
            opening = dict(block, text="")
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opening, delta = block, None
        events.append({"type": "content_block_start", "index": index, "content_block": opening})
        if delta is not None:
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        }
    )
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


class _Model:
    """The scripted provider: records each request's body, answers the next round."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.bodies.append(body)
        number = len(self.bodies)
        if self.kind == "anthropic":
            if body.get("stream"):
                headers = {"content-type": "text/event-stream"}
                return httpx2.Response(200, content=_stream(number), headers=headers)
            return httpx2.Response(200, json=_anthropic(number))
        answer = _chat(number) if self.kind == "openai-chat" else _responses(number)
        return httpx2.Response(200, json=answer)


def _request(kind: str, client: Any, prompt: Sequence[Any], number: int) -> Any:
    """One model call as the SDK's documentation makes it; the SDK's parsed response."""
    if kind == "openai-chat":
        tool = openai.pydantic_function_tool(Answer)
        return client.chat.completions.parse(
            model="scripted", messages=prompt, response_format=Answer, tools=[tool]
        )
    if kind == "openai-responses":
        return client.responses.parse(model="scripted", input=prompt, text_format=Answer)
    if number % 2:  # every other round streamed, the message assembled by the SDK
        with client.messages.stream(model="scripted", max_tokens=100, messages=prompt) as stream:
            return stream.get_final_message()
    return client.messages.create(model="scripted", max_tokens=100, messages=prompt)


def _conversation_of(kind: str, body: dict[str, Any]) -> list[Any]:
    return list(body["input"] if kind == "openai-responses" else body["messages"])


def sent_by(kind: str, conversation: Sequence[Any]) -> list[Any]:
    """The conversation as the SDK of ``kind`` sends it: the JSON of one request."""
    model = _Model(kind)
    client = sdk_client(model.kind, model, httpx2)
    if kind == "openai-chat":
        client.chat.completions.create(model="scripted", messages=conversation)
    elif kind == "openai-responses":
        client.responses.create(model="scripted", input=conversation)
    else:
        client.messages.create(model="scripted", max_tokens=100, messages=conversation)
    return _conversation_of(kind, model.bodies[0])


def rich_loop(
    kind: str, rounds: int, prepare: Prepare | None = None
) -> tuple[list[Any], list[Any], list[int]]:
    """Run the SDK's documented loop for ``rounds`` model calls with the richer answers.

    Returns the conversation the agent holds (the SDK's objects in it), the
    conversation of each request as sent, and how many messages the conversation
    held at each call.
    """
    model = _Model(kind)
    client = sdk_client(model.kind, model, httpx2)
    conversation: list[Any] = [{"role": "user", "content": "Read every file."}]
    helds: list[int] = []
    for number in range(1, rounds + 1):
        helds.append(len(conversation))
        prompt = conversation if prepare is None else prepare(conversation)
        response = _request(kind, client, prompt, number)
        if kind == "openai-chat":
            message = response.choices[0].message
            conversation.append(message)
            answer = {"role": "tool", "tool_call_id": message.tool_calls[0].id}
            conversation.append(dict(answer, content=_output(number)))
        elif kind == "openai-responses":
            conversation += response.output
            call_id = response.output[-1].call_id
            answer = {"type": "function_call_output", "call_id": call_id}
            conversation.append(dict(answer, output=_output(number)))
        else:
            conversation.append({"role": "assistant", "content": response.content})
            result = {"type": "tool_result", "tool_use_id": response.content[-1].id}
            conversation.append(
                {"role": "user", "content": [dict(result, content=_output(number))]}
            )
    return conversation, [_conversation_of(kind, body) for body in model.bodies], helds


def _litellm_client(answers: list[dict[str, Any]]) -> Any:
    """An OpenAI client for LiteLLM to call through (its ``client`` argument)."""

    def provider(request: Any) -> Any:
        answers.append(json.loads(request.content))
        number = len(answers)
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{number}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"n": number})},
                }
            ],
        }
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
        body = {"id": f"c{number}", "object": "chat.completion", "created": 1}
        return httpx2.Response(200, json=dict(body, model="s", choices=[choice], usage=usage))

    return openai.OpenAI(
        api_key="test",
        base_url="http://provider.invalid/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(provider)),
        max_retries=0,
    )


@contextmanager
def _own_event_loop() -> Iterator[None]:
    """An event loop for LiteLLM's synchronous calls to find, closed afterwards.

    ``litellm.completion`` asks for the thread's event loop, which makes one and
    leaves it open: collected during a later test, it warns there.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def litellm_loop(
    rounds: int, prepare: Prepare | None = None
) -> tuple[list[Any], list[Any], list[int]]:
    """LiteLLM's documented loop (``litellm.completion``, then
    ``messages.append(response.choices[0].message)``): as :func:`rich_loop`."""
    with _own_event_loop():
        return _litellm_loop(rounds, prepare)


def _litellm_loop(rounds: int, prepare: Prepare | None) -> tuple[list[Any], list[Any], list[int]]:
    import litellm

    bodies: list[dict[str, Any]] = []
    client = _litellm_client(bodies)
    conversation: list[Any] = [{"role": "user", "content": "Read every file."}]
    helds: list[int] = []
    for number in range(1, rounds + 1):
        helds.append(len(conversation))
        prompt = conversation if prepare is None else prepare(conversation)
        response = litellm.completion(model="openai/scripted", messages=prompt, client=client)
        message = response.choices[0].message
        conversation.append(message)
        answer = {"role": "tool", "tool_call_id": message.tool_calls[0].id}
        conversation.append(dict(answer, content=_output(number)))
    return conversation, [list(body["messages"]) for body in bodies], helds


def litellm_sent(conversation: Sequence[Any]) -> list[Any]:
    """The conversation as LiteLLM sends it to an OpenAI-compatible provider."""
    import litellm

    bodies: list[dict[str, Any]] = []
    with _own_event_loop():
        litellm.completion(
            model="openai/scripted", messages=list(conversation), client=_litellm_client(bodies)
        )
    return list(bodies[0]["messages"])
