"""The daemon's methods in this process, each answer whole (scoutd/server/handlers.py):
the debug line every request writes, a method not found, a handler that fails, a
request read after the shutdown began, params nested too deeply, what an open records,
an append another connection made stale, recall, and an abort a prepare finds.

Answers are read as the client reads them, from a real socket, and compared with
what docs/PROTOCOL.md shows; counts are read from the running daemon.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

import scoutd
from scoutd import protocol
from scoutd.recall import NO_CONVERSATION
from scoutd.security import PeerCred
from scoutd.server import handlers

from ..support.daemon import InProcessDaemon, LineClient, conversation
from .test_connection import errors_by_code


@pytest.fixture
def d() -> Iterator[InProcessDaemon]:
    with InProcessDaemon(daemon={"max_session_bytes": 50_000}) as daemon:
        yield daemon


def _chat(d: InProcessDaemon, name: str = "a/agent.chat") -> str:
    path = os.path.join(d.dir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _dropped(d: InProcessDaemon, name: str, text: str) -> str:
    """A chat whose inbox holds the file ``name`` (a notice, an ``abort``); its path."""
    chat = _chat(d)
    inbox = os.path.join(os.path.dirname(chat), "agent.inbox")
    os.makedirs(inbox, exist_ok=True)
    with open(os.path.join(inbox, name), "w", encoding="utf-8") as handle:
        handle.write(text)
    return chat


def _exchange(c: LineClient, request: dict[str, Any]) -> tuple[bytes, bytes, dict[str, Any]]:
    """Send ``request`` as one line; the line sent, the line answered, and its JSON."""
    line = json.dumps(request).encode() + b"\n"
    c.send_raw(line)
    answer = c.read_line()
    found: dict[str, Any] = json.loads(answer)
    return line, answer, found


def _log(d: InProcessDaemon) -> list[str]:
    with open(d.log_path, encoding="utf-8") as handle:
        return handle.read().splitlines()


def _sizes(line: bytes, answer: bytes) -> str:
    """The sizes a request's debug line gives: the request without its newline (as
    sent here, with one), the answer with its own (as read here, without)."""
    return f"in={len(line) - 1}B out={len(answer) + 1}B"


def test_each_request_is_logged_at_debug_with_its_method_session_and_sizes(
    d: InProcessDaemon,
) -> None:
    chat = _chat(d)
    pid = os.getpid()
    with d.connect() as c:
        opened = _exchange(
            c, {"jsonrpc": "2.0", "id": 1, "method": "session.open", "params": {"save_file": chat}}
        )
        sid = opened[2]["result"]["session"]
        prepared = _exchange(
            c,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "prepare_prompt",
                "params": {"session": sid, "messages": conversation(2)},
            },
        )
        method = "m'" + "x" * 100  # shown as its repr's inside, cut at 64 characters
        unknown = _exchange(c, {"jsonrpc": "2.0", "id": 3, "method": method})
        long_id = "s" * 100
        closed = _exchange(
            c,
            {"jsonrpc": "2.0", "id": 4, "method": "session.close", "params": {"session": long_id}},
        )
    expected = [
        rf"request session\.open session=None pid={pid} {_sizes(*opened[:2])} (\d+\.\d\d)ms",
        rf"request prepare_prompt session='{sid}' pid={pid} {_sizes(*prepared[:2])}"
        r" (\d+\.\d\d)ms",
        rf"request {re.escape(method[:64])} session=None pid={pid} {_sizes(*unknown[:2])}"
        r" (\d+\.\d\d)ms",
        rf"request session\.close session='{'s' * 64}' pid={pid} {_sizes(*closed[:2])}"
        r" (\d+\.\d\d)ms",
    ]
    lines = [line.removeprefix("DEBUG scoutd.server: ") for line in _log(d)]
    logged = [line for line in lines if line.startswith("request ")]
    assert len(logged) == len(expected), logged
    for line, pattern in zip(logged, expected, strict=True):
        match = re.fullmatch(pattern, line)
        assert match, (line, pattern)
        assert 0 < float(match.group(1)) < 60_000  # milliseconds, not seconds
    assert unknown[2]["error"] == {
        "code": protocol.METHOD_NOT_FOUND,
        "message": f"method not found: {method!r}",
    }


def test_a_handler_that_fails_answers_internal_error_and_logs_why(
    d: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(call: handlers.Call, params: Any) -> bytes:
        raise RuntimeError("a bug")

    monkeypatch.setitem(handlers.HANDLERS, "status", broken)
    with d.connect() as c:
        _, _, answer = _exchange(c, {"jsonrpc": "2.0", "id": "x1", "method": "status"})
    assert answer == {
        "jsonrpc": "2.0",
        "id": "x1",
        "error": {"code": protocol.INTERNAL_ERROR, "message": "internal error"},
    }
    assert errors_by_code(d) == {protocol.INTERNAL_ERROR: 1}
    log = _log(d)
    at = log.index("ERROR scoutd.server: internal error")
    assert log[at + 1] == "Traceback (most recent call last):" and "RuntimeError: a bug" in log


class _Connection:
    """What :func:`handlers.dispatch` reads of a connection before a handler runs."""

    def __init__(self) -> None:
        self.peer = PeerCred(pid=4321, uid=os.getuid(), gid=os.getgid())
        self.placed_calls = 0

    def placed(self) -> None:
        self.placed_calls += 1


def test_a_request_read_after_the_shutdown_began_is_refused(d: InProcessDaemon) -> None:
    conn = _Connection()
    line = b'{"jsonrpc": "2.0", "id": 12, "method": "status"}'

    async def dispatch(text: bytes) -> bytes | None:
        return await handlers.dispatch(d.server, conn, text, True)  # type: ignore[arg-type]

    answer = d.call(dispatch, line)
    assert json.loads(answer) == {
        "jsonrpc": "2.0",
        "id": 12,
        "error": {"code": protocol.SHUTTING_DOWN, "message": "the daemon is shutting down"},
    }
    assert errors_by_code(d) == {protocol.SHUTTING_DOWN: 1} and conn.placed_calls == 0
    assert d.call(dispatch, b'{"jsonrpc": "2.0", "method": "status"}') is None  # notification


def test_params_the_decoder_cannot_nest_into_are_refused_with_the_request_id(
    d: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which depth makes the params' decoder, not the envelope's, run out of stack
    depends on the interpreter (tests/protocol/test_wire_from_docs.py bisects it); its
    ``RecursionError`` is raised here: refused as invalid params, the id kept."""

    def too_deep(*args: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(protocol, "decode_params", too_deep)
    with d.connect() as c:
        _, _, answer = _exchange(c, {"jsonrpc": "2.0", "id": 9, "method": "status", "params": {}})
    assert answer == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {
            "code": protocol.INVALID_PARAMS,
            "message": "invalid params: nested too deeply - at `$.params`",
            "data": {"path": "$.params", "error": "nested too deeply"},
        },
    }
    assert errors_by_code(d) == {protocol.INVALID_PARAMS: 1}
    said = f"DEBUG scoutd.server: refused a request nested too deeply (pid {os.getpid()})"
    assert said in _log(d)


