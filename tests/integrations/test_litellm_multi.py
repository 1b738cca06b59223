"""Agents that share one chat header on a LiteLLM proxy (docs/RELIABILITY.md, rule 30).

An agent and its sub-agent send their requests under one ``x-scoutd-chat``,
taking turns. The hook is called as LiteLLM's proxy calls it. Each conversation
keeps a session of its own: no turn of one makes the other's start over, and
each gets the prompts it would get alone under a header of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if os.environ.get("CI") != "true":
    pytest.importorskip("litellm.proxy", reason="needs the extra scoutd[litellm]")

from fastapi import HTTPException
from hypothesis import given
from hypothesis import strategies as st
from litellm.proxy._types import UserAPIKeyAuth

from scoutd.engine.incremental import SessionPrompt
from scoutd.inbox import write_abort
from scoutd.integrations._litellm_routes import MAX_CONVERSATIONS, Routes
from scoutd.integrations.litellm import CHAT_HEADER, ProxySettings, ScoutdProxyHook
from tests.integrations import test_litellm
from tests.integrations.drawn import SETTINGS
from tests.integrations.replay import CONFIG

pytestmark = test_litellm.pytestmark

ROUNDS = 10  # each agent's requests


def request(who: str, turn: int) -> list[dict[str, Any]]:
    """Agent ``who``'s conversation at its request ``turn``: a task, then one tool call
    and its (large) output a turn."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"you are agent {who}"},
        {"role": "user", "content": f"task of {who}"},
    ]
    for n in range(turn):
        call = {
            "id": f"{who}-{n}",
            "type": "function",
            "function": {"name": "bash", "arguments": f'{{"command": "step {n}"}}'},
        }
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        output = f"output {n} of {who}\n" + f"line {n} of {who}'s output\n" * 400
        messages.append({"role": "tool", "tool_call_id": f"{who}-{n}", "content": output})
    return messages


def call(hook: ScoutdProxyHook, save_file: str, messages: list[dict[str, Any]]) -> Any:
    """One request through the pre-call hook; the messages it sends on."""
    data = {"messages": messages, "proxy_server_request": {"headers": {CHAT_HEADER: save_file}}}

    async def hook_call() -> Any:
        return await hook.async_pre_call_hook(UserAPIKeyAuth(), None, data, "acompletion")

    return anyio.run(hook_call)["messages"]


def test_agents_sharing_a_header_keep_their_own_sessions(
    socket: tuple[str | None, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    socket_path, directory = socket
    settings = ProxySettings(roots=(directory,), socket=socket_path, config=CONFIG)
    starts = [0]
    reset = SessionPrompt.reset

    def counted(self: SessionPrompt, messages: Any, size: int | None = None) -> None:
        starts[0] += 1
        reset(self, messages, size)

    shared, alone = ScoutdProxyHook(settings), ScoutdProxyHook(settings)
    chat = os.path.join(directory, "team.chat")
    own = {who: os.path.join(directory, f"{who}.chat") for who in "AB"}
    try:
        expected = {
            (who, turn): call(alone, own[who], request(who, turn))
            for turn in range(ROUNDS)
            for who in "AB"
        }
        monkeypatch.setattr(SessionPrompt, "reset", counted)
        compacted = 0
        for turn in range(ROUNDS):
            for who in "AB":  # the agent, then its sub-agent, in turns
                sent = request(who, turn)
                prepared = call(shared, chat, sent)
                assert prepared == expected[who, turn], (who, turn)
                compacted += prepared != sent
        kept = shared.chats
    finally:
        shared.close()
        alone.close()
    assert compacted >= ROUNDS // 2, "too few rounds were compacted to tell anything"
    if socket_path is None:  # the sessions are in this process: each start is seen
        assert starts[0] == 0, f"{starts[0]} of {2 * ROUNDS} rounds started their session over"
    assert len(kept) == 2, kept  # a session each, in process or through the daemon


def test_an_abort_stops_every_conversation_of_the_chat(socket: tuple[str | None, str]) -> None:
    """The abort one conversation's request takes stops the others under the header too."""
    socket_path, directory = socket
    hook = ScoutdProxyHook(ProxySettings(roots=(directory,), socket=socket_path, config=CONFIG))
    chat = os.path.join(directory, "team.chat")
    try:
        for who in "AB":
            call(hook, chat, request(who, 1))
        write_abort(chat, "stop the team")
        for who in "AB":
            with pytest.raises(HTTPException) as refused:
                call(hook, chat, request(who, 2))
            assert refused.value.status_code == 403, who
            assert "stop the team" in str(refused.value.detail), who
    finally:
        hook.close()


def test_conversations_under_a_header_are_bounded(tmp_path: Path) -> None:
    """More conversations under one header than are kept apart: the least recently used
    one's session is taken over; the chats kept never pass the bound."""
    settings = ProxySettings(roots=(str(tmp_path),), config=CONFIG)
    hook = ScoutdProxyHook(settings)
    chat = str(tmp_path / "many.chat")
    try:
        for k in range(3 * MAX_CONVERSATIONS):
            messages = request(f"agent{k}", 1)
            assert call(hook, chat, messages)[:2] == messages[:2]
            assert len(hook.chats) <= MAX_CONVERSATIONS
        assert len(hook.chats) == MAX_CONVERSATIONS
    finally:
        hook.close()


# What the routing property's fixed examples reach (floors: about two thirds of it).
REACHED = {"turns": 0, "shared": 0}


@SETTINGS
@given(
    agents=st.integers(1, MAX_CONVERSATIONS),
    order=st.lists(st.integers(0, MAX_CONVERSATIONS - 1), min_size=1, max_size=40),
    same_start=st.booleans(),
)
def each_conversation_keeps_its_name(agents: int, order: list[int], same_start: bool) -> None:
    """Conversations that grow in any interleaving, no more than are kept apart: each
    request goes to its conversation's one name, and no two conversations share one
    once they differ (with ``same_start`` they begin with the same messages)."""
    routes = Routes(max_chats=4)
    held: dict[int, list[dict[str, Any]]] = {}
    names: dict[int, str] = {}
    for pick in order:
        who = pick % agents
        first = {"role": "user", "content": "task" if same_start else f"task {who}"}
        messages = held.setdefault(who, [first])
        messages.append({"role": "assistant", "content": f"{who}: {len(messages)}"})
        name = routes.route("/chats/x.chat", "openai-chat", messages)
        assert names.setdefault(who, name) == name, (who, names)
        REACHED["turns"] += 1
        REACHED["shared"] += same_start and len(held) > 1
    assert len(set(names.values())) == len(names)


def test_each_conversation_keeps_its_name() -> None:
    """The property over its fixed examples, and what they reached (a floor)."""
    REACHED.update(turns=0, shared=0)
    each_conversation_keeps_its_name()
    assert REACHED["turns"] >= 450 and REACHED["shared"] >= 200, REACHED
