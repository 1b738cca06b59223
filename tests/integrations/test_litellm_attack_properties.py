"""Conversations compacted through the LiteLLM proxy stay valid for their API (docs/FORMATS.md).

Hypothesis builds agent conversations of every call kind scoutd pairs (OpenAI
Chat function and custom calls; Anthropic ``tool_use`` with thinking; Responses
function, custom, local shell, shell, apply_patch and computer calls, with
reasoning items), parallel calls included, with outputs large enough for a
small window to compact. Each goes through the real proxy app twice, half of it
and then all of it, as an agent's next request continues its chat's session.
What the hook hands LiteLLM must be what :func:`scoutd.prepare` makes of the
whole conversation, a valid request of its API (every output answers a kept
call of its kind, every kept call is answered, a reasoning item stays with its
turn, no empty content), with the newest output verbatim; and the request
objects LiteLLM holds are never changed.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import scoutd
from scoutd.integrations.litellm import CHAT_HEADER, ProxySettings
from scoutd.integrations.litellm import proxy_handler as handler
from tests.integrations import test_litellm
from tests.integrations.test_litellm_attack import (
    CHAT,
    IMAGE,
    MESSAGES,
    RESPONSES,
    Tap,
    tap,
)

pytestmark = test_litellm.pytestmark

proxy = test_litellm.proxy
__all__ = ["proxy", "tap"]

WINDOW = {"context_window": 6_000}
FORMATS = {CHAT: "openai-chat", MESSAGES: "anthropic", RESPONSES: "openai-responses"}
# The Responses call kinds and the output kind that answers each.
ANSWERS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "computer_call": "computer_call_output",
}
OUTPUTS = {output: call for call, output in ANSWERS.items()}


def text(tag: str, size: int) -> str:
    """An output of about ``size`` words, unique to ``tag``."""
    return f"<{tag}> " + " ".join(f"w{i}" for i in range(size))


# A step of the agent: the call kinds of one model turn (parallel calls) and each
# output's size in words (small ones stay whole, large ones get compacted).
Step = list[tuple[int, int]]
steps = st.lists(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from([3, 40, 900])), min_size=1, max_size=3),
    min_size=2,
    max_size=9,
)


def chat_turn(n: int, step: Step) -> list[dict[str, Any]]:
    calls, outputs = [], []
    for i, (kind, size) in enumerate(step):
        ident = f"call_{n}_{i}"
        if kind % 2:
            calls.append({"id": ident, "type": "custom", "custom": {"name": "p", "input": "in"}})
        else:
            arguments = json.dumps({"path": f"f{n}"})
            calls.append(
                {
                    "id": ident,
                    "type": "function",
                    "function": {"name": "cat", "arguments": arguments},
                }
            )
        outputs.append({"role": "tool", "tool_call_id": ident, "content": text(ident, size)})
    return [{"role": "assistant", "content": f"turn {n}", "tool_calls": calls}, *outputs]


def anthropic_turn(n: int, step: Step) -> list[dict[str, Any]]:
    uses: list[dict[str, Any]] = [{"type": "thinking", "thinking": f"t{n}", "signature": "s"}]
    results = []
    for i, (kind, size) in enumerate(step):
        ident = f"toolu_{n}_{i}"
        uses.append({"type": "tool_use", "id": ident, "name": "cat", "input": {"n": n}})
        content: Any = text(ident, size)
        if kind == 5:  # a result with an image beside its text
            data = IMAGE.split(",")[1]
            image = {"type": "base64", "media_type": "image/png", "data": data}
            content = [{"type": "text", "text": content}, {"type": "image", "source": image}]
        results.append({"type": "tool_result", "tool_use_id": ident, "content": content})
    return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]


def responses_pair(kind: int, ident: str, size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    out = text(ident, size)
    if kind == 0:
        return (
            {"type": "function_call", "call_id": ident, "name": "cat", "arguments": "{}"},
            {"type": "function_call_output", "call_id": ident, "output": out},
        )
    if kind == 1:
        return (
            {"type": "custom_tool_call", "call_id": ident, "name": "p", "input": "in"},
            {"type": "custom_tool_call_output", "call_id": ident, "output": out},
        )
    if kind == 2:
        action = {"type": "exec", "command": ["ls"], "env": {}}
        return (
            {"type": "local_shell_call", "id": f"lsh_{ident}", "call_id": ident,
             "status": "completed", "action": action},
            {"type": "local_shell_call_output", "id": ident, "output": out},
        )  # fmt: skip
    if kind == 3:
        chunk = {"stdout": out, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
        return (
            {"type": "shell_call", "call_id": ident, "status": "completed",
             "action": {"commands": ["ls"], "timeout_ms": 1000}},
            {"type": "shell_call_output", "call_id": ident, "output": [chunk]},
        )  # fmt: skip
    if kind == 4:
        operation = {"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@"}
        return (
            {"type": "apply_patch_call", "call_id": ident, "status": "completed",
             "operation": operation},
            {"type": "apply_patch_call_output", "call_id": ident, "status": "completed",
             "output": out},
        )  # fmt: skip
    screenshot = {"type": "computer_screenshot", "image_url": IMAGE}
    return (
        {"type": "computer_call", "id": f"cu_{ident}", "call_id": ident, "status": "completed",
         "action": {"type": "screenshot"}, "pending_safety_checks": []},
        {"type": "computer_call_output", "call_id": ident, "output": screenshot},
    )  # fmt: skip


def responses_turn(n: int, step: Step) -> list[dict[str, Any]]:
    pairs = [responses_pair(kind, f"call_{n}_{i}", size) for i, (kind, size) in enumerate(step)]
    reasoning = {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": "e"}
    return [reasoning, *(call for call, _ in pairs), *(output for _, output in pairs)]


TURNS: dict[str, Callable[[int, Step], list[dict[str, Any]]]] = {
    CHAT: chat_turn,
    MESSAGES: anthropic_turn,
    RESPONSES: responses_turn,
}


def conversation(path: str, plan: list[Step]) -> list[dict[str, Any]]:
    start: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    if path == CHAT:
        start.insert(0, {"role": "system", "content": "you are careful"})
    turns = TURNS[path]
    return start + [m for n, step in enumerate(plan) for m in turns(n, step)]


def body(path: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if path == RESPONSES:
        return {"model": "scripted", "input": messages}
    if path == MESSAGES:
        return {"model": "scripted", "max_tokens": 64, "system": "s", "messages": messages}
    return {"model": "scripted", "messages": messages}


def check_chat(messages: list[dict[str, Any]]) -> None:
    """OpenAI Chat: each assistant's calls answered right after it, once each."""
    waiting: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in waiting, f"an output without its call: {m['tool_call_id']}"
            waiting.remove(m["tool_call_id"])
            continue
        assert not waiting, f"calls not answered: {waiting}"
        assert m.get("content") not in ("", []) or m.get("tool_calls"), f"empty: {m}"
        waiting = [c["id"] for c in m.get("tool_calls") or []]
    assert not waiting