# -- sessions ------------------------------------------------------------------------------


def _counts(d: InProcessDaemon) -> tuple[int, list[tuple[int | None, str | None]]]:
    def read() -> tuple[int, list[tuple[int | None, str | None]]]:
        server = d.server
        found = [(s.pid, s.label) for s in server.registry.sessions.values()]
        return server.shared.metrics.sessions_opened, found

    counts: tuple[int, list[tuple[int | None, str | None]]] = d.call(read)
    return counts


def test_an_open_records_its_pid_and_label_and_counts_only_when_it_succeeds(
    d: InProcessDaemon,
) -> None:
    chat = _chat(d)
    with d.connect() as c:
        assert "result" in c.call("session.open", {"save_file": chat, "pid": 77, "label": "l"})
        assert "result" in c.call("session.open", {"save_file": chat})
        assert _counts(d) == (2, [(77, "l"), (None, None)])
        too_big = conversation(60)  # past max_session_bytes: refused, and no session left
        refused = c.call("session.open", {"save_file": chat, "messages": too_big})
        assert refused["error"]["code"] == protocol.TOO_LARGE
        assert _counts(d) == (2, [(77, "l"), (None, None)])


def test_an_append_after_another_connection_set_the_conversation_is_refused(
    d: InProcessDaemon,
) -> None:
    chat = _chat(d)
    start, more = conversation(2), conversation(3)
    with d.connect() as first, d.connect() as second:
        sid = first.call("session.open", {"save_file": chat})["result"]["session"]
        assert "result" in first.call("prepare_prompt", {"session": sid, "messages": start})
        append = {"session": sid, "append": more[len(start) :], "base": len(start)}
        refused = second.call("prepare_prompt", append)
        error = (
            "another connection set the session's conversation since this one's last"
            " call: send the whole conversation as `messages`"
        )
        assert refused["error"] == {
            "code": protocol.INVALID_PARAMS,
            "message": f"invalid params: {error} - at `$.params.base`",
            "data": {"path": "$.params.base", "error": error, "messages": len(start)},
        }
        assert refused["id"] is not None
        assert "result" in second.call("prepare_prompt", {"session": sid, "messages": more})
        # now the first one's append is the stale one; its whole conversation is not
        refused = first.call("prepare_prompt", {**append, "base": len(start)})
        assert refused["error"]["data"]["messages"] == len(more)
        assert "result" in first.call("prepare_prompt", {"session": sid, "messages": start})
        assert "result" in first.call(
            "prepare_prompt", {"session": sid, "append": more[len(start) :], "base": len(start)}
        )


