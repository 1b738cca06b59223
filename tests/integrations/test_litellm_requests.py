"""The LiteLLM proxy hook on requests of every shape that name a chat (docs/INTEGRATIONS.md).

An abort that exists always aborts (docs/RELIABILITY.md): whatever the body of
a request that names an aborted chat, the proxy answers 403 and the model is
never called, and the header names the chat the operator sees, whatever the
bytes of its path. The proxy app, its fixtures and the scripted provider are
those of tests/integrations/test_litellm.py.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from fastapi import HTTPException
from starlette.testclient import TestClient

from scoutd.inbox import write_abort
from scoutd.inbox.aborted import clear, held
from scoutd.inbox.names import ABORT_NAME, inbox_dir
from scoutd.strategies.inbox import write_notice
from tests.integrations import test_litellm  # before litellm_model: it sets up LiteLLM
from tests.integrations.litellm_model import scripted_model
from tests.integrations.replay import ABORT_REASON, NOTICE, Events, contains, load_replay

pytestmark = test_litellm.pytestmark  # LiteLLM's own warnings, as there

# The proxy app, started once per module, and the hook configured per scenario.
proxy = test_litellm.proxy
chat = test_litellm.chat
CHAT_HEADER = test_litellm.CHAT_HEADER
ProxySettings = test_litellm.ProxySettings
ScoutdProxyHook = test_litellm.ScoutdProxyHook
CHAT_PATH = test_litellm.ROUTES[0].path  # /v1/chat/completions

# Requests whose body holds no conversation list for scoutd to prepare: a
# Responses ``input`` string (the OpenAI SDK's ``responses.create(input="...")``),
# an empty one, a legacy completion, an embedding.
SHAPES = {
    "responses-string": ("/v1/responses", {"model": "scripted", "input": "go on"}),
    "responses-empty": ("/v1/responses", {"model": "scripted", "input": []}),
    "completions": ("/v1/completions", {"model": "scripted", "prompt": "go on"}),
    "embeddings": ("/v1/embeddings", {"model": "scripted", "input": "go on"}),
}
# A request with a conversation list, on /v1/chat/completions.
LISTED = {"model": "scripted", "messages": [{"role": "user", "content": "go on"}]}
# A request of each route that prepares a conversation.
ATTEMPTED: dict[str, dict[str, Any]] = {
    CHAT_PATH: LISTED,
    "/v1/messages": {"max_tokens": 64, "messages": LISTED["messages"]},
    "/v1/responses": {"input": LISTED["messages"]},
}


def post(proxy: TestClient, path: str, body: dict[str, Any], save_file: str) -> Any:
    """One request naming ``save_file`` in the header as curl sends it: the path's bytes."""
    return proxy.post(path, json=body, headers={CHAT_HEADER: os.fsencode(save_file)})


def check_refused(response: Any) -> None:
    """A 403 with the operator's reason and how to lift it."""
    assert response.status_code == 403, response.text
    message = json.dumps(response.json())
    assert ABORT_REASON in message and "scoutd clear" in message


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_an_aborted_chat_refuses_a_request_of_any_shape(
    proxy: TestClient, chat: tuple[str | None, str], shape: str
) -> None:
    """A waiting abort is taken by the first request, whatever its body, and the chat
    stays aborted for every later one: of that shape, and a conversation as well.

    A request without a non-empty conversation list used to skip the check: 200
    with the abort left waiting, and 200 again once the chat was marked."""
    _, save_file = chat
    scripted_model.start(load_replay(), Events(save_file))
    path, body = SHAPES[shape]
    write_abort(save_file, ABORT_REASON)
    check_refused(post(proxy, path, body, save_file))
    assert held(save_file) == ABORT_REASON  # taken, and the chat is marked
    assert not os.path.lexists(os.path.join(inbox_dir(save_file), ABORT_NAME))
    check_refused(post(proxy, path, body, save_file))
    check_refused(post(proxy, CHAT_PATH, LISTED, save_file))
    assert scripted_model.seen == []


