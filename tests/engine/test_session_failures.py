"""Failed rounds: ``scoutd.Session`` in process and a daemon session answer alike.

docs/PROTOCOL.md ("Incremental sessions") promises the same prompts in process
and through the daemon, and a call that fails leaves the session's
conversation exactly as it was. One sequence of rounds, some of them failing
in each way a round can fail (a message that breaks the rule, formats mixed,
nesting past the recursion limit, an unknown strategy, a refused override, a
plugin that raises, an abort file), is fed to both; after every step the
error, the ``recall`` answers (by handle and by search) and the next prompt
are compared.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import scoutd
from scoutd.config import Config, load_config, with_overrides
from scoutd.errors import (
    Aborted,
    ConfigError,
    FormatError,
    InvalidMessages,
    RemoteError,
    UnknownStrategy,
)
from scoutd.inbox.names import inbox_dir
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.daemon import Daemon, InProcessDaemon
from tests.support.nesting import nested, too_deep

PLUGIN = textwrap.dedent(
    '''
    """A plugin strategy that fails on a message saying BOOM, else passes all through."""


    def boom(messages):
        for message in messages:
            if "BOOM" in str(message.get("content")):
                raise ValueError("the plugin met BOOM")
        return list(messages)
    '''
)
DEFAULT = ["shorten_tools_cost_aware", "inbox"]
WITH_PLUGIN = ["shorten_tools_cost_aware", "boom", "inbox"]
UNKNOWN = ["shorten_tools_cost_aware", "no_such_strategy", "inbox"]
PROMPT = {"recall": True, "context_window": 6000, "cost_full_tool_outputs": 4}

# The daemon's error for each error the library raises in process (docs/PROTOCOL.md,
# error codes): its own exception where the protocol has one, else a RemoteError.
REMOTE: dict[type[Exception], tuple[type[Exception], int | None]] = {
    InvalidMessages: (RemoteError, -32602),
    FormatError: (RemoteError, -32602),
    UnknownStrategy: (UnknownStrategy, None),
    ConfigError: (ConfigError, None),
    ValueError: (RemoteError, -32603),  # a plugin's failure: the daemon's internal error
    Aborted: (Aborted, None),
}

PAIRS = 40
ANTHROPIC = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "x"}}],
}
CHAT_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "x1", "type": "function", "function": {"name": "g", "arguments": "{}"}}],
}


def chat_run(pairs: int) -> list[dict[str, Any]]:
    """An OpenAI Chat run: a system prompt, a task, then ``pairs`` calls and their
    outputs, output ``n`` starting with ``out-n`` (three digits), which a search finds."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for n in range(pairs):
        arguments = json.dumps({"path": f"/src/{n % 7}.py", "pattern": "x" * 200 + str(n)})
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "grep", "arguments": arguments},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        text = f"out-{n:03d}\n" + "line\n" * 80
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": text})
    return messages


def scout_run(pairs: int) -> list[dict[str, Any]]:
    """:func:`chat_run` in the scout format."""
    chat = chat_run(pairs)
    messages = chat[:2]
    for n, (call, output) in enumerate(zip(chat[2::2], chat[3::2], strict=True)):
        function = call["tool_calls"][0]["function"]
        body = {"name": "grep", "arguments": json.loads(function["arguments"]), "id": f"c{n}"}
        messages.append({"role": "function_call", "content": json.dumps(body)})
        result = {"name": "grep", "content": output["content"], "id": f"c{n}"}
        messages.append({"role": "function_call_output", "content": json.dumps(result)})
    return messages


# Each format's run, the messages before its first call, and a message of another
# format (mixed in, a FormatError).
RUNS: dict[str, tuple[list[dict[str, Any]], int, dict[str, Any]]] = {
    "scout": (scout_run(PAIRS), 2, ANTHROPIC),
    "openai-chat": (chat_run(PAIRS), 2, ANTHROPIC),
    "anthropic": (to_anthropic(chat_run(PAIRS)), 1, CHAT_CALL),
    "openai-responses": (to_responses(chat_run(PAIRS)), 2, ANTHROPIC),
}


