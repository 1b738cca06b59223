"""A LiteLLM proxy with scoutd's pre-call hook, driven as an agent drives it (docs/INTEGRATIONS.md).

The real proxy app (LiteLLM's FastAPI app, its lifespan, its auth, its
``config.yaml`` with scoutd's documented callback line) is driven through
starlette's TestClient by a scripted agent loop that replays a recorded real
run over HTTP, on the OpenAI route (``/v1/chat/completions``), the
Anthropic route (``/v1/messages``) and the Responses route (``/v1/responses``,
which LiteLLM bridges to the provider's Chat completion). Behind the proxy a custom provider
(tests/integrations/litellm_model.py) records what reached the model and
answers with LiteLLM's mock completions: no network. Each scenario runs with
the hook preparing in the proxy's process and through a real daemon subprocess.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # CI installs the test extra: a missing LiteLLM fails there
    pytest.importorskip("litellm.proxy", reason="needs the extra scoutd[litellm]")

# LiteLLM fetches its model price map from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from starlette.testclient import TestClient

import scoutd
from scoutd.inbox.aborted import clear
from scoutd.integrations.litellm import (
    CHAT_HEADER,
    ProxySettings,
    ScoutdProxyHook,
    proxy_handler,
)
from tests.integrations.litellm_model import scripted_model
from tests.integrations.replay import (
    ABORT_REASON,
    CONFIG,
    NOTICE,
    Events,
    Replay,
    check_one_daemon_session,
    check_rounds,
    contains,
    load_replay,
)

# LiteLLM's own modules use APIs their dependencies deprecated (pydantic's Field
# extras among them); the suite turns warnings into errors, not LiteLLM's here.
pytestmark = [
    pytest.mark.slow,  # long: started first (tests/conftest.py)
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
]

NOTICE_AT = 8
ABORT_AT = 5
KEY = "sk-scoutd-test-5b0c1f2e9d8a7b6c5d4e3f2a1b0c9d8e"
# The documented lines, and a scripted provider in place of a real one.
CONFIG_YAML = """\
model_list:
  - model_name: scripted
    litellm_params:
      model: scripted/replay
  # A provider failing once (litellm_model.py): the router retries, or falls back.
  - model_name: flaky
    litellm_params: {model: scripted/flaky, num_retries: 1}
  - model_name: flaky-fallback
    litellm_params: {model: scripted/flaky, num_retries: 0}
router_settings:
  retry_after: 0
  fallbacks: [{"flaky-fallback": ["scripted"]}]
litellm_settings:
  custom_provider_map:
    - {"provider": "scripted", "custom_handler": tests.integrations.litellm_model.scripted_model}
  callbacks: scoutd.integrations.litellm.proxy_handler
