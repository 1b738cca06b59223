"""The providers' own Python SDKs in their documented agent loops, with a scripted model.

Each loop puts the SDK's response objects straight back into the conversation,
as the SDKs' documentation does (``messages.append(completion.choices[0].message)``,
``input += response.output``, ``{"role": "assistant", "content": response.content}``).
The model is an ``httpx.MockTransport`` (a provider cannot run here): it records
the JSON body the SDK sends and answers with one tool call per round. What a
request sends is therefore the SDK's own serialization, the oracle the tests
compare scoutd's reading with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
import httpx
import httpx2
import openai

__all__ = ["KINDS", "loop", "recording", "sdk_client", "sent"]

# The SDK loops, each named by scoutd's format of its conversation.
KINDS = ("openai-chat", "openai-responses", "anthropic")

Prepare = Callable[[list[Any]], Sequence[Any]]


def _output(round_number: int) -> str:
    """A tool output long enough that compaction has something to do."""
    return "".join(f"line {n} of f{round_number}.py: value_{round_number}_{n}\n" for n in range(60))


def _answer(kind: str, round_number: int) -> dict[str, Any]:
    """The scripted model's answer of round ``round_number``: a remark and one tool call."""
    arguments = {"command": f"cat f{round_number}.py"}
    call_id = f"call_{round_number}"
    if kind == "openai-chat":
        message = {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps(arguments)},
                }
            ],
        }
        return {
            "id": f"chatcmpl-{round_number}",
            "object": "chat.completion",
            "created": 1,
            "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }
    if kind == "openai-responses":
        return {
            "id": f"resp_{round_number}",
            "object": "response",
            "created_at": 1,
            "model": "scripted",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {"type": "reasoning", "id": f"rs_{round_number}", "summary": []},
                {
                    "type": "function_call",
                    "id": f"fc_{round_number}",
                    "call_id": call_id,
                    "name": "bash",
                    "arguments": json.dumps(arguments),
                    "status": "completed",
                },
            ],
        }
    return {
        "id": f"msg_{round_number}",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": [
            {"type": "thinking", "thinking": f"read f{round_number}", "signature": "sig"},
            {"type": "text", "text": f"Reading f{round_number}.py."},
            {"type": "tool_use", "id": call_id, "name": "bash", "input": arguments},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


class _Model:
    """The scripted provider: records each request's body, answers the next round."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.content))
        response = httpx2.Response if self.kind == "anthropic" else httpx.Response
        return response(200, json=_answer(self.kind, len(self.bodies)))


def sdk_client(kind: str, model: Callable[..., Any], openai_http: Any = httpx) -> Any:
    """The SDK of ``kind`` with ``model`` as its transport (no network): Anthropic's
    through its own fork of httpx (from anthropic 2), OpenAI's through ``openai_http``."""
    if kind == "anthropic":
        http = httpx2.Client(transport=httpx2.MockTransport(model))
        return anthropic.Anthropic(
            api_key="test", base_url="http://provider.invalid", http_client=http, max_retries=0
        )
    return openai.OpenAI(
        api_key="test",
        base_url="http://provider.invalid/v1",
        http_client=openai_http.Client(transport=openai_http.MockTransport(model)),
        max_retries=0,
    )


def recording(session: Any, states: list[Any]) -> Callable[[list[Any]], list[Any]]:
    """A loop's prepare through ``session``, noting its state object after each round."""

    def prepare(held: list[Any]) -> list[Any]:
        prompt: list[Any] = session.prepare_prompt(held)
        states.append(session._state)
        return prompt

    return prepare


def _request(kind: str, client: Any, prompt: Sequence[Any]) -> Any:
    """One model call with ``prompt`` as the conversation; the SDK's parsed response."""
    if kind == "openai-chat":
        return client.chat.completions.create(model="scripted", messages=prompt)
    if kind == "openai-responses":
        return client.responses.create(model="scripted", input=prompt)
    return client.messages.create(model="scripted", max_tokens=100, messages=prompt)


def _conversation_of(kind: str, body: dict[str, Any]) -> list[Any]:
    return body["input"] if kind == "openai-responses" else body["messages"]


def sent(kind: str, conversation: Sequence[Any]) -> list[Any]:
    """The conversation as the SDK of ``kind`` sends it: the JSON of one request."""
    model = _Model(kind)
    _request(kind, sdk_client(kind, model), conversation)
    return _conversation_of(kind, model.bodies[0])


def loop(kind: str, rounds: int, prepare: Prepare | None = None) -> tuple[list[Any], list[Any]]:
    """Run the SDK's documented loop for ``rounds`` model calls.

    Before each call ``prepare`` (default: none) turns the conversation into the
    prompt sent. Returns the conversation the agent holds (the SDK's objects in
    it) and the conversation of each request as sent.
    """
    model = _Model(kind)
    client = sdk_client(kind, model)
    conversation: list[Any] = [{"role": "user", "content": "Read every file."}]
    for _ in range(rounds):
        prompt = conversation if prepare is None else prepare(conversation)
        response = _request(kind, client, prompt)
        number = len(model.bodies)
        if kind == "openai-chat":
            message = response.choices[0].message
            conversation.append(message)
            call_id = message.tool_calls[0].id
            conversation.append(
                {"role": "tool", "tool_call_id": call_id, "content": _output(number)}
            )
        elif kind == "openai-responses":
            conversation += response.output
            call_id = response.output[-1].call_id
            conversation.append(
                {"type": "function_call_output", "call_id": call_id, "output": _output(number)}
            )
        else:
            conversation.append({"role": "assistant", "content": response.content})
            call_id = response.content[-1].id
            result = {"type": "tool_result", "tool_use_id": call_id, "content": _output(number)}
            conversation.append({"role": "user", "content": [result]})
    return conversation, [_conversation_of(kind, body) for body in model.bodies]