def user(fmt: str, text: Any) -> dict[str, Any]:
    """A user turn of format ``fmt``."""
    if fmt == "openai-responses":
        return {"type": "message", "role": "user", "content": text}
    if fmt == "anthropic" and isinstance(text, str):
        return {"role": "user", "content": [{"type": "text", "text": text}]}
    return {"role": "user", "content": text}


@dataclass(frozen=True)
class Step:
    """One round: the conversation, and what the round runs with."""

    name: str
    messages: Sequence[Any]
    strategies: list[str] = field(default_factory=lambda: list(DEFAULT))
    overrides: dict[str, Any] | None = None
    abort: bool = False
    fails: bool = False
    # What the client raises itself, before anything is sent (the daemon never sees it).
    client_raises: type[Exception] | None = None


def steps(fmt: str) -> list[Step]:
    """Successful rounds, each failing kind of round between two of them."""
    run, lead, foreign = RUNS[fmt]

    def upto(pairs: int) -> list[dict[str, Any]]:
        return run[: lead + 2 * pairs]

    other = {**run[0], "content": "Another agent, another task."}
    boom = [*upto(29), user(fmt, "BOOM")]
    return [
        Step("first", upto(8)),
        Step("invalid", [*upto(12), "not a message"], fails=True),
        Step("after invalid", upto(13)),
        Step("formats mixed", [*upto(17), foreign, *run[lead + 36 : lead + 40]], fails=True),
        Step("after formats", upto(18)),
        Step("replaced, formats mixed", [other, *upto(20)[1:], foreign], fails=True),
        Step("unknown strategy", upto(21), strategies=UNKNOWN, fails=True),
        Step("after unknown", upto(22)),
        Step("override refused", upto(24), overrides={"inbox_max_total_bytes": 10**12}, fails=True),
        Step("override accepted", upto(25), overrides={"compaction_notice": "Compacted."}),
        Step("plugin", upto(26), strategies=WITH_PLUGIN),
        Step("plugin raises", boom, strategies=WITH_PLUGIN, fails=True),
        Step("after plugin", upto(30), strategies=WITH_PLUGIN),
        Step(
            "too deep",
            [*upto(33), user(fmt, nested(too_deep()))],
            fails=True,
            client_raises=InvalidMessages,
        ),
        Step("after too deep", upto(34)),
        Step("abort", upto(37), abort=True, fails=True),
        Step("aborted", upto(38), fails=True),
    ]


