"""Every bad request gets the answer docs/PROTOCOL.md gives it, and the connection goes on.

:func:`expected` is a plain reference of the docs ("Framing", each method's params
and errors, "Error codes", "Limits"): for a method and one thing wrong with its
request, the code, the ``id`` (echoed or null) and the shape of ``data`` the daemon
answers, or that it answers nothing. Hypothesis draws the requests; a real daemon
answers them on raw socket lines; every answer is held to the reference, and a
``status`` sent after the bad line must be answered on the same connection.
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..support.daemon import Daemon, LineClient
from ..support.nesting import decoder_limit

WAIT = 10.0  # seconds any one exchange may take
MAX_REQUEST = 64 * 1024  # the daemon's max_request_bytes here
SENTINEL = "sentinel"  # the id of the status sent after every bad line
HELLO = [{"role": "user", "content": "hello"}]

# --- the reference -----------------------------------------------------------------------

# Each method's params as the docs list them: name -> (accepts(value), required).
Accepts = Any  # a predicate over a decoded JSON value


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_str(value: Any) -> bool:
    return type(value) is str


def _objects(value: Any) -> bool:
    return type(value) is list and all(type(item) is dict for item in value)


def _optional(test: Accepts) -> Accepts:
    return lambda value: value is None or test(value)


FORMATS = ("auto", "scout", "openai-chat", "openai-responses", "anthropic")
FIELDS: dict[str, dict[str, tuple[Accepts, bool]]] = {
    "prepare_prompt": {
        "messages": (_optional(_objects), False),
        "append": (_optional(_objects), False),
        "base": (_optional(lambda v: _is_int(v) and v >= 0), False),
        "delta": (lambda v: type(v) is bool, False),
        "delta_replace": (lambda v: type(v) is bool, False),
        "redeliver": (lambda v: type(v) is bool, False),
        "strategies": (
            _optional(lambda v: _is_str(v) or (type(v) is list and all(map(_is_str, v)))),
            False,
        ),
        "save_file": (_optional(_is_str), False),
        "session": (_optional(_is_str), False),
        "config": (_optional(lambda v: type(v) is dict), False),
        "format": (_optional(lambda v: v in FORMATS), False),
        "cache_control": (_optional(lambda v: type(v) is bool), False),
        "answer": (lambda v: v in ("messages", "indices"), False),
    },
    "session.open": {
        "save_file": (_is_str, True),
        "pid": (_optional(_is_int), False),  # < 1: refused at $.params (a rule, not a type)
        "messages": (_optional(_objects), False),
        "format": (lambda v: v in FORMATS, False),
        "label": (_optional(lambda v: _is_str(v) and 1 <= len(v) <= 200), False),
    },
    "session.close": {"session": (_is_str, True)},
    "session.recall": {
        "session": (_is_str, True),
        "handle": (_optional(lambda v: _is_int(v) or (_is_str(v) and len(v) <= 64)), False),
        "search": (_optional(lambda v: _is_str(v) and len(v) <= 4096), False),
    },
    "status": {},
    "metrics": {},
    "config.reload": {},
}
SESSION_METHODS = ("prepare_prompt", "session.close", "session.recall")


def valid_params(method: str, save_file: str) -> dict[str, Any]:
    """Params the method accepts as they are (what each case then spoils)."""
    valid: dict[str, dict[str, Any]] = {
        "prepare_prompt": {"messages": HELLO, "strategies": "none"},
        "session.open": {"save_file": save_file},
        "session.close": {"session": "no-such-session"},
        "session.recall": {"session": "no-such-session", "handle": "#1"},
    }
    return valid.get(method, {})


@dataclass(frozen=True)
class Expected:
    """What the docs say comes back: nothing, a result, or an error."""

    answer: str  # "none", "result" or "error"
    code: int | None = None
    id: Any = None
    path: str | None = None  # -32602: data.path
    data: dict[str, Any] | None = None  # the whole data, when the docs fix it
    close: bool = False


def _error(code: int, rid: Any, **more: Any) -> Expected:
    return Expected("error", code, rid, **more)


def _valid_answer(method: str, rid: Any) -> Expected:
    """The answer to the unspoilt request of each method (its valid params)."""
    if method in ("session.close", "session.recall"):
        return _error(-32006, rid)  # valid, but no such session
    return Expected("result", id=rid)


def expected(case: Case) -> Expected:
    """The reference: docs/PROTOCOL.md's answer to ``case``."""
    rid = case.id if case.has_id else None
    kind = case.kind
    if kind == "blank":
        return Expected("none")  # "Blank lines are ignored"
    if kind in ("not utf-8", "nan", "bom", "malformed"):
        return _error(-32700, None)  # not valid JSON or not UTF-8: id null
    if kind == "too large":  # -32004 with id null, the connection goes on
        return _error(-32004, None, data={"limit": MAX_REQUEST, "key": "max_request_bytes"})
    if kind == "too deep":  # -32700 at $; the id when given before the nesting
        data = {"path": "$", "error": "nested too deeply"}
        return _error(-32700, rid if case.id_first else None, data=data)
    if kind in ("batch", "not an object"):
        return _error(-32600, None)  # not a request object: id null, even as a notification
    if kind == "bad id":
        return _error(-32600, None)  # an id of the wrong type: it is not echoed
    if kind in ("bad jsonrpc", "no method"):
        return _error(-32600, rid)  # the id is echoed when it can be read
    if not case.has_id:
        return Expected("none")  # a notification: never answered, not even with an error
    if kind == "unknown method":
        return _error(-32601, rid)
    if kind in ("params shape", "unknown param", "missing"):
        return _error(-32602, rid, path="$.params")
    if kind == "params null":  # as absent
        return _error(-32602, rid, path="$.params") if _required(case.method) else _valid(case)
    if kind == "wrong type":
        path = f"$.params.{case.field}"
        if case.field == "messages" or case.field == "append":
            bad = case.value
            if type(bad) is list:
                path += f"[{next(i for i, item in enumerate(bad) if type(item) is not dict)}]"
        if case.field == "strategies" and type(case.value) is list:
            path += f"[{next(i for i, item in enumerate(case.value) if not _is_str(item))}]"
        if case.field == "pid" and _is_int(case.value):
            path = "$.params"  # pid < 1: the rule of the params as a whole
        return _error(-32602, rid, path=path)
    if kind == "unknown session":
        return _error(-32006, rid)
    if kind == "wrong base":
        return _error(-32602, rid, path="$.params.base")
    if kind == "bad override":  # an unknown key, or a key only the operator sets
        return _error(-32602, rid, path="$.params.config")
    return _valid(case)  # "unknown member", "trailing cr", "duplicate id": a valid request