def test_a_responses_input_string_is_prepared_as_one_user_item(
    proxy: TestClient, chat: tuple[str | None, str]
) -> None:
    """``input: "go on"`` is one user item: the chat's waiting notice reaches the model
    with it, once (it used to pass through unprepared, the notice left waiting)."""
    _, save_file = chat
    scripted_model.start(load_replay(), Events(save_file))
    write_notice(save_file, NOTICE, name="note.txt")
    body = {"model": "scripted", "input": "go on"}
    for _ in range(2):
        response = post(proxy, "/v1/responses", body, save_file)
        assert response.status_code == 200, response.text
    first, second = scripted_model.seen
    assert first[0] == {"role": "user", "content": "go on"}
    assert contains(first, NOTICE) and not contains(second, NOTICE)
    assert second == [{"role": "user", "content": "go on"}]


@pytest.mark.parametrize("name", ["josé-run.chat", "données/run.chat"], ids=["file", "directory"])
def test_the_header_names_the_chat_of_its_utf8_bytes(
    proxy: TestClient, chat: tuple[str | None, str], name: str
) -> None:
    """``x-scoutd-chat`` carries the path's bytes, UTF-8 as curl sends them; Starlette
    decodes headers as latin-1, so ``josé-run.chat`` became ``josÃ©-run.chat``, a chat
    without the inbox that held the abort: 200."""
    _, named = chat
    save_file = os.path.join(os.path.dirname(named), name)
    os.makedirs(os.path.dirname(save_file), exist_ok=True)
    scripted_model.start(load_replay(), Events(save_file))
    write_abort(save_file, ABORT_REASON)
    check_refused(post(proxy, CHAT_PATH, LISTED, save_file))
    assert held(save_file) == ABORT_REASON
    assert scripted_model.seen == []
    clear(save_file)
    response = post(proxy, CHAT_PATH, LISTED, save_file)
    assert response.status_code == 200, response.text


