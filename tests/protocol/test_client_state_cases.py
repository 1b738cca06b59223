"""A client connection's state: forgetting, the lost reason, what may be sent,
which request an oversize error is about, and what is logged."""

from __future__ import annotations

import json
import logging
import types
from typing import Any

import msgspec
import pytest

from scoutd import protocol
from scoutd.protocol.client_state import Answered, ClientState


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _prepare(state: ClientState, chars: int) -> tuple[int, int]:
    """Send a prepare_prompt whose line is ``chars`` longer than with an empty content;
    return its id and its line's length without the newline."""
    params = protocol.PreparePromptParams(messages=[{"content": "x" * chars}])
    request_id, line = state.send_request("prepare_prompt", params)
    return request_id, len(line) - 1


def test_forgetting_drops_an_answer_and_is_harmless_twice() -> None:
    state = ClientState()
    rid, _ = state.send_request("status", protocol.StatusParams())
    state.receive_data(_line({"jsonrpc": "2.0", "id": rid, "result": {}}))
    assert state.answered(rid)
    state.forget_request(rid)
    assert not state.answered(rid) and state.answer(rid) is None
    state.forget_request(rid)  # already gone: nothing to do
    state.forget_request(12345)  # never sent
    # a late answer to a forgotten request is dropped, not kept
    assert state.receive_data(_line({"jsonrpc": "2.0", "id": rid, "result": {}})) == []
    assert not state.answered(rid)


def test_forgetting_an_unknown_session_is_harmless() -> None:
    state = ClientState()
    state.forget_session("never")
    state.record_abort("s", "r")
    state.forget_session("s")
    assert state.abort_reason("s") is None


def test_the_first_reason_the_connection_was_lost_stays() -> None:
    state = ClientState()
    assert state.lost is None
    state.connection_lost("reset by peer")
    state.connection_lost("closed")
    assert state.lost == "reset by peer"


def test_any_mapping_can_be_sent_and_nothing_else() -> None:
    state = ClientState()
    message = types.MappingProxyType({"role": "user", "content": "hi"})
    params = protocol.PreparePromptParams(messages=[message])  # type: ignore[list-item]
    _, line = state.send_request("prepare_prompt", params)
    assert json.loads(line)["params"]["messages"] == [{"role": "user", "content": "hi"}]
    odd = protocol.PreparePromptParams(messages=[{"content": object()}])
    with pytest.raises(TypeError, match=r"^cannot send a object to the daemon$"):
        state.send_request("prepare_prompt", odd)


def test_an_oversize_error_goes_to_the_first_request_over_the_limit() -> None:
    """Lines are over the limit when longer than it (the newline not counted)."""
    state = ClientState()
    fits, limit = _prepare(state, 10)  # exactly the limit: not too large
    over, over_size = _prepare(state, 11)
    later, _ = _prepare(state, 400)  # also too large, but the first one is meant
    assert over_size == limit + 1
    error = {"code": protocol.TOO_LARGE, "message": "too large", "data": {"limit": limit}}
    events = state.receive_data(_line({"jsonrpc": "2.0", "id": None, "error": error}))
    assert events == [Answered(over)]
    answer = state.answer(over)
    assert answer is not None and answer.error is not None
    assert (answer.error.code, answer.error.data) == (protocol.TOO_LARGE, {"limit": limit})
    assert not state.answered(fits) and not state.answered(later)


def test_an_answer_without_id_or_error_and_an_error_for_another_id_are_dropped() -> None:
    state = ClientState()
    rid, _ = state.send_request("status", protocol.StatusParams())
    error = {"code": protocol.FORBIDDEN, "message": "no"}
    assert state.receive_data(_line({"jsonrpc": "2.0", "id": None, "result": {}})) == []
    assert state.receive_data(_line({"jsonrpc": "2.0", "id": 99, "error": error})) == []
    assert state.receive_data(_line({"jsonrpc": "2.0", "id": "x", "error": error})) == []
    assert not state.answered(rid)


def test_what_is_ignored_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    state = ClientState()
    with caplog.at_level(logging.DEBUG, logger="scoutd.client"):
        state.receive_data(_line({"jsonrpc": "2.0", "method": "other.thing", "params": {}}))
        state.receive_data(_line({"jsonrpc": "2.0", "id": 42, "result": {}}))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "ignoring notification 'other.thing'"),
        ("DEBUG", "discarding a late answer to request 42"),
    ]


@pytest.mark.parametrize("params", [{}, {"session": "s1"}, {"session": 1, "reason": "x"}, None])
def test_a_malformed_abort_push_is_not_this_protocol(params: Any) -> None:
    """It raises, as a malformed answer does (the connection is given up and its
    sessions fail closed); it was logged and ignored, a WARNING per line, which a
    peer writing such lines without end turned into a flood of the agent's log."""
    state = ClientState()
    push = _line({"jsonrpc": "2.0", "method": "session.aborted", "params": params})
    with pytest.raises(msgspec.ValidationError):
        state.receive_data(push)
    assert state.abort_reason("s1") is None
