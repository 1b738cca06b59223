"""A client connection's protocol state, fed bytes, without any socket."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd import protocol
from scoutd.protocol.client_state import Answered, ClientState, SessionAborted


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def result(request_id: Any, value: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id: Any, code: int, data: Any = None) -> bytes:
    return line(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": "m", "data": data}}
    )


def aborted(session: str, reason: str) -> bytes:
    params = {"session": session, "save_file": "/c", "reason": reason}
    return line({"jsonrpc": "2.0", "method": "session.aborted", "params": params})


def test_requests_get_increasing_ids_and_one_line_each() -> None:
    state = ClientState()
    first, data = state.send_request("status", protocol.StatusParams())
    second, _ = state.send_request("status", protocol.StatusParams())
    assert (first, second) == (1, 2)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 1, "method": "status", "params": {}}


def test_answers_go_to_their_request_and_late_ones_are_dropped() -> None:
    state = ClientState()
    one, _ = state.send_request("status", protocol.StatusParams())
    two, _ = state.send_request("status", protocol.StatusParams())
    state.forget_request(one)  # timed out
    events = state.receive_data(result(two, 2) + result(one, 1) + result(99, 0))
    assert events == [Answered(two)]
    assert state.answered(two) and not state.answered(one)
    answer = state.answer(two)
    assert answer is not None and msgspec.json.decode(answer.result) == 2
    assert state.answer(two) is None  # taken once


def test_a_pushed_abort_is_kept_for_its_session_first_reason_first() -> None:
    state = ClientState()
    events = state.receive_data(aborted("s1", "stop") + aborted("s1", "again"))
    assert events == [SessionAborted("s1", "stop"), SessionAborted("s1", "again")]
    assert state.abort_reason("s1") == "stop" and state.abort_reason("s2") is None
    state.forget_session("s1")
    assert state.abort_reason("s1") is None


def test_unknown_notifications_are_ignored() -> None:
    state = ClientState()
    other = line({"jsonrpc": "2.0", "method": "something.new", "params": {}})
    assert state.receive_data(other) == []


def test_an_error_without_id_about_a_long_line_fails_only_that_request() -> None:
    state = ClientState()
    small, _ = state.send_request("status", protocol.StatusParams())
    big_params = protocol.PreparePromptParams(messages=[{"content": "x" * 500}])
    big, _ = state.send_request("prepare_prompt", big_params)
    state.receive_data(error(None, protocol.TOO_LARGE, {"limit": 100}))
    assert state.answered(big) and not state.answered(small)


def test_an_error_without_id_that_is_not_about_size_fails_every_waiting_request() -> None:
    state = ClientState()
    ids = [state.send_request("status", protocol.StatusParams())[0] for _ in range(3)]
    state.receive_data(error(None, protocol.FORBIDDEN))
    assert all(state.answered(rid) for rid in ids)


def test_a_line_that_is_not_a_message_is_an_error() -> None:
    with pytest.raises(msgspec.DecodeError):
        ClientState().receive_data(b"[1, 2\n")


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=8))
def test_events_do_not_depend_on_how_bytes_are_cut(cuts: list[int]) -> None:
    whole = ClientState()
    ids = [whole.send_request("status", protocol.StatusParams())[0] for _ in range(3)]
    data = result(ids[1], "b") + aborted("s", "r") + result(ids[0], "a") + result(ids[2], "c")
    expected = whole.receive_data(data)
    chunked = ClientState()
    for _ in ids:
        chunked.send_request("status", protocol.StatusParams())
    events, position, i = [], 0, 0
    while position < len(data):
        size = cuts[i % len(cuts)]
        events += chunked.receive_data(data[position : position + size])
        position, i = position + size, i + 1
    assert (
        events
        == expected
        == [Answered(ids[1]), SessionAborted("s", "r"), Answered(ids[0]), Answered(ids[2])]
    )