def test_header_bytes_that_are_not_utf8_name_their_own_file(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 (a latin-1 ``é``) name the file of those bytes, as
    ``os.fsdecode`` has it. Starlette's TestClient re-encodes a header as UTF-8, so the
    hook gets what Starlette hands LiteLLM from the wire: the bytes decoded as latin-1."""
    hook = ScoutdProxyHook(ProxySettings(roots=(str(tmp_path),)))
    save_file = os.path.join(tmp_path, os.fsdecode(b"run-\xe9.chat"))
    write_abort(save_file, ABORT_REASON)
    wire = os.fsencode(save_file).decode("latin-1")
    data = {
        "messages": LISTED["messages"],
        "proxy_server_request": {"headers": {CHAT_HEADER: wire}},
    }

    async def hook_call() -> Any:
        return await hook.async_pre_call_hook(None, None, data, "acompletion")

    with pytest.raises(HTTPException) as refused:
        anyio.run(hook_call)
    assert refused.value.status_code == 403 and ABORT_REASON in json.dumps(refused.value.detail)
    assert held(save_file) == ABORT_REASON
    hook.close()


def test_a_chat_whose_directory_does_not_exist_is_refused(
    proxy: TestClient, chat: tuple[str | None, str]
) -> None:
    """A header naming a directory that does not exist gets 400, never the model: no
    operator's abort can reach such a chat (a typo, a mis-encoded name)."""
    _, save_file = chat
    scripted_model.start(load_replay(), Events(save_file))
    missing = os.path.join(os.path.dirname(save_file), "no-such-dir", "run.chat")
    for path, body in [(CHAT_PATH, LISTED), SHAPES["completions"]]:
        response = post(proxy, path, body, missing)
        assert response.status_code == 400, response.text
        message = response.json()["error"]["message"]
        assert CHAT_HEADER in message and "no-such-dir" in message
    assert scripted_model.seen == []
    assert not os.path.lexists(os.path.dirname(missing))


@pytest.mark.parametrize("path", [CHAT_PATH, "/v1/messages", "/v1/responses"])
@pytest.mark.parametrize("model", ["flaky", "flaky-fallback"], ids=["retry", "fallback"])
def test_a_router_attempt_after_an_abort_never_reaches_a_model(
    proxy: TestClient, chat: tuple[str | None, str], model: str, path: str
) -> None:
    """The proxy's router makes further attempts of one request after the pre-call hook:
    a retry (``num_retries``), a fallback model (``fallbacks``). The first attempt fails
    after the operator's abort arrived during it; the next attempt must not reach a model,
    and the request's answer names the abort (403 for a retry; for a fallback, LiteLLM's
    own error carries it). Unchecked, the retry or the fallback answered: 200."""
    _, save_file = chat
    scripted_model.start(load_replay(), Events(save_file), fail_once=True)
    body = ATTEMPTED[path] | {"model": model}
    response = post(proxy, path, body, save_file)
    assert len(scripted_model.seen) == 1, response.text  # the failed attempt only
    assert response.status_code != 200 and ABORT_REASON in response.text, response.text
    if model == "flaky":
        check_refused(response)
    assert held(save_file) == ABORT_REASON
    check_refused(post(proxy, CHAT_PATH, LISTED, save_file))  # and every later request
    assert len(scripted_model.seen) == 1


class _Upstream(BaseHTTPRequestHandler):
    """A provider on loopback for LiteLLM's passthrough route: answers any POST."""

    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers.get("content-length", 0))))
        answer = json.dumps(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-3-haiku-20240307",
                "content": [{"type": "text", "text": "upstream answered"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """What LiteLLM's ``/anthropic/...`` passthrough route forwards, as the provider gets it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("ANTHROPIC_API_BASE", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    _Upstream.bodies = []
    try:
        yield _Upstream.bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_passthrough_route_is_refused_while_chats_are_supervised(
    proxy: TestClient, chat: tuple[str | None, str], upstream: list[bytes]
) -> None:
    """LiteLLM's passthrough routes run the hook without the request's headers: no
    chat's abort can be checked there. A request naming an aborted chat on
    ``/anthropic/v1/messages`` reached the provider (200); now every passthrough
    request is refused (403) unless the operator allows them."""
    socket_path, save_file = chat
    write_abort(save_file, ABORT_REASON)
    body = {"model": "claude-x", "max_tokens": 64, "messages": LISTED["messages"]}
    refused = post(proxy, "/anthropic/v1/messages", body, save_file)
    assert refused.status_code == 403, refused.text
    assert "passthrough" in refused.text and "SCOUTD_LITELLM_PASSTHROUGH" in refused.text
    assert upstream == []
    check_refused(post(proxy, "/v1/messages", body, save_file))  # the route to use
    test_litellm.proxy_handler.configure(
        ProxySettings(roots=(os.path.dirname(save_file),), socket=socket_path, passthrough=True)
    )
    allowed = post(proxy, "/anthropic/v1/messages", body, save_file)
    assert allowed.status_code == 200 and len(upstream) == 1, allowed.text  # as asked


def test_passthrough_is_read_from_the_environment() -> None:
    assert ProxySettings.from_env({}).passthrough is False
    assert ProxySettings.from_env({"SCOUTD_LITELLM_PASSTHROUGH": "allow"}).passthrough is True
    with pytest.raises(ValueError, match="SCOUTD_LITELLM_PASSTHROUGH"):
        ProxySettings.from_env({"SCOUTD_LITELLM_PASSTHROUGH": "yes"})


@pytest.mark.parametrize(
    "env",
    [
        {"SCOUTD_LITELLM_ROOTS": "~/chats"},
        {"SCOUTD_LITELLM_ROOTS": "/srv/chats:chats"},
        {"SCOUTD_LITELLM_TEAM_ROOTS": '{"team-a": ["/srv/a", "relative/b"]}'},
    ],
)
def test_a_root_that_is_not_absolute_stops_the_proxy_at_its_start(env: dict[str, str]) -> None:
    """Such a root used to be dropped in silence: every request naming a chat under it
    was refused, the header's own ``~`` expanded all the same. The daemon's
    ``allowed_roots`` refuse it so too."""
    with pytest.raises(ValueError, match="is not an absolute path"):
        ProxySettings.from_env(env)
    roots = ProxySettings.from_env({"SCOUTD_LITELLM_ROOTS": "/srv/chats:/tmp"}).roots
    assert roots == ("/srv/chats", "/tmp")
