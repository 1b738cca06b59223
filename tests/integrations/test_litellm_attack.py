"""The LiteLLM proxy hook under requests an agent might send (docs/INTEGRATIONS.md).

Through the real proxy app: what the hook hands LiteLLM, and what reaches the
(scripted) model behind it, compared with the same request served without
scoutd. With nothing to compact, the request goes on as the agent sent it, on
every route, for every call kind scoutd pairs; the request objects LiteLLM
holds are never changed.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import litellm
import pytest
from litellm.types.utils import GenericStreamingChunk
from starlette.testclient import TestClient

import scoutd
from scoutd.integrations.litellm import CHAT_HEADER, ProxySettings
from scoutd.integrations.litellm import proxy_handler as handler
from tests.integrations import test_litellm  # before litellm_model: it sets up LiteLLM
from tests.integrations.litellm_model import scripted_model

pytestmark = test_litellm.pytestmark

proxy = test_litellm.proxy


class Tap:
    """What the hook got and returned, and what the model got, request by request."""

    def __init__(self) -> None:
        self.bypass = False  # serve without scoutd: the hook returns the request as it came
        self.hooked: list[tuple[Any, Any, bool]] = []  # (before, after, held objects unchanged)
        self.seen: list[dict[str, Any]] = []  # the model's keyword arguments
        self.handed: list[tuple[Any, Any]] = []  # (the list handed on, a copy at the time)


@pytest.fixture
def tap(monkeypatch: pytest.MonkeyPatch) -> Iterator[Tap]:
    """The proxy's hook and its scripted model, watched."""
    found = Tap()
    hook = handler.async_pre_call_hook

    async def watched(
        user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> Any:
        key = "input" if "responses" in call_type else "messages"
        held = data.get(key)
        before = copy.deepcopy(held)
        if found.bypass:
            found.hooked.append((before, copy.deepcopy(held), True))
            return data
        out = await hook(user_api_key_dict, cache, data, call_type)
        found.handed.append((out.get(key), copy.deepcopy(out.get(key))))
        found.hooked.append((before, copy.deepcopy(out.get(key)), held == before))
        return out

    async def answer(*args: Any, **kwargs: Any) -> Any:
        found.seen.append(copy.deepcopy({k: kwargs[k] for k in ("messages",) if k in kwargs}))
        return await litellm.acompletion(
            model="gpt-4o", messages=kwargs["messages"], mock_response="done"
        )

    async def stream(*args: Any, **kwargs: Any) -> AsyncIterator[GenericStreamingChunk]:
        found.seen.append(copy.deepcopy({"messages": kwargs["messages"]}))
        yield {"text": "done", "is_finished": True, "finish_reason": "stop", "usage": None}

    monkeypatch.setattr(handler, "async_pre_call_hook", watched)
    monkeypatch.setattr(scripted_model, "astreaming", stream)
    monkeypatch.setattr(scripted_model, "acompletion", answer)
    yield found


@pytest.fixture
def chat(socket: tuple[str | None, str]) -> Iterator[str]:
    """The hook configured for one scenario (default window: nothing to compact); its chat."""
    socket_path, directory = socket
    handler.configure(ProxySettings(roots=(directory,), socket=socket_path))
    yield os.path.join(directory, "run.chat")
    handler.close()


CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"

CHAT_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": IMAGE}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "c2", "type": "custom", "custom": {"name": "patch", "input": "*** x"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a b"},
    {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    {"role": "user", "content": "go on"},
]
ANTHROPIC_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "listing"},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}},
            {"type": "tool_use", "id": "t2", "name": "cat", "input": {"path": "a"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a b"},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
            },
        ],
    },
]
RESPONSES_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "input_text", "text": "look"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "f1", "name": "ls", "arguments": "{}"},
    {"type": "function_call", "call_id": "f2", "name": "cat", "arguments": '{"p": "a"}'},
    {"type": "function_call_output", "call_id": "f1", "output": "a b"},
    {"type": "function_call_output", "call_id": "f2", "output": "x"},
    {"type": "custom_tool_call", "call_id": "k1", "name": "patch", "input": "*** x"},
    {"type": "custom_tool_call_output", "call_id": "k1", "output": "ok"},
    {"role": "user", "content": "go on"},
]
# The newer Responses call kinds, each with its output.
RESPONSES_KINDS: dict[str, list[dict[str, Any]]] = {
    "local_shell": [
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "s1",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {"type": "local_shell_call_output", "id": "s1", "output": "a b"},
    ],
    "shell": [
        {
            "type": "shell_call",
            "call_id": "s2",
            "status": "completed",
            "action": {"commands": ["ls"], "timeout_ms": 1000},
        },
        {
            "type": "shell_call_output",
            "call_id": "s2",
            "output": [
                {"stdout": "a b", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
            ],
        },
    ],
    "apply_patch": [
        {
            "type": "apply_patch_call",
            "call_id": "p1",
            "status": "completed",
            "operation": {"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@"},
        },
        {"type": "apply_patch_call_output", "call_id": "p1", "status": "completed", "output": ""},
    ],
    "computer": [
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "u1",
            "status": "completed",
            "action": {"type": "screenshot"},
            "pending_safety_checks": [],
        },
        {
            "type": "computer_call_output",
            "call_id": "u1",
            "output": {"type": "computer_screenshot", "image_url": IMAGE},
        },
    ],
}

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (CHAT, {"model": "scripted", "messages": CHAT_MESSAGES}),
    "chat-stream": (CHAT, {"model": "scripted", "messages": CHAT_MESSAGES, "stream": True}),
    "anthropic": (
        MESSAGES,
        {"model": "scripted", "max_tokens": 64, "system": "s", "messages": ANTHROPIC_MESSAGES},
    ),
    "anthropic-stream": (
        MESSAGES,
        {"model": "scripted", "max_tokens": 64, "messages": ANTHROPIC_MESSAGES, "stream": True},
    ),
    "responses": (RESPONSES, {"model": "scripted", "input": RESPONSES_ITEMS}),
    "responses-stream": (
        RESPONSES,
        {"model": "scripted", "input": RESPONSES_ITEMS, "stream": True},
    ),
    "responses-string": (RESPONSES, {"model": "scripted", "input": "go on"}),
    # A conversation the provider keeps: the new items only, outputs before their calls.
    "responses-previous": (
        RESPONSES,
        {"model": "scripted", "input": RESPONSES_ITEMS[4:], "previous_response_id": "resp_1"},
    ),
    "chat-cache-injection": (
        CHAT,
        {
            "model": "scripted",
            "messages": CHAT_MESSAGES,
            "cache_control_injection_points": [{"location": "message", "role": "user"}],
        },
    ),
    **{
        f"responses-{kind}": (
            RESPONSES,
            {"model": "scripted", "input": [RESPONSES_ITEMS[0], *items, RESPONSES_ITEMS[-1]]},
        )
        for kind, items in RESPONSES_KINDS.items()
    },
}


