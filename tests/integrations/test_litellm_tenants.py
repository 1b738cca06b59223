"""What a proxy client can make of the LiteLLM hook with the header and body it sends.

A proxy serves remote clients (API keys, teams) from one process. A request
the client got wrong is the client's error: HTTP 400 in the route's format,
which the OpenAI and Anthropic SDKs do not retry, never a 500 (retried, and
an "internal error" of the proxy). A header naming a chat no operator's abort
can reach is refused, and a refusal tells the client nothing of the proxy's
file system beyond what it named. The proxy app, its fixtures and the
scripted provider are those of tests/integrations/test_litellm.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

if os.environ.get("CI") != "true":  # CI installs the test extra: a missing LiteLLM fails there
    pytest.importorskip("litellm.proxy", reason="needs the extra scoutd[litellm]")

# LiteLLM fetches its model price map from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from fastapi import HTTPException
from starlette.testclient import TestClient

from scoutd.inbox import write_abort
from scoutd.inbox.names import inbox_dir
from scoutd.integrations.litellm import CHAT_HEADER, ProxySettings, ScoutdProxyHook
from tests.integrations import test_litellm
from tests.integrations.litellm_model import scripted_model
from tests.integrations.replay import Events, load_replay

pytestmark = test_litellm.pytestmark  # LiteLLM's own warnings, as there

proxy = test_litellm.proxy
chat = test_litellm.chat

USER = {"role": "user", "content": "go on"}


# Conversations no format has: what the client sent is wrong, not the proxy.
BAD_BODIES = {
    "chat-not-objects": ("/v1/chat/completions", {"model": "scripted", "messages": [1, 2]}),
    "chat-after-a-good-one": (
        "/v1/chat/completions",
        {"model": "scripted", "messages": [USER, "go on"]},
    ),
    "messages-strings": (
        "/v1/messages",
        {"model": "scripted", "max_tokens": 8, "messages": ["go on"]},
    ),
    "responses-numbers": ("/v1/responses", {"model": "scripted", "input": [USER, 7]}),
}


def post(proxy: TestClient, path: str, body: Any, save_file: str | None) -> Any:
    headers = {} if save_file is None else {CHAT_HEADER.encode(): os.fsencode(save_file)}
    return proxy.post(path, json=body, headers=headers)


def error_message(response: Any) -> str:
    """The error's message, in the OpenAI or the Anthropic format."""
    return str(response.json()["error"]["message"])


def test_a_malformed_conversation_is_the_clients_error(
    proxy: TestClient, chat: tuple[str | None, str]
) -> None:
    """A conversation that breaks the message rule gets 400 (``invalid_request_error``),
    with or without a chat, in process and through the daemon. It was a 500 naming an
    internal server error, which the SDKs retry: the agent sent it again and again."""
    _, save_file = chat
    scripted_model.start(load_replay(), Events(save_file))
    for name, (path, body) in BAD_BODIES.items():
        for named in (None, save_file):
            response = post(proxy, path, body, named)
            assert response.status_code == 400, (name, response.text)
            assert "scoutd" in error_message(response), (name, response.text)
    assert scripted_model.seen == []
    good = post(proxy, "/v1/chat/completions", {"model": "scripted", "messages": [USER]}, save_file)
    assert good.status_code == 200, good.text  # the chat's session serves on


def test_a_chat_whose_inbox_no_abort_can_reach_is_refused(
    proxy: TestClient, chat: tuple[str | None, str]
) -> None:
    """A save file whose inbox name is longer than the file system allows, or under a
    directory name that is, has an inbox no ``scoutd abort`` can ever write: such a
    chat was served (200), unsupervised for good. Now 400, as a missing directory."""
    _, save_file = chat
    scripted_model.start(load_replay(), Events(save_file))
    directory = os.path.dirname(save_file)
    body = {"model": "scripted", "messages": [USER]}
    for named in (os.path.join(directory, "b" * 255), os.path.join(directory, "d" * 300, "x.chat")):
        with pytest.raises(OSError):  # the operator cannot reach it
            write_abort(named, "stop")
        response = post(proxy, "/v1/chat/completions", body, named)
        assert response.status_code == 400, response.text
        assert CHAT_HEADER in error_message(response)
    assert scripted_model.seen == []
    longest = os.path.join(directory, "c" * (255 - len(".inbox_removed")) + ".chat")
    assert len(os.path.basename(inbox_dir(longest))) <= 255
    response = post(proxy, "/v1/chat/completions", body, longest)  # the longest that can
    assert response.status_code == 200, response.text


def test_an_empty_header_is_refused(proxy: TestClient, chat: tuple[str | None, str]) -> None:
    """``x-scoutd-chat:`` with nothing after it (a client's unset variable, as in
    ``ANTHROPIC_CUSTOM_HEADERS="x-scoutd-chat: $CHAT"``) meant to name a chat: it was
    served as a request without a chat (200), unsupervised. Now 400."""
    _, save_file = chat
    scripted_model.start(load_replay(), Events(save_file))
    body = {"model": "scripted", "messages": [USER]}
    for value in ("", "   "):
        response = proxy.post("/v1/chat/completions", json=body, headers={CHAT_HEADER: value})
        assert response.status_code == 400, response.text
        assert CHAT_HEADER in error_message(response)
    assert scripted_model.seen == []


def test_a_refused_header_tells_nothing_of_the_proxys_files(tmp_path: Path) -> None:
    """The 400 for a chat outside the roots named what the path resolved to and the
    roots: any client read the proxy's symbolic links (its working directory through
    ``/proc/self/cwd``, its open files through ``/proc/self/fd``). It names what the
    client sent, and the proxy's log has the detail."""
    root = tmp_path / "served-root"
    root.mkdir()
    hook = ScoutdProxyHook(ProxySettings(roots=(str(root),)))
    secret = tmp_path / "secret-target"
    secret.mkdir()
    (tmp_path / "link").symlink_to(secret)
    for named in (str(tmp_path / "link" / "x.chat"), "/proc/self/cwd/x.chat", "relative.chat"):
        data = {"messages": [USER], "proxy_server_request": {"headers": {CHAT_HEADER: named}}}

        async def hook_call(data: dict[str, Any] = data) -> Any:
            return await hook.async_pre_call_hook(None, None, data, "acompletion")

        with pytest.raises(HTTPException) as refused:
            anyio.run(hook_call)
        detail = json.dumps(refused.value.detail)
        assert refused.value.status_code == 400 and CHAT_HEADER in detail
        assert named in detail
        for leak in ("secret-target", "served-root", os.getcwd()):
            assert leak not in detail, detail
    hook.close()
