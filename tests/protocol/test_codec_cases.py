"""Answer lines that hold a string JSON text cannot carry (a lone surrogate)."""

from __future__ import annotations

import json

from scoutd import protocol


def test_a_lone_surrogate_is_sent_escaped_in_every_kind_of_line() -> None:
    error = protocol.encode_error(1, protocol.ABORTED, "bad \udcff path", {"reason": "r\ud800"})
    assert error.endswith(b"}\n") and error.count(b"\n") == 1
    assert json.loads(error) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": protocol.ABORTED,
            "message": "bad \\xff path",
            "data": {"reason": "r\\ud800"},
        },
    }
    note = protocol.encode_notification("session.aborted", {"reason": "x\udcffy"})
    assert note == b'{"jsonrpc":"2.0","method":"session.aborted","params":{"reason":"x\\\\xffy"}}\n'
    result = protocol.encode_result("i", ["\ud800"])
    assert json.loads(result) == {"jsonrpc": "2.0", "id": "i", "result": ["\\ud800"]}


def test_null_params_count_as_absent() -> None:
    """``"params": null`` was refused ("Expected `object`, got `null`") for methods
    without required parameters, which docs/PROTOCOL.md says accept it."""
    for spaced in ("null", " null ", "\tnull\n"):
        line = f'{{"jsonrpc":"2.0","id":1,"method":"status","params":{spaced}}}'.encode()
        request = protocol.decode_request(line)
        assert request.params is None
        assert protocol.decode_params(request, protocol.StatusParams) == protocol.StatusParams()
    given = protocol.decode_request(b'{"jsonrpc":"2.0","id":1,"method":"status","params":{}}')
    assert given.params is not None and bytes(given.params) == b"{}"