def send(proxy: TestClient, path: str, body: dict[str, Any], save_file: str) -> Any:
    """One request of the chat; its body as ASCII JSON (a lone surrogate as its escape)."""
    headers = {CHAT_HEADER: save_file, "content-type": "application/json"}
    return proxy.post(path, content=json.dumps(body), headers=headers)


def twice(proxy: TestClient, tap: Tap, path: str, body: dict[str, Any], save_file: str) -> Any:
    """The request served with scoutd, then without: both answers."""
    served = send(proxy, path, body, save_file)
    tap.bypass = True
    bare = send(proxy, path, body, save_file)
    tap.bypass = False
    return served, bare


def test_a_request_with_nothing_to_compact_goes_on_as_sent(
    proxy: TestClient, chat: str, tap: Tap
) -> None:
    """Every route and call kind, parallel calls, images, streaming, a conversation the
    provider keeps: the hook hands LiteLLM the agent's conversation, equal field for
    field (an ``input`` string as its one user item), LiteLLM's own objects unchanged,
    and the model gets what it gets without scoutd."""
    for name, (path, body) in sorted(CASES.items()):
        served, bare = twice(proxy, tap, path, body, chat)
        assert served.status_code == bare.status_code == 200, (name, served.text, bare.text)
        _, after, unchanged = tap.hooked[-2]
        assert unchanged, name
        sent = body["input" if path == RESPONSES else "messages"]
        assert after == ([{"role": "user", "content": sent}] if isinstance(sent, str) else sent)
        assert tap.seen[-2] == tap.seen[-1], name
        handed, copied = tap.handed[-1]
        assert handed == copied, name  # LiteLLM changed nothing scoutd handed it, in place
    assert len(tap.seen) == 2 * len(CASES)