def _valid(case: Case) -> Expected:
    return _valid_answer(case.method, case.id if case.has_id else None)


def _required(method: str) -> bool:
    return method == "prepare_prompt" or any(req for _, req in FIELDS[method].values())


# --- the cases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One request and the one thing wrong with it (``kind``)."""

    method: str
    kind: str
    id: Any
    has_id: bool
    id_first: bool = True  # the id member comes before params
    field: str = ""
    value: Any = None
    depth: int = 0


KINDS = [
    "blank", "not utf-8", "nan", "bom", "malformed", "too large", "too deep", "batch",
    "not an object", "bad id", "bad jsonrpc", "no method", "unknown method",
    "params shape", "params null", "unknown param", "missing",
    "unknown session", "wrong base", "bad override", "unknown member", "trailing cr",
    "duplicate id",
]  # fmt: skip
VALUES: list[Any] = [
    0, -1, 7, 1.5, True, False, "", "x", "x" * 300, None, [], [1], ["a", 2], [{}, 3],
    {}, {"a": 1}, "nope-format",
]  # fmt: skip
OVERRIDES: list[dict[str, Any]] = [
    {"no_such_key": 1},
    {"tokenizer": "builtins:len"},
    {"inbox_max_bytes": 10**12},
    {"epoch_size": "many"},
]
ids = st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=12))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(KINDS))
    method = draw(st.sampled_from(list(FIELDS)))
    if kind == "unknown session":
        method = draw(st.sampled_from(SESSION_METHODS))
    if kind in ("wrong base", "bad override"):
        method = "prepare_prompt"
    if kind == "missing":
        method = draw(st.sampled_from(["prepare_prompt", *SESSION_METHODS, "session.open"]))
    rid = draw(ids)
    # about a fifth are notifications (no id member), but where a request is needed
    has_id = kind in ("unknown session", "wrong base", "bad id") or draw(st.integers(0, 4)) > 0
    if kind == "bad id":
        return Case(method, kind, draw(st.sampled_from([1.5, True, [1], {"a": 1}, 1e3])), True)
    if kind == "too deep":
        # past this interpreter's decoder (tests/support/nesting.py), on a line under
        # MAX_REQUEST
        depth = draw(st.integers(decoder_limit() + 500, MAX_REQUEST // 2 - 1_000))
        return Case(method, kind, rid, has_id, id_first=draw(st.booleans()), depth=depth)
    value = None
    if kind == "params shape":
        value = draw(st.sampled_from([[], [1], "x", 3, True]))
    if kind == "bad override":
        value = draw(st.sampled_from(OVERRIDES))
    return Case(method, kind, rid, has_id, value=value)


def _request(case: Case, save_file: str, session: str | None) -> dict[str, Any]:
    params = valid_params(case.method, save_file)
    if case.kind == "wrong type":
        params = {**params, case.field: case.value}
    elif case.kind == "unknown param":
        params = {**params, "zz_unknown": 1}
    elif case.kind == "missing":
        required = [name for name, (_, req) in FIELDS[case.method].items() if req]
        params = {k: v for k, v in params.items() if k not in (required or ["messages"])}
    elif case.kind == "unknown session":
        params = {**params, "session": "no-such-session"}
    elif case.kind == "wrong base":
        params = {"session": session, "append": HELLO, "base": 3}
    elif case.kind == "bad override":
        params = {**params, "config": case.value}
    request: dict[str, Any] = {"jsonrpc": "2.0"}
    if case.has_id and case.id_first:
        request["id"] = case.id
    request["method"] = "no.such.method" if case.kind == "unknown method" else case.method
    if case.kind == "params shape":
        request["params"] = case.value
    elif case.kind == "params null":
        request["params"] = None
    elif case.kind == "too deep":
        request["params"] = {"messages": "DEEP"}
    elif params:
        request["params"] = params
    if case.has_id and not case.id_first:
        request["id"] = case.id
    if case.kind == "bad jsonrpc":
        request["jsonrpc"] = "1.0"
    if case.kind == "no method":
        del request["method"]
    if case.kind == "unknown member":
        request["zz_member"] = {"ignored": [1, 2]}
    return request


def line_of(case: Case, save_file: str, session: str | None) -> bytes:
    """The bytes of ``case`` (with its newline)."""
    kind = case.kind
    if kind == "blank":
        return b"  \t\n"
    text = json.dumps(_request(case, save_file, session))
    if kind == "too deep":
        text = text.replace('"DEEP"', "[" * case.depth + "]" * case.depth)
    line = text.encode()
    if kind == "not utf-8":
        line = line.replace(b'"2.0"', b'"2.0\xff"')
    elif kind == "nan":
        line = line[:-1] + b',"zz":NaN}'
    elif kind == "bom":
        line = b"\xef\xbb\xbf" + line
    elif kind == "malformed":
        line = line[:-1]
    elif kind == "too large":
        line = line[:-1] + b',"zz":"' + b"x" * MAX_REQUEST + b'"}'
    elif kind == "batch":
        line = b"[" + line + b"]"
    elif kind == "not an object":
        line = json.dumps(case.id).encode()
    elif kind == "trailing cr":
        line += b"\r"
    elif kind == "duplicate id" and case.has_id:
        line = b'{"id":"first",' + line[1:]  # the last member of a name counts
    return line + b"\n"


# --- the property -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(daemon={"max_request_bytes": MAX_REQUEST}) as d:
        yield d


def exchange(d: Daemon, case: Case) -> tuple[list[dict[str, Any]], str | None]:
    """Send ``case`` then a status on a fresh connection, end the sending side, and
    read every line until the daemon closes it: all answers, in the order they came."""
    save_file = os.path.join(d.dir, "chat.chat")
    with LineClient(d.socket_path, WAIT) as c:
        session = None
        if case.kind == "wrong base":
            session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        c.send_raw(line_of(case, save_file, session))
        c.request("status", id=SENTINEL)
        c.sock.shutdown(socket.SHUT_WR)
        answers = []
        while line := c.read_line(WAIT):
            answers.append(json.loads(line))
    return answers, session


def check(case: Case, answers: list[dict[str, Any]]) -> None:
    want = expected(case)
    sentinel = [a for a in answers if a.get("id") == SENTINEL]
    assert len(sentinel) == 1 and "result" in sentinel[0], answers  # the connection went on
    others = [a for a in answers if a.get("id") != SENTINEL]
    if want.answer == "none":
        assert others == [], others
        return
    assert len(others) == 1, others
    got = others[0]
    assert got["jsonrpc"] == "2.0" and "id" in got, got
    assert got["id"] == want.id, (got, want)
    if want.answer == "result":
        assert "result" in got and "error" not in got, got
        return
    error = got["error"]
    assert error["code"] == want.code, (error, want)
    assert isinstance(error["message"], str) and error["message"], error
    if want.data is not None:
        assert error.get("data") == want.data, error
    elif want.code == -32602:
        data = error["data"]
        assert data["path"] == want.path, (error, want)
        assert isinstance(data["error"], str) and data["error"], error
        assert str(want.path) in error["message"], error  # "the message also names the path"
        assert set(data) <= {"path", "error", "messages"}, error
    else:
        assert "data" not in error, error  # the table gives these codes no data


def test_every_bad_request_gets_the_documented_answer(daemon: Daemon) -> None:
    """The property, then the floor of what it reached: each kind of bad request and
    each method was drawn, so the oracle cannot pass by testing nothing."""
    reached: Counter[str] = Counter()

    @settings(
        max_examples=400,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(case=cases())
    def answered_as_documented(case: Case) -> None:
        check(case, exchange(daemon, case)[0])
        reached[case.kind] += 1
        reached[f"method {case.method}"] += 1
        reached["notification" if not case.has_id else "request"] += 1

    answered_as_documented()
    assert all(reached[kind] >= 5 for kind in KINDS), reached
    assert all(reached[f"method {method}"] >= 10 for method in FIELDS), reached
    assert reached["notification"] >= 20 and reached["request"] >= 100, reached
    assert daemon.alive() and "Traceback" not in daemon.log()


def test_every_field_of_every_method_refuses_each_wrong_value(daemon: Daemon) -> None:
    """Not drawn but listed: each documented param of each method with each value of
    the wrong type or out of its bounds, as a request (answered at its path) and as
    a notification (answered with nothing), all of them."""
    tried = 0
    for method, fields in FIELDS.items():
        for name, (accepts, _) in fields.items():
            wrong = [value for value in VALUES if not accepts(value)]
            assert wrong, (method, name)
            for number, value in enumerate(wrong):
                case = Case(method, "wrong type", number, True, field=name, value=value)
                check(case, exchange(daemon, case)[0])
                tried += 1
            quiet = Case(method, "wrong type", None, False, field=name, value=wrong[0])
            check(quiet, exchange(daemon, quiet)[0])
    assert tried >= 150, tried
    assert daemon.alive() and "Traceback" not in daemon.log()


def test_the_limits_that_close_a_connection_close_it_after_their_one_answer() -> None:
    """Where the docs close the connection: a line not finished within
    ``read_timeout`` (``-32600``, no data, id null) and request lines over
    ``max_pending_request_bytes`` (``-32004`` naming the key); each is answered once,
    then the connection ends, and the daemon serves the next one."""
    limits = {"read_timeout": 0.3, "max_request_bytes": 4096, "max_pending_request_bytes": 3000}
    with Daemon(daemon=limits) as d:
        with d.connect() as c:
            c.send_raw(b'{"jsonrpc":"2.0","id":1,')
            error = c.recv(WAIT)
            assert error["id"] is None and error["error"]["code"] == -32600, error
            assert "data" not in error["error"] and "read timeout" in error["error"]["message"]
            assert c.read_line(WAIT) == b""  # closed
        with d.connect() as c:
            c.send_raw(b"[" * 3500)
            error = c.recv(WAIT)
            assert error["id"] is None and error["error"]["code"] == -32004, error
            assert error["error"]["data"] == {"limit": 3000, "key": "max_pending_request_bytes"}
            assert c.read_line(WAIT) == b""  # closed
        with d.connect() as c:
            assert "result" in c.call("status")
