"""A request nested too deeply: answered to its own caller, recognised by code and data.

msgspec stops at the interpreter's recursion limit (about a thousand levels on
Python 3.11, ten thousand on 3.13: tests/support/nesting.py), so a request nesting
deeper cannot be decoded at all. The daemon answers ``-32700``
with ``data`` ``{"path": "$", "error": "nested too deeply"}`` and the request's
``id`` when the members before the nesting give it (as every client writes a
request); the client recognises the refusal by that code and data alone
(docs/PROTOCOL.md, error codes). Real daemon process, raw socket lines.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from scoutd import InvalidMessages, protocol
from scoutd.protocol.client_state import ClientState
from scoutd.protocol.error_table import exception_for
from scoutd.protocol.messages import ErrorObject

from ..support.daemon import Daemon
from ..support.nesting import decoder_limit, too_deep

WAIT = 10.0
TOO_DEEP = {"path": "$", "error": "nested too deeply"}


def _deep_line(rid: object, depth: int, pad: int = 0) -> bytes:
    """A ``prepare_prompt`` whose one message nests ``depth`` levels, after ``pad``
    bytes of an ordinary message (a line past 256 KiB is decoded in a worker thread)."""
    deep = "[" * depth + "]" * depth
    messages = f'[{{"role":"user","content":"{"x" * pad}"}},{{"content":{deep}}}]'
    head = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "prepare_prompt"})[:-1]
    return f'{head},"params":{{"messages":{messages}}}}}\n'.encode()


@pytest.mark.parametrize("pad", [0, 300_000], ids=["on the event loop", "in a worker"])
def test_a_request_nested_too_deeply_gets_its_id_and_the_data_that_says_so(pad: int) -> None:
    """Before: ``{"id": null, "error": {"code": -32700, "message": "parse error:
    nested too deeply"}}``, with no data; a client could only match the wording, and
    gave the refusal to every request it had waiting on the connection."""
    with Daemon() as d, d.connect() as c:
        just_past = decoder_limit() + 200
        for rid, depth in ((7, too_deep()), ("deep", 10 * too_deep()), (8, just_past)):
            c.send_raw(_deep_line(rid, depth, pad))
            reply = c.recv(WAIT)
            assert reply["id"] == rid, reply
            assert reply["error"]["code"] == protocol.PARSE_ERROR, reply
            assert reply["error"]["data"] == TOO_DEEP, reply
        assert "result" in c.call("status")  # the connection goes on
    assert "Traceback" not in d.log()


def test_only_the_deep_requests_caller_gets_the_refusal() -> None:
    """The daemon's own answer, fed to a client connection with two requests waiting:
    before, its null id made it the answer of both (each raised InvalidMessages);
    now the other request is still waiting for its own answer."""
    with Daemon() as d, d.connect() as c:
        state = ClientState()
        deep_id, _ = state.send_request("status", protocol.StatusParams())  # its id, sent
        other_id, _ = state.send_request("status", protocol.StatusParams())  # as too deep
        c.send_raw(_deep_line(deep_id, too_deep()))
        answer = c.read_line(WAIT) + b"\n"
    state.receive_data(answer)
    assert not state.answered(other_id)
    received = state.answer(deep_id)
    assert received is not None and received.error is not None
    assert isinstance(exception_for(received.error), InvalidMessages)


@pytest.mark.parametrize(
    ("error", "too_deep"),
    [
        (ErrorObject(code=-32700, message="parse error: whatever", data=TOO_DEEP), True),
        (ErrorObject(code=-32700, message="parse error: nested too deeply"), False),
        (
            ErrorObject(
                code=-32700, message="x", data={"path": "$.params", "error": "nested too deeply"}
            ),
            False,
        ),
        (
            ErrorObject(
                code=-32602, message="x", data={"path": "$.params", "error": "nested too deeply"}
            ),
            True,
        ),
        (
            ErrorObject(code=-32602, message="nested too deeply", data={"path": "$", "error": "x"}),
            False,
        ),
        (ErrorObject(code=-32600, message="x", data=TOO_DEEP), False),
    ],
)
def test_the_client_recognises_too_deep_by_code_and_data_not_by_wording(
    error: ErrorObject, too_deep: bool
) -> None:
    """Before: a -32700 was taken for too deep by its message's words alone (the first
    two rows the other way round)."""
    raised = exception_for(msgspec.convert(msgspec.to_builtins(error), ErrorObject))
    assert isinstance(raised, InvalidMessages) is too_deep, raised