def test_recall_answers_from_the_sessions_own_conversation(d: InProcessDaemon) -> None:
    chat = _chat(d)
    messages = conversation(3)
    with d.connect() as c:
        sid = c.call("session.open", {"save_file": chat})["result"]["session"]
        empty = c.call("session.recall", {"session": sid, "handle": 1})["result"]
        assert empty == {"text": NO_CONVERSATION, "handle": None, "found": False}
        assert "result" in c.call("prepare_prompt", {"session": sid, "messages": messages})
        found = c.call("session.recall", {"session": sid, "handle": 1})["result"]
        outputs = [
            json.loads(m["content"])["content"]
            for m in messages
            if m["role"] == "function_call_output"
        ]
        assert (found["found"], found["handle"], found["text"]) == (True, 1, outputs[0])
        used = d.call(lambda: d.server.registry.sessions[sid].last_used)
        c.call("session.recall", {"session": sid, "handle": 2})
        assert d.call(lambda: d.server.registry.sessions[sid].last_used) > used
        assert c.call("session.close", {"session": sid})["result"] == {}
        gone = c.call("session.recall", {"session": sid, "handle": 1})["error"]
        assert gone == {"code": protocol.UNKNOWN_SESSION, "message": f"unknown session {sid!r}"}


# -- an abort found by a prepare -------------------------------------------------------------


def test_an_abort_a_prepare_consumes_is_counted_once_and_answered(d: InProcessDaemon) -> None:
    chat = _dropped(d, "abort", "budget spent\n")
    inbox = os.path.join(os.path.dirname(chat), "agent.inbox")
    with d.connect() as c:
        params = {"save_file": chat, "messages": conversation(2)}
        first = c.call("prepare_prompt", params)["error"]
        again = c.call("prepare_prompt", params)["error"]
    assert first["code"] == again["code"] == protocol.ABORTED
    assert first["message"] == again["message"] == "aborted: budget spent"
    assert first["data"]["reason"] == "budget spent"
    consumed = [line for line in _log(d) if "abort consumed" in line]
    assert consumed == [
        f"INFO scoutd.sessions: abort consumed for {inbox!r} (0 session(s)): 'budget spent'"
    ]
    assert d.call(lambda: d.server.registry.aborts) == 1