def check_anthropic(messages: list[dict[str, Any]]) -> None:
    """Anthropic: roles alternate; each ``tool_use`` answered in the next user turn."""
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    assert roles[0] == "user"
    waiting: set[str] = set()
    for m in messages:
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": "x"}]
        assert blocks, f"empty content: {m}"
        assert all(b.get("text", "x").strip() for b in blocks if b["type"] == "text"), m
        if m["role"] == "assistant":
            assert not waiting
            waiting = {b["id"] for b in blocks if b["type"] == "tool_use"}
            kinds = [b["type"] for b in blocks]
            assert "thinking" not in kinds or kinds[0] == "thinking", kinds
        else:
            answered = {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}
            assert answered == waiting, (answered, waiting)
            waiting = set()


def check_responses(items: list[dict[str, Any]]) -> None:
    """Responses: each output answers an earlier call of its kind; each call is answered;
    a reasoning item is followed by an item of its turn."""
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for k, item in enumerate(items):
        kind = item.get("type", "message")
        if kind in ANSWERS:
            calls[item["call_id"]] = kind
        elif kind in OUTPUTS:
            ident = str(item.get("call_id", item.get("id")))
            assert calls.get(ident) == OUTPUTS[kind], f"an output without its call: {item}"
            answered.add(ident)
        elif kind == "reasoning":
            after = items[k + 1] if k + 1 < len(items) else {"role": "user"}
            assert after.get("type") in ANSWERS or after.get("role") == "assistant", after
        else:
            assert item.get("content") not in ("", []), f"empty: {item}"
    assert answered == set(calls), set(calls) - answered


CHECKS = {CHAT: check_chat, MESSAGES: check_anthropic, RESPONSES: check_responses}


def newest_output(path: str, messages: list[dict[str, Any]]) -> Any:
    """The last tool output of a conversation, as sent."""
    if path == MESSAGES:
        return messages[-1]["content"][-1]
    return messages[-1]