"""


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The proxy app, started once (LiteLLM's import and start-up take seconds)."""
    config = tmp_path_factory.mktemp("proxy") / "config.yaml"
    config.write_text(CONFIG_YAML, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONFIG_FILE_PATH", str(config))
        patch.setenv("LITELLM_MASTER_KEY", KEY)
        from litellm.proxy.proxy_server import app

        with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as client:
            yield client
    proxy_handler.close()


@dataclass
class Route:
    """How an agent talks to one of the proxy's routes."""

    path: str
    format: str

    def start(self, replay: Replay) -> list[dict[str, Any]]:
        if self.format in ("anthropic", "openai-responses"):
            return [{"role": "user", "content": replay.task}]
        return [
            {"role": "system", "content": replay.system},
            {"role": "user", "content": replay.task},
        ]

    def body(self, replay: Replay, history: list[dict[str, Any]]) -> dict[str, Any]:
        if self.format == "anthropic":
            return {
                "model": "scripted",
                "max_tokens": 1024,
                "system": replay.system,
                "messages": history,
            }
        if self.format == "openai-responses":
            return {"model": "scripted", "instructions": replay.system, "input": history}
        return {"model": "scripted", "messages": history}

    def answer(self, replay: Replay, response: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages the agent appends: the model's turn and its tools' outputs."""
        if self.format == "anthropic":
            blocks = [
                {k: b[k] for k in ("type", "text", "id", "name", "input") if k in b}
                for b in response["content"]
            ]
            results = [
                {"type": "tool_result", "tool_use_id": b["id"], "content": replay.outputs[b["id"]]}
                for b in blocks
                if b["type"] == "tool_use"
            ]
            turn = [{"role": "assistant", "content": blocks}]
            return turn + ([{"role": "user", "content": results}] if results else [])
        if self.format == "openai-responses":
            return responses_answer(replay, response)
        message = response["choices"][0]["message"]
        calls = [
            {"id": c["id"], "type": "function", "function": dict(c["function"])}
            for c in message.get("tool_calls") or []
        ]
        assistant: dict[str, Any] = {"role": "assistant", "content": message["content"]}
        if calls:
            assistant["tool_calls"] = calls
        outputs = [
            {"role": "tool", "tool_call_id": c["id"], "content": replay.outputs[c["id"]]}
            for c in calls
        ]
        return [assistant, *outputs]

    def final(self, response: dict[str, Any]) -> str:
        if self.format == "anthropic":
            return "".join(b.get("text", "") for b in response["content"])
        if self.format == "openai-responses":
            return "".join(
                part["text"]
                for item in response["output"]
                if item["type"] == "message"
                for part in item["content"]
                if part["type"] == "output_text"
            )
        return str(response["choices"][0]["message"]["content"])


def responses_answer(replay: Replay, response: dict[str, Any]) -> list[dict[str, Any]]:
    """The input items a Responses agent appends: the output's message and calls, as
    input items, then the tools' outputs."""
    appended: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for item in response["output"]:
        if item["type"] == "message":
            text = "".join(p["text"] for p in item["content"] if p["type"] == "output_text")
            appended.append({"role": "assistant", "content": text})
        elif item["type"] == "function_call":
            call = {k: item[k] for k in ("type", "call_id", "name", "arguments")}
            appended.append(call)
            output = replay.outputs[item["call_id"]]
            outputs.append(
                {"type": "function_call_output", "call_id": item["call_id"], "output": output}
            )
    return appended + outputs


ROUTES = [
    Route("/v1/chat/completions", "openai-chat"),
    Route("/v1/messages", "anthropic"),
    Route("/v1/responses", "openai-responses"),
]


@dataclass
class Run:
    full: list[list[dict[str, Any]]]  # what the agent sent at each request
    last: Any  # the last response: its JSON body
    status: int


def run_agent(
    proxy: TestClient, route: Route, replay: Replay, save_file: str | None, limit: int = 200
) -> Run:
    """The agent's loop: send the whole history, append the answer and the tools' outputs."""
    history = route.start(replay)
    headers = {} if save_file is None else {CHAT_HEADER: save_file}
    full: list[list[dict[str, Any]]] = []
    for _ in range(limit):
        sent = copy.deepcopy(history)
        full.append(sent)
        response = proxy.post(route.path, json=route.body(replay, history), headers=headers)
        assert history == sent  # the agent's own list is never touched
        if response.status_code != 200:
            return Run(full, response.json(), response.status_code)
        appended = route.answer(replay, response.json())
        history = history + appended
        if len(appended) == 1:  # no tool call: the final answer
            return Run(full, response.json(), 200)
    raise AssertionError(f"the agent did not finish in {limit} requests")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def openai_view(messages: list[dict[str, Any]]) -> list[list[Any]]:
    """An OpenAI Chat conversation as (role, text, call ids) rows, system left out."""
    rows: list[list[Any]] = []
    for m in messages:
        if m["role"] == "tool":
            rows.append(["tool", m["tool_call_id"], _text(m["content"])])
        elif m["role"] == "assistant":
            rows.append(
                ["assistant", _text(m.get("content")), [c["id"] for c in m.get("tool_calls") or []]]
            )
        elif m["role"] == "user":
            rows.append(["user", _text(m["content"])])
    return rows


def anthropic_view(messages: list[dict[str, Any]]) -> list[list[Any]]:
    """An Anthropic conversation as the rows of :func:`openai_view` (LiteLLM's translation)."""
    rows: list[list[Any]] = []
    for m in messages:
        blocks = (
            m["content"]
            if isinstance(m["content"], list)
            else [{"type": "text", "text": m["content"]}]
        )
        if m["role"] == "assistant":
            text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
            rows.append(["assistant", text, [b["id"] for b in blocks if b["type"] == "tool_use"]])
            continue
        texts = []
        for b in blocks:
            if b["type"] == "tool_result":
                rows.append(["tool", b["tool_use_id"], _text(b["content"])])
            elif b["type"] == "text":
                texts.append(b["text"])
        if texts:
            rows.append(["user", "".join(texts)])
    return rows


def responses_view(items: list[dict[str, Any]]) -> list[list[Any]]:
    """Responses input items as the rows of :func:`openai_view` (LiteLLM's translation):
    an assistant message and the calls after it make one row."""
    rows: list[list[Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call_output":
            rows.append(["tool", item["call_id"], _text(item["output"])])
        elif kind == "function_call":
            if not rows or rows[-1][0] != "assistant":
                rows.append(["assistant", "", []])
            rows[-1][2].append(item["call_id"])
        elif item["role"] == "assistant":
            rows.append(["assistant", _text(item["content"]), []])
        elif item["role"] == "user":
            rows.append(["user", _text(item["content"])])
    return rows


def check_run(route: Route, run: Run, seen: list[list[Any]], notice_at: int | None) -> None:
    """At every request the model saw the prompt scoutd prepares of the agent's history."""
    expected = [scoutd.prepare(h, config=CONFIG, format=route.format).messages for h in run.full]
    if route.format == "anthropic":  # the model gets LiteLLM's OpenAI translation of it
        check_rounds(
            [anthropic_view(h) for h in run.full],
            [openai_view(m) for m in seen],
            [anthropic_view(m) for m in expected],
            notice_at,
        )
    elif route.format == "openai-responses":  # the model gets LiteLLM's Chat translation
        assert all(m[0]["role"] == "system" for m in seen)
        check_rounds(
            [responses_view(h) for h in run.full],
            [openai_view(m) for m in seen],
            [responses_view(m) for m in expected],
            notice_at,
        )
    else:
        assert all(m[0]["role"] == "system" for m in seen)
        check_rounds(run.full, seen, expected, notice_at)


@pytest.fixture
def chat(socket: tuple[str | None, str]) -> Iterator[tuple[str | None, str]]:
    """The hook configured for one scenario: chats under its directory, in process or not."""
    socket_path, directory = socket
    proxy_handler.configure(ProxySettings(roots=(directory,), socket=socket_path, config=CONFIG))
    yield socket_path, os.path.join(directory, "run.chat")
    proxy_handler.close()


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.format)
def test_whole_run_sees_prepared_prompts(
    proxy: TestClient, route: Route, chat: tuple[str | None, str]
) -> None:
    socket_path, save_file = chat
    replay = load_replay()
    scripted_model.start(replay, Events(save_file, notice_at=NOTICE_AT))
    run = run_agent(proxy, route, replay, save_file)
    assert run.status == 200, run.last
    assert route.final(run.last) == replay.final
    assert len(scripted_model.seen) == len(run.full) == len(replay.turns)
    check_run(route, run, scripted_model.seen, NOTICE_AT)
    # The agent's history holds every recorded output, whole, and no notice.
    assert not contains(run.full[-1], NOTICE)
    assert not contains(run.full[-1], "[Context compaction]")
    proxy_handler.close()  # the proxy's shutdown ends the chat's one session
    check_one_daemon_session(socket_path, os.path.dirname(save_file))


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.format)
def test_abort_answers_a_clear_error_until_cleared(
    proxy: TestClient, route: Route, chat: tuple[str | None, str]
) -> None:
    """The abort ends the run with a 403 naming the reason; the chat stays aborted for every
    later request, of this agent or a new one, until an operator clears it."""
    _, save_file = chat
    replay = load_replay()
    scripted_model.start(replay, Events(save_file, abort_at=ABORT_AT))
    run = run_agent(proxy, route, replay, save_file)
    assert run.status == 403, run.last
    message = json.dumps(run.last)
    assert f"aborted by the operator: {ABORT_REASON}" in message
    assert "scoutd clear" in message
    # The model answered calls 0..ABORT_AT; the next request never reached it.
    assert len(scripted_model.seen) == ABORT_AT + 1 == len(run.full) - 1
    for _ in range(2):  # the same agent retrying, then an agent started again
        again = run_agent(proxy, route, replay, save_file)
        assert again.status == 403 and ABORT_REASON in json.dumps(again.last)
    assert len(scripted_model.seen) == ABORT_AT + 1
    clear(save_file)  # the operator lifts it: the next run goes to its end
    scripted_model.start(replay, Events(save_file))
    cleared = run_agent(proxy, route, replay, save_file)
    assert cleared.status == 200 and route.final(cleared.last) == replay.final


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.format)
def test_without_a_chat_the_request_is_only_compacted(
    proxy: TestClient, route: Route, chat: tuple[str | None, str]
) -> None:
    """No header: compaction, but no inbox (a waiting notice or abort is not read)."""
    _, save_file = chat
    replay = load_replay()
    scripted_model.start(replay, Events(save_file, notice_at=2, abort_at=3))
    run = run_agent(proxy, route, replay, None)
    assert run.status == 200, run.last
    check_run(route, run, scripted_model.seen, None)


@pytest.mark.parametrize(
    "named",
    ["/etc/passwd", "relative.chat", "{dir}/../outside.chat", "{dir}"],
)
def test_a_chat_outside_the_roots_is_refused(
    proxy: TestClient, chat: tuple[str | None, str], named: str
) -> None:
    _, save_file = chat
    replay = load_replay()
    scripted_model.start(replay, Events(save_file))
    named = named.format(dir=os.path.dirname(save_file))
    run = run_agent(proxy, ROUTES[0], replay, named)
    assert run.status == 400, run.last
    assert CHAT_HEADER in run.last["error"]["message"]
    assert scripted_model.seen == []
    assert not Path(named).with_suffix(".inbox_aborted").exists()


def test_the_settings_come_from_the_proxy_environment() -> None:
    environ = {
        "SCOUTD_LITELLM_ROOTS": "/srv/agents:/home/me/chats",
        "SCOUTD_LITELLM_SOCKET": "default",
        "SCOUTD_LITELLM_CONFIG": '{"context_window": 9000}',
        "SCOUTD_LITELLM_MAX_CHATS": "3",
    }
    assert ProxySettings.from_env(environ) == ProxySettings(
        roots=("/srv/agents", "/home/me/chats"),
        socket=True,
        config={"context_window": 9000},
        max_chats=3,
    )
    assert ProxySettings.from_env({}) == ProxySettings()
    assert ProxySettings.from_env({"SCOUTD_LITELLM_SOCKET": "/run/s.sock"}).socket == "/run/s.sock"
    for bad in ({"SCOUTD_LITELLM_MAX_CHATS": "0"}, {"SCOUTD_LITELLM_CONFIG": "[1]"}):
        with pytest.raises(ValueError):
            ProxySettings.from_env(bad)


def test_chats_are_kept_in_a_bounded_lru(tmp_path: Path) -> None:
    """The least recently used chat's session ends first; the bound always holds."""
    hook = ScoutdProxyHook(ProxySettings(roots=(str(tmp_path),), max_chats=2))
    messages = [{"role": "user", "content": "hello"}]
    a, b, c = (str(tmp_path / f"{name}.chat") for name in "abc")
    for save_file in (a, b, c):
        hook.prepare(save_file, "openai-chat", messages)
    assert hook.chats == [(b, "openai-chat"), (c, "openai-chat")]
    hook.prepare(b, "openai-chat", messages)  # b is now the most recent: c goes next
    hook.prepare(a, "openai-chat", messages)
    assert hook.chats == [(b, "openai-chat"), (a, "openai-chat")]
    hook.prepare(None, "openai-chat", messages)  # no chat: nothing kept
    assert len(hook.chats) == 2
    hook.close()
    assert hook.chats == []


def test_a_session_evicted_before_its_round_is_made_anew(tmp_path: Path) -> None:
    """Another request evicts (closes) the chat's session between its lookup and its round."""
    hook = ScoutdProxyHook(ProxySettings(roots=(str(tmp_path),), max_chats=1))
    messages = [{"role": "user", "content": "hello"}]
    a, b = str(tmp_path / "a.chat"), str(tmp_path / "b.chat")
    cache = hook._cache
    lookup = cache.get
    evictions = []

    def lookup_then_evict(chat: tuple[str, str]) -> Any:
        preparer = lookup(chat)
        if not evictions:  # once: the other chat's request comes in meanwhile
            evictions.append(lookup((b, chat[1])))
        return preparer

    cache.get = lookup_then_evict  # type: ignore[method-assign]
    prepared = hook.prepare(a, "openai-chat", messages)
    assert prepared.messages == messages
    assert hook.chats == [(a, "openai-chat")] and len(evictions) == 1
    hook.close()


def test_missing_extra_is_one_line_naming_it() -> None:
    code = """
        import sys
        sys.modules["litellm"] = None  # as if LiteLLM were not installed
        try:
            import scoutd.integrations.litellm
        except ImportError as exc:
            print(str(exc))
        else:
            raise SystemExit("imported without LiteLLM")
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    message = done.stdout.strip()
    assert "\n" not in message
    assert "pip install 'scoutd[litellm]'" in message and "scoutd.integrations.litellm" in message
