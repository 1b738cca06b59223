"""The indices answer of ``prepare_prompt``: the param, the layout, its refusal by older daemons."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd import protocol
from scoutd.errors import ProtocolError, RemoteError
from scoutd.protocol import decode_params, decode_request
from scoutd.protocol.client_state import ClientState
from scoutd.protocol.error_table import about_field
from scoutd.protocol.layout import LayoutError, layout_of, rebuild

# --- the param --------------------------------------------------------------------------


def _params(params: dict[str, object]) -> protocol.PreparePromptParams:
    line = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "prepare_prompt", "params": params})
    return decode_params(decode_request(line.encode()), protocol.PreparePromptParams)


@pytest.mark.parametrize(
    ("params", "answer"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [], "answer": "messages"}, "messages"),
        ({"messages": [], "answer": "indices"}, "indices"),
        ({"session": "s", "append": [], "answer": "messages"}, "messages"),
    ],
)
def test_the_answer_param_is_accepted_without_a_session(
    params: dict[str, object], answer: str
) -> None:
    assert _params(params).answer == answer


@pytest.mark.parametrize(
    ("params", "path", "error"),
    [
        (
            {"session": "s", "append": [], "answer": "indices"},
            "$.params",
            "`answer` 'indices' is for calls without a `session` (a session answers with deltas)",
        ),
        (
            {"session": "s", "messages": [], "answer": "indices"},
            "$.params",
            "`answer` 'indices' is for calls without a `session` (a session answers with deltas)",
        ),
        ({"messages": [], "answer": "layout"}, "$.params.answer", "Invalid enum value 'layout'"),
        ({"messages": [], "answer": True}, "$.params.answer", "Expected `str`, got `bool`"),
    ],
)
def test_a_bad_answer_param_is_refused(params: dict[str, object], path: str, error: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        _params(params)
    assert caught.value.code == protocol.INVALID_PARAMS and caught.value.id == 5
    assert caught.value.data == {"path": path, "error": error}


def test_older_clients_send_no_answer_param() -> None:
    """The default is omitted on the wire: what an older daemon receives is unchanged."""
    line = ClientState().send_request("prepare_prompt", protocol.PreparePromptParams(messages=[]))[
        1
    ]
    assert b"answer" not in line
    line = ClientState().send_request(
        "prepare_prompt", protocol.PreparePromptParams(messages=[], answer="indices")
    )[1]
    assert b'"answer":"indices"' in line


def test_the_result_carries_a_layout_instead_of_messages() -> None:
    result = protocol.PreparePromptResult(layout=[[0, 2], {"role": "user"}], report=[])
    assert msgspec.json.decode(protocol.encode_result(1, result)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"layout": [[0, 2], {"role": "user"}], "report": []},
    }


UNKNOWN = "Object contains unknown field `answer`"


@pytest.mark.parametrize(
    ("code", "data", "refused"),
    [
        (protocol.INVALID_PARAMS, {"path": "$.params", "error": UNKNOWN}, True),
        (protocol.INVALID_PARAMS, {"path": "$.params.answer", "error": "Invalid enum"}, False),
        (protocol.INVALID_PARAMS, {"path": "$.params", "error": UNKNOWN[:-8] + "`base`"}, False),
        (protocol.INVALID_PARAMS, {"error": UNKNOWN}, False),
        (protocol.INVALID_PARAMS, UNKNOWN, False),
        (protocol.INVALID_PARAMS, None, False),
        (protocol.INVALID_REQUEST, {"path": "$.params", "error": UNKNOWN}, False),
    ],
)
def test_only_an_older_daemons_refusal_turns_indices_off(
    code: int, data: object, refused: bool
) -> None:
    assert about_field(RemoteError(code, "invalid params", data), "answer") is refused


# --- the layout -------------------------------------------------------------------------


def _request(count: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"m{i}"} for i in range(count)]


def test_runs_single_kept_messages_and_new_ones() -> None:
    request = _request(8)
    new = {"role": "user", "content": "new"}
    prepared = [request[0], request[1], request[2], new, request[5], request[7], request[6]]
    assert layout_of(request, prepared) == [[0, 3], new, 5, 7, 6]
    assert layout_of(request, request) == [[0, 8]]
    assert layout_of(request, []) == []
    assert layout_of([], [new]) == [new]
    assert layout_of(request, [request[3], request[3]]) == [3, 3]


def test_an_equal_message_built_anew_is_sent_whole() -> None:
    request = _request(3)
    again = dict(request[1])
    assert layout_of(request, [request[0], again, request[2]]) == [0, again, 2]


def test_a_new_message_that_is_not_an_object_has_no_layout() -> None:
    request = _request(3)
    assert layout_of(request, [request[0], [1, 2]]) is None
    assert layout_of(request, [request[0], 7]) is None


# A prepared prompt, drawn as: each item either the index of a request message or a new one.
_prompts = st.integers(min_value=0, max_value=30).flatmap(
    lambda count: st.tuples(
        st.just(count),
        st.lists(
            st.integers(min_value=0, max_value=count - 1) | st.none() if count else st.none(),
            max_size=40,
        ),
    )
)


def _expected_layout(request: list[Any], prepared: list[Any]) -> list[Any]:
    """The layout written plainly: each kept message's index found by a search,
    a run grown one index at a time, a run of one left a bare index."""
    layout: list[Any] = []
    for message in prepared:
        found = [i for i, sent in enumerate(request) if sent is message]
        if not found:
            layout.append(message)
            continue
        index = found[0]
        last = layout[-1] if layout else None
        if type(last) is list and last[1] == index:
            last[1] = index + 1
        elif type(last) is int and last + 1 == index:
            layout[-1] = [last, index + 1]
        else:
            layout.append(index)
    return layout


@given(_prompts)
def test_the_layout_is_the_one_written_plainly(drawn: tuple[int, list[int | None]]) -> None:
    count, picks = drawn
    request = _request(count)
    prepared = [
        {"role": "assistant", "content": f"new{n}"} if pick is None else request[pick]
        for n, pick in enumerate(picks)
    ]
    assert layout_of(request, prepared) == _expected_layout(request, prepared)


@given(_prompts)
def test_a_layout_rebuilds_the_prompt_from_equal_messages(
    drawn: tuple[int, list[int | None]],
) -> None:
    """The client's copies stand in for the daemon's decoded request: equal, not the same."""
    count, picks = drawn
    request = _request(count)
    prepared = [
        {"role": "assistant", "content": f"new{n}"} if pick is None else request[pick]
        for n, pick in enumerate(picks)
    ]
    layout = layout_of(request, prepared)
    assert layout is not None
    wire = msgspec.json.decode(msgspec.json.encode(layout))
    sent = copy.deepcopy(request)
    assert rebuild(wire, sent) == prepared
    assert len(layout) <= len(prepared)
    for item in layout:
        if isinstance(item, list):
            assert item[1] - item[0] >= 2  # a run of one is a bare index


@pytest.mark.parametrize(
    "layout",
    [
        [3],
        [-1],
        [[0, 4]],
        [[2, 2]],
        [[2, 1]],
        [[-1, 1]],
        [[0]],
        [[0, 1, 2]],
        [["0", 1]],
        [True],
        ["m"],
        [None],
        [1.0],
        [[0, True]],
    ],
)
def test_a_layout_that_does_not_fit_is_refused(layout: list[Any]) -> None:
    with pytest.raises(LayoutError) as refused:
        rebuild(layout, _request(3))
    # the message names the item and what is wrong with it
    item = layout[0]
    if type(item) is int:
        assert str(refused.value) == f"layout index {item} outside the 3 messages sent"
    else:
        assert str(refused.value) == f"layout item {item!r} is not an index, a run or a message"


def test_rebuild_takes_any_sequence_of_messages() -> None:
    request = tuple(_request(4))
    assert rebuild([[1, 3], 0], request) == [request[1], request[2], request[0]]
    assert rebuild([[1, 3], 0], request)[0] is request[1]
