"""Hostile RPC input: generated frames against one running daemon.

CI size: 5,000 frames over two connections (the full run is 100,000 frames, see
docs/RELIABILITY.md). Every well-framed line gets a JSON-RPC answer (nothing for
a notification or a blank line), the daemon stays up, logs no traceback, and its
memory comes back to the warmed-up baseline.
"""

from __future__ import annotations

import json
from typing import Any

from tests.reliability.harness import run_script
from tests.support.daemon import Daemon


def test_generated_frames_are_each_answered_as_owed() -> None:
    document = run_script(
        "fuzz-rpc",
        "--frames",
        "5000",
        "--workers",
        "2",
        "--seed",
        "3",
    )
    assert document["frames"] == 5000
    assert document["answered"] + document["silent"] == 5000
    assert document["silent"] > 0  # notifications and blank lines were among them
    assert document["daemon_alive"]
    # every kind of frame was tried, and every kind of answer came back
    assert all(count > 0 for count in document["categories"].values())
    for code in ("-32700", "-32600", "-32601", "-32602", "-32003", "-32004", "result"):
        assert document["answers"].get(code, 0) > 0, code
    assert document["rss_kib_after"] > 0


def test_deep_nesting_is_refused_as_bad_input_not_as_a_bug() -> None:
    with Daemon() as d, d.connect() as c:
        c.send_raw(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        reply = c.recv()
        assert reply["id"] is None and reply["error"]["code"] == -32700
        deep = "[" * 50_000 + "1" + "]" * 50_000
        line = (
            '{"jsonrpc":"2.0","id":7,"method":"prepare_prompt",'
            f'"params":{{"messages":[{{"role":"user","content":{deep}}}]}}}}\n'
        )
        c.send_raw(line.encode())
        reply = c.recv()
        assert reply["id"] in (7, None)
        assert reply["error"]["code"] in (-32700, -32602)
        assert "result" in c.call("status")
    assert "Traceback" not in d.log()


def test_a_message_with_an_unhashable_role_is_not_an_internal_error() -> None:
    call = {"name": "grep", "arguments": {}, "id": "c0"}
    output = {"name": "grep", "content": "x", "id": "c0"}
    roles: list[Any] = [[], {"a": 1}]
    with Daemon() as d, d.connect() as c:
        for role in roles:
            messages = [
                {"role": "function_call", "content": json.dumps(call)},
                {"role": "function_call_output", "content": json.dumps(output)},
                {"role": role, "content": "x"},
            ]
            reply = c.call("prepare_prompt", {"messages": messages})
            assert reply["result"]["messages"] == messages, reply