@pytest.fixture
def chats(socket: tuple[str | None, str]) -> Iterator[str]:
    """The hook configured with a small window; a directory for the chats."""
    socket_path, directory = socket
    handler.configure(ProxySettings(roots=(directory,), socket=socket_path, config=WINDOW))
    yield directory
    handler.close()


@pytest.mark.parametrize("path", [CHAT, MESSAGES, RESPONSES])
def test_a_compacted_conversation_is_valid_and_continues_its_session(
    proxy: TestClient, chats: str, tap: Tap, path: str
) -> None:
    format = FORMATS[path]
    names = itertools.count()
    compacted: list[int] = []

    @settings(
        max_examples=12,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(plan=steps)
    def run(plan: list[Step]) -> None:
        save_file = os.path.join(chats, f"chat-{next(names)}.chat")
        whole = conversation(path, plan)
        half = conversation(path, plan[: len(plan) // 2])
        for sent in (half, whole):
            kept = copy.deepcopy(sent)
            response = proxy.post(path, json=body(path, sent), headers={CHAT_HEADER: save_file})
            assert response.status_code == 200, response.text
            before, after, unchanged = tap.hooked[-1]
            assert before == kept and unchanged  # LiteLLM's objects as they came
            expected = scoutd.prepare(sent, config=WINDOW, format=format).messages
            assert after == expected
            CHECKS[path](after)
            assert newest_output(path, after) == newest_output(path, sent)
            handed, copied = tap.handed[-1]
            assert handed == copied  # nothing changed what scoutd handed on, in place
        if len(json.dumps(after)) < len(json.dumps(whole)):
            compacted.append(1)

    run()
    assert len(compacted) >= 4, f"only {len(compacted)} conversations were compacted"


def hostile(path: str, n: int, kind: int) -> list[dict[str, Any]]:
    """Items an odd agent sends: an output whose call never came, a call and an output
    of another kind sharing one id, an item type scoutd does not know."""
    ident = f"call_{n}_0"  # the id of the turn's first call, whatever its kind
    if path == CHAT:
        orphan = {"role": "tool", "tool_call_id": f"lost_{n}", "content": text("lost", 300)}
        clash = {"role": "tool", "tool_call_id": ident, "content": "again"}
        odd = {"role": "critic", "content": "hmm"}
    elif path == MESSAGES:
        result = {"type": "tool_result", "tool_use_id": f"lost_{n}", "content": text("lost", 300)}
        orphan = {"role": "user", "content": [result]}
        clash = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": ident}]}
        odd = {"role": "user", "content": [{"type": "mystery", "data": 1}]}
    else:
        orphan = {"type": "function_call_output", "call_id": f"lost_{n}", "output": "lost"}
        clash = {"type": "custom_tool_call", "call_id": ident, "name": "p", "input": "i"}
        odd = {"type": "mystery_call", "call_id": f"m{n}"}
    return [[orphan], [clash], [odd]][kind % 3]


@pytest.mark.parametrize("path", [CHAT, MESSAGES, RESPONSES])
def test_an_odd_conversation_is_prepared_as_scoutd_prepares_it(
    proxy: TestClient, chats: str, tap: Tap, path: str
) -> None:
    """Hostile items mixed into a conversation at random places: the proxy answers it
    (the model behind accepts anything), what it hands on is what scoutd makes of the
    conversation, and LiteLLM's objects are left as they came."""
    format = FORMATS[path]
    names = itertools.count()
    reached: list[bool] = []

    @settings(
        max_examples=10,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        plan=steps,
        odd=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2)), min_size=1, max_size=3),
    )
    def run(plan: list[Step], odd: list[tuple[int, int]]) -> None:
        sent = conversation(path, plan)
        for at, kind in odd:
            sent[1 + at % len(sent) :] = [
                *hostile(path, at % len(plan), kind),
                *sent[1 + at % len(sent) :],
            ]
        save_file = os.path.join(chats, f"odd-{next(names)}.chat")
        response = proxy.post(path, json=body(path, sent), headers={CHAT_HEADER: save_file})
        assert response.status_code == 200, response.text
        before, after, unchanged = tap.hooked[-1]
        assert unchanged and before == sent
        assert after == scoutd.prepare(sent, config=WINDOW, format=format).messages
        reached.append(len(json.dumps(after)) < len(json.dumps(sent)))

    run()
    assert len(reached) == 10 and sum(reached) >= 2, f"{sum(reached)} of them were compacted"
