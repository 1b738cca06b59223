"""The wire format without I/O: request decoding, params validation, framing."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd import protocol
from scoutd.protocol import LineReader, ProtocolError, decode_params, decode_request


def error_of(line: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        decode_request(line)
    return caught.value


def test_codes_are_fixed() -> None:
    assert (protocol.PARSE_ERROR, protocol.INVALID_REQUEST, protocol.METHOD_NOT_FOUND) == (
        -32700,
        -32600,
        -32601,
    )
    assert (protocol.INVALID_PARAMS, protocol.INTERNAL_ERROR) == (-32602, -32603)
    assert list(range(-32001, -32008, -1)) == [
        protocol.ABORTED,
        protocol.UNKNOWN_STRATEGY,
        protocol.FORBIDDEN,
        protocol.TOO_LARGE,
        protocol.CONFIG_INVALID,
        protocol.UNKNOWN_SESSION,
        protocol.SHUTTING_DOWN,
    ]


def test_requests_and_notifications() -> None:
    request = decode_request(b'{"jsonrpc":"2.0","id":"a","method":"status"}')
    assert (request.id, request.method, request.notification, request.params) == (
        "a",
        "status",
        False,
        None,
    )
    request = decode_request(b'{"jsonrpc":"2.0","method":"status","params":{}}')
    assert request.notification and request.id is None
    request = decode_request(b'{"jsonrpc":"2.0","id":null,"method":"status","extra":1}')
    assert not request.notification and request.id is None


@pytest.mark.parametrize(
    ("line", "code", "id"),
    [
        (b"{", protocol.PARSE_ERROR, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"status"', protocol.PARSE_ERROR, None),
        (b"\xff", protocol.PARSE_ERROR, None),
        (b'"\xc3\x28"', protocol.PARSE_ERROR, None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"status"}]', protocol.INVALID_REQUEST, None),
        (b"[1, 2", protocol.PARSE_ERROR, None),
        (b"42", protocol.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"status"}', protocol.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"status"}', protocol.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":{},"method":"status"}', protocol.INVALID_REQUEST, None),
        (b'{"jsonrpc":"1.0","id":7,"method":"status"}', protocol.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":"x"}', protocol.INVALID_REQUEST, "x"),
        (b'{"jsonrpc":"2.0","id":8,"method":3}', protocol.INVALID_REQUEST, 8),
    ],
)
def test_bad_frames(line: bytes, code: int, id: object) -> None:
    error = error_of(line)
    assert (error.code, error.id) == (code, id)


def test_batches_are_refused_by_name() -> None:
    assert "batch" in error_of(b"[]").message


def test_params_errors_carry_the_field_path() -> None:
    request = decode_request(
        b'{"jsonrpc":"2.0","id":3,"method":"prepare_prompt",'
        b'"params":{"messages":[{"role":"user"},{"role":"x","content":[1]}, 5]}}'
    )
    with pytest.raises(ProtocolError) as caught:
        decode_params(request, protocol.PreparePromptParams)
    error = caught.value
    assert error.code == protocol.INVALID_PARAMS and error.id == 3
    assert error.data == {"path": "$.params.messages[2]", "error": "Expected `object`, got `int`"}
    assert "$.params.messages[2]" in error.message
    request = decode_request(b'{"jsonrpc":"2.0","id":3,"method":"session.open","params":{}}')
    with pytest.raises(ProtocolError, match="save_file"):
        decode_params(request, protocol.SessionOpenParams)
    request = decode_request(b'{"jsonrpc":"2.0","id":3,"method":"status","params":[]}')
    with pytest.raises(ProtocolError) as caught:
        decode_params(request, protocol.StatusParams)
    assert caught.value.data == {"path": "$.params", "error": "Expected `object`, got `array`"}


def test_params_decode() -> None:
    request = decode_request(
        b'{"jsonrpc":"2.0","id":1,"method":"prepare_prompt","params":{"messages":[],'
        b'"strategies":"a, b","save_file":"/x","session":"s","config":{"epoch_size":3}}}'
    )
    params = decode_params(request, protocol.PreparePromptParams)
    assert params == protocol.PreparePromptParams(
        messages=[], strategies="a, b", save_file="/x", session="s", config={"epoch_size": 3}
    )
    status = decode_request(b'{"jsonrpc":"2.0","id":1,"method":"status"}')
    assert decode_params(status, protocol.StatusParams) == protocol.StatusParams()


def test_encoders() -> None:
    assert json.loads(protocol.encode_error(None, -32700, "bad")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "bad"},
    }
    line = protocol.encode_error(1, protocol.TOO_LARGE, "big", protocol.TooLargeData(limit=9))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["error"]["data"] == {"limit": 9}
    note = protocol.encode_notification(
        "session.aborted", protocol.SessionAbortedParams(session="s", save_file="/f", reason="r")
    )
    assert json.loads(note) == {
        "jsonrpc": "2.0",
        "method": "session.aborted",
        "params": {"session": "s", "save_file": "/f", "reason": "r"},
    }
    # non-ASCII text and newlines inside strings never break the one-line framing
    result = protocol.encode_result("i", {"content": "é\nü\u2028"})
    assert result.count(b"\n") == 1 and json.loads(result)["result"]["content"] == "é\nü\u2028"


def test_line_reader_splits_and_limits() -> None:
    reader = LineReader(limit=8)
    assert reader.feed(b"ab\r\n\n  \ncd", now=1.0) == [b"ab"]
    assert reader.partial and reader.started == 1.0
    assert reader.feed(b"e\n", now=2.0) == [b"cde"]
    assert not reader.partial
    assert reader.feed(b"1234567890", now=3.0) == [None]  # at once, before the newline
    assert reader.partial  # the rest of the line is still being discarded
    assert reader.feed(b"more junk", now=4.0) == []
    assert reader.feed(b"junk\nok\n", now=5.0) == [b"ok"]
    assert reader.feed(b"123456789\nfine\n", now=6.0) == [None, b"fine"]
    assert reader.feed(b"12345678\n", now=7.0) == [b"12345678"]  # exactly the limit is fine


@given(
    st.lists(
        st.binary(max_size=13).map(lambda b: b.replace(b"\n", b"")) | st.just(b"0123456789\r"),
        max_size=8,
    ),
    st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=5),
)
def test_line_reader_is_chunking_independent(lines: list[bytes], cuts: list[int]) -> None:
    """However the bytes are split into chunks, the same lines come out."""
    data = b"".join(line + b"\n" for line in lines)
    expected = []
    for line in lines:
        line = line[:-1] if line.endswith(b"\r") else line
        if len(line) > 10:
            expected.append(None)
        elif line.strip():
            expected.append(line)
    reader = LineReader(limit=10)
    out: list[bytes | None] = []
    position, i = 0, 0
    while position < len(data):
        size = cuts[i % len(cuts)]
        out += reader.feed(data[position : position + size], now=float(i))
        position += size
        i += 1
    assert out == expected
    assert not reader.partial


def test_structs_round_trip() -> None:
    status = protocol.StatusResult(
        version="1",
        uptime=1.0,
        config=protocol.ConfigStatus(path=None, generation=1, last_reload_error=None),
        counts=protocol.Counts(),
        latency=protocol.Latency(count=0, p50_ms=0, p99_ms=0, max_ms=0),
    )
    assert msgspec.json.decode(msgspec.json.encode(status), type=protocol.StatusResult) == status


def test_one_pass_prepare_decoding_agrees_with_the_general_path() -> None:
    """The fast path for large requests gives the same request, or steps aside."""
    messages = [{"role": "user", "content": "x" * 1000}] * 300
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "prepare_prompt", "params": {"messages": messages}}
    ).encode()
    fast = protocol.decode_prepare_request(line)
    assert fast is not None
    request, params = fast
    general = decode_request(line)
    assert (request.id, request.method, request.notification) == (7, "prepare_prompt", False)
    assert params == decode_params(general, protocol.PreparePromptParams)
    notification = line.replace(b'"id": 7, ', b"")
    assert protocol.decode_prepare_request(notification)[0].notification  # type: ignore[index]
    for other in (
        line.replace(b'"prepare_prompt"', b'"status"'),
        line.replace(b'"messages"', b'"messagez"'),
        line.replace(b'"x', b'{"x', 1),
        line[:-1],
    ):
        assert protocol.decode_prepare_request(other) is None


class _PlainReader:
    """The framing rules byte by byte: the reference for :class:`LineReader`."""

    def __init__(self, limit: int) -> None:
        self.limit, self.line, self.discarding = limit, bytearray(), False
        self.started: float | None = None

    def feed(self, data: bytes, now: float) -> list[bytes | None]:
        out: list[bytes | None] = []
        for byte in data:
            if byte == ord("\n"):
                line = bytes(self.line).removesuffix(b"\r")
                if not self.discarding:
                    if len(line) > self.limit:
                        out.append(None)
                    elif line.strip():
                        out.append(line)
                self.line, self.discarding, self.started = bytearray(), False, None
                continue
            if self.started is None:
                self.started = now
            if self.discarding:
                continue
            self.line.append(byte)
            if len(self.line) > self.limit + 1:  # a "\r" may still come before the newline
                out.append(None)
                self.line, self.discarding = bytearray(), True
        return out


@given(
    st.lists(
        st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")) | st.just(b"0123456789\r"),
        max_size=6,
    ),
    st.booleans(),
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=6),
)
def test_line_reader_gives_up_as_soon_as_a_line_passes_the_limit(
    lines: list[bytes], unfinished: bool, cuts: list[int]
) -> None:
    """Chunk by chunk, not only in the end: an endless line is never buffered."""
    data = b"".join(line + b"\n" for line in lines)
    if unfinished:
        data += b"x" * 30  # a line that never ends
    reader, plain = LineReader(limit=10), _PlainReader(limit=10)
    position, i = 0, 0
    while position < len(data):
        chunk = data[position : position + cuts[i % len(cuts)]]
        assert reader.feed(chunk, now=float(i)) == plain.feed(chunk, now=float(i))
        assert (reader.partial, reader.started) == (plain.started is not None, plain.started)
        position += len(chunk)
        i += 1


def test_a_line_in_many_chunks_is_cut_off_at_the_limit() -> None:
    reader = LineReader(limit=100)
    outputs = [reader.feed(b"y" * 10, now=float(n)) for n in range(10)]
    assert outputs == [[]] * 10
    assert reader.feed(b"y" * 2, now=10.0) == [None]  # 102 bytes: more than the limit and a "\r"
    assert reader.feed(b"y" * 10**6, now=11.0) == []  # discarded, not kept
    assert reader.started == 0.0 and reader.partial
    assert reader.feed(b"y\nok\n", now=12.0) == [b"ok"]
    assert not reader.partial


def test_responses_carry_the_version_and_the_request_id() -> None:
    assert json.loads(protocol.encode_result(7, {"ok": True})) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"ok": True},
    }
    assert json.loads(protocol.encode_error("r1", protocol.ABORTED, "stop")) == {
        "jsonrpc": "2.0",
        "id": "r1",
        "error": {"code": protocol.ABORTED, "message": "stop"},
    }


@pytest.mark.parametrize(("pid", "valid"), [(None, True), (1, True), (4321, True), (0, False)])
def test_session_open_wants_a_positive_pid(pid: int | None, valid: bool) -> None:
    params = {"save_file": "/a.chat"} if pid is None else {"save_file": "/a.chat", "pid": pid}
    request = decode_request(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.open", "params": params}).encode()
    )
    if valid:
        assert decode_params(request, protocol.SessionOpenParams).pid == pid
    else:
        with pytest.raises(ProtocolError) as caught:
            decode_params(request, protocol.SessionOpenParams)
        assert caught.value.code == protocol.INVALID_PARAMS
        assert caught.value.message == (
            "invalid params: pid must be a positive process id - at `$.params`"
        )


def _prepare_params(params: dict[str, object]) -> protocol.PreparePromptParams:
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "prepare_prompt", "params": params})
    return decode_params(decode_request(line.encode()), protocol.PreparePromptParams)


NEEDS_SESSION = "`append`, `base`, `delta` and `redeliver` need a `session`"


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"messages": []}, None),
        ({"session": "s"}, None),
        ({"session": "s", "messages": []}, None),
        ({"session": "s", "append": [], "base": 0, "delta": True}, None),
        ({"session": "s", "append": []}, None),
        ({"session": "s", "base": 2}, None),
        ({}, "`messages` is required without a `session`"),
        ({"delta": True}, "`messages` is required without a `session`"),
        ({"messages": [], "append": []}, NEEDS_SESSION),
        ({"messages": [], "base": 0}, NEEDS_SESSION),
        ({"messages": [], "delta": True}, NEEDS_SESSION),
        ({"messages": [], "redeliver": True}, NEEDS_SESSION),
        ({"session": "s", "messages": [], "redeliver": True}, None),
        (
            {"session": "s", "messages": [], "append": []},
            "give either `messages` or `append`, not both",
        ),
        (
            {"session": "s", "messages": [], "base": 1},
            "give either `messages` or `append`, not both",
        ),
        ({"session": "s", "append": [], "delta": True, "delta_replace": True}, None),
        ({"session": "s", "append": [], "delta_replace": False}, None),
        ({"session": "s", "append": [], "delta_replace": True}, "`delta_replace` needs `delta`"),
        ({"session": "s", "delta": False, "delta_replace": True}, "`delta_replace` needs `delta`"),
    ],
)
def test_prepare_params_combinations(params: dict[str, object], error: str | None) -> None:
    if error is None:
        decoded = _prepare_params(params)
        assert (decoded.session, decoded.base) == (params.get("session"), params.get("base"))
        return
    with pytest.raises(ProtocolError) as caught:
        _prepare_params(params)
    assert caught.value.code == protocol.INVALID_PARAMS and caught.value.id == 3
    assert caught.value.message == f"invalid params: {error} - at `$.params`"


def test_error_messages_name_their_kind() -> None:
    assert error_of(b"{").message.startswith("parse error: ")
    assert error_of(b"\xff").message.startswith("parse error: ")
    assert error_of(b"[1, 2").message.startswith("parse error: ")  # an array, cut short
    assert error_of(b'{"jsonrpc":"2.0","id":"x"}').message.startswith("invalid request: ")
    assert error_of(b"[]").message == "invalid request: batch requests are not supported"


def test_the_one_pass_path_gives_a_notification_a_null_id() -> None:
    line = b'{"jsonrpc":"2.0","method":"prepare_prompt","params":{"messages":[]}}'
    decoded = protocol.decode_prepare_request(line)
    assert decoded is not None
    request, _ = decoded
    assert request.notification and request.id is None


def test_after_an_oversize_line_the_next_one_is_counted_from_zero() -> None:
    reader = LineReader(limit=10)
    assert reader.feed(b"x" * 12, now=0.0) == [None]
    # the next line: 10 bytes and its "\r", then the newline in another chunk
    assert reader.feed(b"\n" + b"y" * 10 + b"\r", now=1.0) == []
    assert reader.feed(b"\n", now=2.0) == [b"y" * 10]