def questions(messages: Sequence[Any]) -> Iterator[tuple[str | None, str | None]]:
    """Recall calls whose answers tell what a session holds: a handle past any the
    messages hold, and a search for each output the longest step holds."""
    for number in range(1, len(messages) // 2 + 2):
        yield f"#{number}", None
    for n in range(PAIRS):
        yield None, f"out-{n:03d}"


def write_abort(save_file: str, reason: str) -> None:
    """An operator's ``abort`` file in the chat's inbox, written whole (renamed in)."""
    inbox = inbox_dir(save_file)
    os.makedirs(inbox, exist_ok=True)
    temp = os.path.join(inbox, ".abort.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(reason)
    os.replace(temp, os.path.join(inbox, "abort"))


def outcome(run: Callable[[], list[Any]]) -> tuple[list[Any] | None, Exception | None]:
    """The prompt a round gives, or the error it raises."""
    try:
        return run(), None
    except Exception as exc:  # compared by the caller, class by class
        return None, exc


def expected_remote(exc: Exception) -> tuple[type[Exception], int | None]:
    """What the daemon's client raises where the library raised ``exc``."""
    for kind, remote in REMOTE.items():
        if isinstance(exc, kind):
            return remote
    raise AssertionError(f"an error the daemon has no mapping for: {exc!r}")


@pytest.mark.parametrize("fmt", list(RUNS))
def test_failed_rounds_leave_both_sessions_alike(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Step by step, the same errors, recall answers and prompts in process and by the daemon."""
    daemon = Daemon(prompt=PROMPT, plugins={"boom": "failing_plugin:boom"})
    with open(os.path.join(daemon.dir, "failing_plugin.py"), "w", encoding="utf-8") as module:
        module.write(PLUGIN)
    monkeypatch.syspath_prepend(daemon.dir)  # the plugin, for the in-process session
    config: Config = load_config(daemon.config_path)
    local_file = os.path.join(daemon.dir, "local", "chat.jsonl")
    remote_file = os.path.join(daemon.dir, "remote", "chat.jsonl")
    for path in (local_file, remote_file):
        os.makedirs(os.path.dirname(path))
    failed = compared = rolled_back = found = 0
    differences: list[tuple[str, str | None, str | None]] = []  # recall answers
    with daemon, scoutd.Client(daemon.socket_path, timeout=10.0) as client:
        local = scoutd.Session(local_file, config=config)
        remote = client.open_session(remote_file)
        held: Sequence[Any] = []  # the conversation of the last round that succeeded
        for step in steps(fmt):
            if step.abort:
                write_abort(local_file, "stop: operator")
                write_abort(remote_file, "stop: operator")
            local.strategies = step.strategies

            def in_process(step: Step = step) -> list[Any]:
                local.config = with_overrides(config, step.overrides) if step.overrides else config
                return local.prepare_prompt(step.messages)

            def by_daemon(step: Step = step) -> list[Any]:
                return remote.prepare_prompt(step.messages, step.strategies, config=step.overrides)

            mine, error = outcome(in_process)
            theirs, remote_error = outcome(by_daemon)
            local.config = config
            assert (error is not None) == step.fails, (step.name, error)
            if error is None:
                assert remote_error is None, (step.name, remote_error)
                assert mine == theirs, step.name
                held = step.messages
            else:
                failed += 1
                kind, code = expected_remote(error)
                if step.client_raises is not None:
                    kind, code = step.client_raises, None
                assert isinstance(remote_error, kind), (step.name, error, remote_error)
                if code is not None:
                    assert isinstance(remote_error, RemoteError)
                    assert remote_error.code == code, (step.name, remote_error)
                if isinstance(error, Aborted):
                    assert isinstance(remote_error, Aborted)
                    assert error.reason == remote_error.reason == "stop: operator"
                rolled_back += len(step.messages) > len(held)
            for handle, search in questions(step.messages):
                answer = local.recall(handle, search)
                if answer != remote.recall(handle, search):
                    differences.append((step.name, handle, search))
                found += answer.startswith(("out-", "#"))
                compared += 1
        remote.close()
        local.close()
    by_step = Counter(name for name, _, _ in differences)
    assert not differences, f"{len(differences)} recall answers differ, by step: {by_step}"
    assert failed == 9  # every failing step failed on both sides
    assert rolled_back == 9  # each after new messages: a rollback to see
    assert compared > 900
    assert found > 400  # answers that found an output (not only error texts)


def test_messages_nested_too_deep_are_invalid_through_the_client_too() -> None:
    """In process, messages nested past the recursion limit are InvalidMessages (a
    ValueError like any bad input); the client refuses them as that too (it raised a
    bare RecursionError while encoding the request)."""
    start = chat_run(3)
    deep = [*start, user("openai-chat", nested(too_deep()))]
    with pytest.raises(InvalidMessages):
        scoutd.Session().prepare_prompt(deep)
    with InProcessDaemon() as daemon, scoutd.Client(daemon.socket_path, timeout=10.0) as client:
        session = client.open_session(os.path.join(daemon.dir, "chat.jsonl"))
        assert len(session.prepare_prompt(start)) == len(start)
        with pytest.raises(InvalidMessages):
            session.prepare_prompt(deep)
        assert len(session.prepare_prompt(start)) == len(start)  # the session goes on