ODD: dict[str, tuple[str, dict[str, Any]]] = {
    "messages-ints": (CHAT, {"model": "scripted", "messages": [1, 2]}),
    "messages-null-item": (CHAT, {"model": "scripted", "messages": [None]}),
    "unknown-role": (CHAT, {"model": "scripted", "messages": [{"role": "wizard", "content": "x"}]}),
    "no-role": (CHAT, {"model": "scripted", "messages": [{"content": "x"}]}),
    "tool-before-call": (
        CHAT,
        {
            "model": "scripted",
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "c1", "content": "early"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "late"},
            ],
        },
    ),
    "dup-ids": (
        CHAT,
        {
            "model": "scripted",
            "messages": [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        },
                        {"id": "c1", "type": "custom", "custom": {"name": "g", "input": "i"}},
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "one"},
                {"role": "tool", "tool_call_id": "c1", "content": "two"},
            ],
        },
    ),
    "surrogate": (
        CHAT,
        {"model": "scripted", "messages": [{"role": "user", "content": "a\ud800b"}]},
    ),
    "nonstr-keys-content": (
        CHAT,
        {"model": "scripted", "messages": [{"role": "user", "content": {"x": 1}}]},
    ),
    "anthropic-result-first": (
        MESSAGES,
        {
            "model": "scripted",
            "max_tokens": 5,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}],
                }
            ],
        },
    ),
    "responses-dict": (RESPONSES, {"model": "scripted", "input": {"role": "user", "content": "x"}}),
    "responses-ints": (RESPONSES, {"model": "scripted", "input": [1]}),
    "responses-output-first": (
        RESPONSES,
        {
            "model": "scripted",
            "input": [
                {"type": "function_call_output", "call_id": "z", "output": "x"},
                {"role": "user", "content": "x"},
            ],
        },
    ),
    "responses-dup-kinds": (
        RESPONSES,
        {
            "model": "scripted",
            "input": [
                {"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "z", "name": "f", "arguments": "{}"},
                {"type": "custom_tool_call", "call_id": "z", "name": "g", "input": "i"},
                {"type": "custom_tool_call_output", "call_id": "z", "output": "x"},
                {"type": "function_call_output", "call_id": "z", "output": "y"},
            ],
        },
    ),
}


def test_an_odd_request_is_refused_clearly_or_served_as_without_scoutd(
    proxy: TestClient, chat: str, tap: Tap
) -> None:
    """Bodies an agent might send that are odd: never a 500 of scoutd's, never a model
    call that differs from the one without scoutd. A conversation scoutd cannot read is
    a 400 naming scoutd; one it can read but not pair (outputs before their calls, ids
    shared by two calls) goes on as it came."""
    refused = 0
    for name, (path, body) in sorted(ODD.items()):
        calls = len(tap.seen)
        served = send(proxy, path, body, chat)
        if served.status_code == 400 and "scoutd refused" in served.text:
            refused += 1
            assert len(tap.seen) == calls, name  # the model never got it
            continue
        tap.bypass = True
        bare = send(proxy, path, body, chat)
        tap.bypass = False
        assert served.status_code == bare.status_code, (name, served.text, bare.text)
        new = tap.seen[calls:]
        assert len(new) in (0, 2) and new[:1] == new[1:], name
    assert refused == 3


def test_what_litellm_changes_in_a_prompt_stays_out_of_later_ones(
    proxy: TestClient, socket: tuple[str | None, str], tap: Tap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LiteLLM changes the messages it is handed in place: a message without a role gets
    the role ``assistant`` (its own message check), and a callback after scoutd's may mark
    messages (here: each gets ``"seen": true``). Through the daemon the hook handed on the
    session's own last prompt, on which the next answer is built: from the second request
    on, the prompt of the chat carried those changes, which the agent never sent (every
    request of 12 but the first differed from what scoutd makes of the conversation)."""
    socket_path, directory = socket
    window = {"context_window": 3_000}
    handler.configure(ProxySettings(roots=(directory,), socket=socket_path, config=window))
    watched = handler.async_pre_call_hook

    async def marking(
        user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> Any:
        out = await watched(user_api_key_dict, cache, data, call_type)
        for message in out["messages"]:
            message["seen"] = True
        return out

    monkeypatch.setattr(handler, "async_pre_call_hook", marking)
    chat = os.path.join(directory, "run.chat")
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "fix it"},
        {"content": "a message without a role"},
    ]
    differed = 0
    try:
        for k in range(12):
            call = {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            history += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{k}", "content": f"output {k} " * 300},
            ]
            response = send(proxy, CHAT, {"model": "scripted", "messages": history}, chat)
            assert response.status_code == 200, response.text
            expected = scoutd.prepare(history, config=window, format="openai-chat").messages
            differed += tap.hooked[-1][1] != expected
    finally:
        handler.close()
    assert len(tap.hooked) == 12
    assert any(len(after) < len(before) for before, after, _ in tap.hooked)  # compacted
    assert differed == 0, f"{differed} of 12 prompts carried LiteLLM's changes"
