"""Chats of the LiteLLM proxy hook under hostile headers and concurrent requests.

A header an agent or a client may send (bytes that are not UTF-8, through a
daemon) gets a clear client error, never a 500 the SDKs retry; requests of one
chat and of another, all at once through the real proxy app, each get their
own conversation prepared, and a chat's notice reaches one request of that
chat, never another chat's.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import pytest
from fastapi import HTTPException
from starlette.testclient import TestClient

import scoutd
from scoutd.inbox import write_abort
from scoutd.inbox.aborted import held
from scoutd.integrations.litellm import CHAT_HEADER, ProxySettings, ScoutdProxyHook
from scoutd.integrations.litellm import proxy_handler as handler
from scoutd.strategies.inbox import write_notice
from tests.integrations import test_litellm
from tests.integrations.replay import ABORT_REASON, NOTICE, contains
from tests.integrations.test_litellm_attack import CHAT, Tap, tap
from tests.support.daemon import Daemon

pytestmark = test_litellm.pytestmark

proxy = test_litellm.proxy
__all__ = ["proxy", "tap"]

MESSAGES = [{"role": "user", "content": "go on"}]


def hook_data(save_file: str) -> dict[str, Any]:
    """A request as the proxy hands it to the hook, its header as Starlette decodes the
    wire's bytes (latin-1)."""
    wire = os.fsencode(save_file).decode("latin-1")
    return {"messages": MESSAGES, "proxy_server_request": {"headers": {CHAT_HEADER: wire}}}


def test_a_header_that_is_not_utf8_gets_a_clear_answer(socket: tuple[str | None, str]) -> None:
    """Header bytes that are not UTF-8 name their own file (docs/INTEGRATIONS.md). In
    process such a chat is served; the daemon's protocol carries UTF-8 paths only, and
    through it the request failed with a ValueError, a 500 the SDKs retry, and so did
    each further attempt's check: now the header is refused with a 400 that says why,
    before anything is prepared. A waiting abort is never passed by."""
    socket_path, directory = socket
    hook = ScoutdProxyHook(ProxySettings(roots=(directory,), socket=socket_path))
    save_file = os.path.join(directory, os.fsdecode(b"run-\xe9.chat"))
    write_notice(save_file, NOTICE, name="note.txt")

    async def pre_call() -> Any:
        return await hook.async_pre_call_hook(None, None, hook_data(save_file), "acompletion")

    async def attempt() -> Any:
        return await hook.async_pre_call_deployment_hook(hook_data(save_file), "acompletion")

    try:
        if socket_path is None:
            assert contains(anyio.run(pre_call)["messages"], NOTICE)
            assert anyio.run(attempt) is None
            write_abort(save_file, ABORT_REASON)
            with pytest.raises(HTTPException) as aborted:
                anyio.run(pre_call)
            assert aborted.value.status_code == 403
            assert held(save_file) == ABORT_REASON
            return
        for call in (pre_call, attempt):
            with pytest.raises(HTTPException) as refused:
                anyio.run(call)
            assert refused.value.status_code == 400, refused.value.detail
            message = json.dumps(refused.value.detail)
            assert CHAT_HEADER in message and "UTF-8" in message and "\\\\xe9" in message
    finally:
        hook.close()


def test_concurrent_requests_of_two_chats_never_mix(
    proxy: TestClient, socket: tuple[str | None, str], tap: Tap
) -> None:
    """Sixteen requests at once, of two chats, each with a conversation of its own (an
    agent's forks): each reaches the model as scoutd prepares its own conversation, and
    the notice waiting for chat A reaches exactly one request, one of chat A's."""
    socket_path, directory = socket
    handler.configure(ProxySettings(roots=(directory,), socket=socket_path))
    a, b = os.path.join(directory, "a.chat"), os.path.join(directory, "b.chat")
    write_notice(a, NOTICE, name="note.txt")

    def send(k: int) -> tuple[int, str]:
        chat = a if k % 2 else b
        turn = [{"role": "assistant", "content": "x"}, {"role": "user", "content": f"again {k}"}]
        history = [{"role": "user", "content": f"request {k}"}, *turn * (k % 3)]
        response = proxy.post(
            CHAT, json={"model": "scripted", "messages": history}, headers={CHAT_HEADER: chat}
        )
        return response.status_code, chat

    try:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(send, range(16)))
    finally:
        handler.close()
    assert [status for status, _ in answers] == [200] * 16
    assert len(tap.hooked) == len(tap.seen) == 16
    carrying = []
    for before, after, unchanged in tap.hooked:
        assert unchanged
        own = [m for m in after if not contains(m, NOTICE)]
        assert own == scoutd.prepare(before).messages  # its own conversation, nothing else
        if len(own) < len(after):
            carrying.append(before[0]["content"])
    assert len(carrying) == 1 and int(carrying[0].split()[1]) % 2 == 1, carrying


def test_a_conversation_over_the_daemons_bounds_gets_413(proxy: TestClient, tap: Tap) -> None:
    """A conversation larger than the daemon takes of one request or one session
    (``max_request_bytes``, ``max_session_messages``) failed the request with a 500, which
    the SDKs retry with the very same conversation: now a 413 naming the bound, never
    the model. A daemon's bound on all sessions together stays a 500 (another time may do)."""
    bounds = {"max_session_messages": 4, "max_request_bytes": 1 << 20}
    with Daemon(daemon=bounds) as daemon:
        handler.configure(ProxySettings(roots=(daemon.dir,), socket=daemon.socket_path))
        chat = os.path.join(daemon.dir, "run.chat")
        turn = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]
        long = [{"role": "user", "content": "x" * (1 << 20)}]
        try:
            for messages, headers, bound in [
                (turn * 3, {CHAT_HEADER: chat}, "max_session_messages"),
                (long, {}, "max_request_bytes"),
            ]:
                body = {"model": "scripted", "messages": messages}
                response = proxy.post(CHAT, json=body, headers=headers)
                assert response.status_code == 413, response.text
                assert bound in response.json()["error"]["message"]
        finally:
            handler.close()
    assert tap.seen == []


def test_a_refused_request_leaves_its_chat_and_notice_to_the_next(
    proxy: TestClient, socket: tuple[str | None, str], tap: Tap
) -> None:
    """A request of the chat whose conversation scoutd cannot read (400) while a notice
    waits: the notice is not taken by it, the next request gets it once, and the chat's
    session goes on preparing each conversation as scoutd does."""
    socket_path, directory = socket
    window = {"context_window": 3_000}
    handler.configure(ProxySettings(roots=(directory,), socket=socket_path, config=window))
    chat = os.path.join(directory, "run.chat")
    history: list[Any] = [{"role": "user", "content": "fix it"}]
    carrying = []
    try:
        for k in range(6):
            call = {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            history += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{k}", "content": f"output {k} " * 300},
            ]
            if k == 3:
                write_notice(chat, NOTICE, name="note.txt")
                bad = {"model": "scripted", "messages": [*history, 7]}
                refused = proxy.post(CHAT, json=bad, headers={CHAT_HEADER: chat})
                assert refused.status_code == 400, refused.text
            body = {"model": "scripted", "messages": history}
            response = proxy.post(CHAT, json=body, headers={CHAT_HEADER: chat})
            assert response.status_code == 200, response.text
            after = tap.hooked[-1][1]
            own = [m for m in after if not contains(m, NOTICE)]
            assert own == scoutd.prepare(history, config=window, format="openai-chat").messages
            carrying.append(len(after) - len(own))
    finally:
        handler.close()
    assert carrying == [0, 0, 0, 1, 0, 0]
    assert len(tap.seen) == 6