# -- refusals, notices, and what a round ran on ---------------------------------------------


def test_refusals_name_the_field_and_the_reason_whole(d: InProcessDaemon) -> None:
    outside = "/etc/scoutd-test/agent.chat"
    with d.connect() as c:
        forbidden = c.call("prepare_prompt", {"save_file": outside, "messages": []})["error"]
        override = c.call("prepare_prompt", {"messages": [], "config": {"context_window": "x"}})
        unknown = c.call("session.close", {"session": "nope"})["error"]
    reason = (
        f"save_file {outside!r} resolves to {outside!r}, outside allowed_roots"
        f" ({os.path.realpath(d.dir)})"
    )
    assert forbidden == {
        "code": protocol.FORBIDDEN,
        "message": f"forbidden: {reason}",
        "data": {"reason": reason},
    }
    error = override["error"]
    assert error["code"] == protocol.INVALID_PARAMS and list(error["data"]) == ["path", "error"]
    assert error["data"]["path"] == "$.params.config"
    assert error["data"]["error"].startswith("invalid configuration in per-call overrides")
    assert error["message"] == f"invalid params: {error['data']['error']} - at `$.params.config`"
    assert unknown == {"code": protocol.UNKNOWN_SESSION, "message": "unknown session 'nope'"}


def test_a_sessions_rounds_deliver_its_inboxs_notices_and_again_when_asked(
    d: InProcessDaemon,
) -> None:
    """A round picks up the notices of the session's inbox; ``redeliver`` gives the
    last answer's again (its answer was lost), a plain round does not."""
    chat = _dropped(d, "note.txt", "NOTICE-7 the build is red")
    messages = conversation(2)
    with d.connect() as c:
        sid = c.call("session.open", {"save_file": chat})["result"]["session"]

        def noticed(**extra: Any) -> bool:
            answer = c.call("prepare_prompt", {"session": sid, "messages": messages, **extra})
            return "NOTICE-7" in json.dumps(answer["result"])

        assert noticed() and noticed(redeliver=True) and not noticed()
    assert d.call(lambda: d.server.metrics.notices_delivered) == 1


def test_a_session_less_prepare_with_a_save_file_delivers_its_notices(d: InProcessDaemon) -> None:
    chat = _dropped(d, "note.txt", "NOTICE-8 rebase first")
    with d.connect() as c:
        answer = c.call("prepare_prompt", {"save_file": chat, "messages": conversation(2)})
    assert "NOTICE-8" in json.dumps(answer["result"])


def test_a_session_round_that_names_its_save_file_is_still_the_sessions(
    d: InProcessDaemon,
) -> None:
    chat = _chat(d)
    start, more = conversation(2), conversation(3)
    with d.connect() as c:
        sid = c.call("session.open", {"save_file": chat})["result"]["session"]
        first = c.call("prepare_prompt", {"session": sid, "messages": start, "save_file": chat})
        assert "result" in first
        append = {"session": sid, "append": more[len(start) :], "base": len(start)}
        assert "result" in c.call("prepare_prompt", append)  # the session holds `start`
    prepared = d.call(lambda: (d.server.metrics.prepare_count, d.server.metrics.prepare_sum))
    assert prepared[0] == 2 and 0 < prepared[1] < 60  # seconds each took, summed


def test_a_line_that_is_no_request_is_logged_and_answered_as_such(
    d: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    with d.connect() as c:
        c.send_raw(b"not json\n")
        assert json.loads(c.read_line())["error"]["code"] == protocol.PARSE_ERROR
        failures = iter([RuntimeError("codec bug"), RecursionError("too deep to read")])

        def failing(line: bytes) -> Any:
            raise next(failures)

        monkeypatch.setattr(protocol, "decode_request", failing)
        c.send_raw(b'{"jsonrpc": "2.0", "id": 5, "method": "status"}\n')
        internal = json.loads(c.read_line())
        c.send_raw(b'{"jsonrpc": "2.0", "id": 6, "method": "status"}\n')
        deep = json.loads(c.read_line())
    assert internal == {
        "jsonrpc": "2.0",
        "id": None,  # the request was never read: no id to give
        "error": {"code": protocol.INTERNAL_ERROR, "message": "internal error"},
    }
    assert deep["id"] is None and deep["error"]["code"] == protocol.INVALID_PARAMS
    garbage = [line for line in _log(d) if "request ? session=None" in line]
    assert len(garbage) == 3, _log(d)


def test_a_small_session_less_prepare_runs_on_the_loop_and_answers_whole(
    d: InProcessDaemon,
) -> None:
    messages = conversation(2)
    with d.connect() as c:
        answer = c.call("prepare_prompt", {"messages": messages})["result"]
    assert answer["messages"] == messages  # nothing to compact yet
    assert [entry["strategy"] for entry in answer["report"]] == [
        "shorten_tools_cost_aware",
        "inbox",
    ]


def test_a_prepare_on_the_loop_runs_under_the_daemons_prompt_table() -> None:
    """The ``[prompt]`` table in force, not the defaults: a small window compacts."""
    messages = conversation(12)
    with InProcessDaemon(prompt={"context_window": 3000}) as daemon, daemon.connect() as c:
        answer = c.call("prepare_prompt", {"messages": messages})["result"]
    expected = scoutd.prepare_prompt(
        messages, config=scoutd.load_config(overrides={"context_window": 3000})
    )
    assert answer["messages"] == expected and len(json.dumps(expected)) < len(json.dumps(messages))


def test_a_sessions_own_connection_keeps_getting_deltas(d: InProcessDaemon) -> None:
    """Its encoder is forgotten only when another connection asks (its last prompt
    went there): the owner's next delta keeps what it sent before."""
    chat = _chat(d)
    with d.connect() as c:
        sid = c.call("session.open", {"save_file": chat})["result"]["session"]
        first = c.call(
            "prepare_prompt", {"session": sid, "messages": conversation(2), "delta": True}
        )
        second = c.call(
            "prepare_prompt", {"session": sid, "messages": conversation(3), "delta": True}
        )
    assert first["result"]["keep"] == 0
    assert second["result"]["keep"] == len(first["result"]["append"])


def test_a_session_round_the_worker_refuses_is_forbidden_with_the_reason(
    d: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round's save file is checked again in its worker (its chat directory may
    have been swapped for a link outside ``allowed_roots`` since the open; what the
    watcher does then races the round): the worker's refusal is the answer."""
    from scoutd.errors import Forbidden
    from scoutd.server import workers

    reason = "save_file 'a/agent.chat' resolves outside allowed_roots"

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise Forbidden(reason)

    chat = _chat(d)
    with d.connect() as c:
        sid = c.call("session.open", {"save_file": chat})["result"]["session"]
        monkeypatch.setattr(workers, "run_session_prepare", refuse)
        refused = c.call("prepare_prompt", {"session": sid, "messages": conversation(2)})
    assert refused["error"] == {
        "code": protocol.FORBIDDEN,
        "message": f"forbidden: {reason}",
        "data": {"reason": reason},
    }


def test_messages_that_mix_formats_are_invalid_at_their_field(d: InProcessDaemon) -> None:
    call = {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "x", "content": "a"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "y", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "y", "content": "b"}]},
    ]
    with d.connect() as c:
        error = c.call("prepare_prompt", {"messages": messages})["error"]
    why = (
        "messages mix formats: message 0 is openai-chat ('tool_calls') but message 2 is"
        " anthropic (a 'tool_use' block)"
    )
    assert error == {
        "code": protocol.INVALID_PARAMS,
        "message": f"invalid params: {why} - at `$.params.messages`",
        "data": {"path": "$.params.messages", "error": why},
    }
