"""The wire protocol as a client in another language reads it in docs/PROTOCOL.md.

Every test speaks raw bytes to a real ``scoutd serve`` subprocess and checks what
such a client needs and cannot learn from the code: the bytes a delta's checksum
covers, the fields an answer carries, how deep a request may nest, and what
``session.recall`` does with both arguments.
"""

from __future__ import annotations

import json
import os
import re
import socket
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from ..support.daemon import Daemon
from ..support.nesting import decoder_limit

TIMEOUT = 20.0
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(rb"[-0-9A-Za-z.+]+")


def value_end(buf: bytes, start: int) -> int:
    """Where the JSON value starting at ``start`` ends (compact JSON, as the daemon writes)."""
    first = buf[start : start + 1]
    if first == b'"':
        match = _STRING.match(buf, start)
        assert match is not None
        return match.end()
    if first not in (b"[", b"{"):
        match = _SCALAR.match(buf, start)
        assert match is not None
        return match.end()
    depth = 0
    position = start
    while True:
        char = buf[position : position + 1]
        if char == b'"':
            match = _STRING.match(buf, position)
            assert match is not None
            position = match.end()
            continue
        if char in (b"[", b"{"):
            depth += 1
        elif char in (b"]", b"}"):
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1


def elements(buf: bytes, start: int) -> list[bytes]:
    """The bytes of each element of the array at ``start``, exactly as sent."""
    assert buf[start : start + 1] == b"["
    found: list[bytes] = []
    position = start + 1
    while buf[position : position + 1] != b"]":
        end = value_end(buf, position)
        found.append(buf[position:end])
        position = end + 1 if buf[end : end + 1] == b"," else end
    return found


def members(buf: bytes, start: int) -> dict[str, int]:
    """Where each member's value of the object at ``start`` begins."""
    assert buf[start : start + 1] == b"{"
    found: dict[str, int] = {}
    position = start + 1
    while buf[position : position + 1] != b"}":
        key_end = value_end(buf, position)
        key = json.loads(buf[position:key_end])
        found[key] = key_end + 1
        end = value_end(buf, key_end + 1)
        position = end + 1 if buf[end : end + 1] == b"," else end
    return found


class Wire:
    """One connection: requests written as lines, answers read as raw lines."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(path)
        self.buffer = b""
        self.ids = 0
        self.pushes: list[bytes] = []  # notifications read while waiting for an answer

    def close(self) -> None:
        self.sock.close()

    def line(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            assert chunk, "the daemon closed the connection"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def lines_until(self, done: Any) -> list[bytes]:
        """Lines read until one satisfies ``done`` (the pushes already read count)."""
        if any(done(line) for line in self.pushes):
            return []
        read: list[bytes] = []
        while not read or not done(read[-1]):
            read.append(self.line())
        return read

    def send(self, method: str, params: dict[str, Any]) -> bytes:
        """Send one request; the raw line of its answer (notifications skipped)."""
        self.ids += 1
        request = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        text = json.dumps(request, separators=(",", ":"), ensure_ascii=False)
        return self.send_line(text.encode(), self.ids)

    def send_line(self, line: bytes, request_id: int) -> bytes:
        self.sock.sendall(line + b"\n")
        while True:
            answer = self.line()
            at = members(answer, 0).get("id")  # read without recursion: answers may nest deep
            if at is None:
                self.pushes.append(answer)
            elif answer[at : value_end(answer, at)] == str(request_id).encode():
                return answer

    def result(self, method: str, params: dict[str, Any]) -> Any:
        answer = json.loads(self.send(method, params))
        assert "result" in answer, answer
        return answer["result"]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


@pytest.fixture
def wire(daemon: Daemon) -> Iterator[Wire]:
    client = Wire(daemon.socket_path)
    try:
        yield client
    finally:
        client.close()


def anthropic_run(pairs: int) -> list[dict[str, Any]]:
    """An Anthropic conversation whose tool inputs hold numbers a JSON library that
    keeps no float/int distinction (JavaScript's) writes back otherwise."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task \u00e9\u2028\x1f"}]
    for n in range(pairs):
        tool_input = {"q": "z" * 300, "t": 1.0, "big": 1e22, "neg": -0.0, "n": n}
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{n}", "name": "grep", "input": tool_input}
                ],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"res {n} " * 80}
        messages.append({"role": "user", "content": [result]})
    return messages


def crc_chain(parts: list[bytes]) -> int:
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    return crc


def crc_of_crcs(parts: list[bytes]) -> int:
    return zlib.crc32(b"".join(zlib.crc32(part).to_bytes(4, "little") for part in parts))


def as_javascript(value: Any) -> Any:
    """``value`` as ``JSON.parse`` leaves it: an integral float is a plain number."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, list):
        return [as_javascript(item) for item in value]
    if isinstance(value, dict):
        return {key: as_javascript(item) for key, item in value.items()}
    return value


def javascript_bytes(message: bytes) -> bytes:
    """The message re-encoded from its parsed value, as a JavaScript client would."""
    text = json.dumps(as_javascript(json.loads(message)), separators=(",", ":"), ensure_ascii=False)
    return text.encode()


@pytest.mark.parametrize("replacing", [False, True], ids=["plain", "replacing"])
def test_a_delta_checksum_covers_each_message_s_bytes_as_the_daemon_sent_them(
    daemon: Daemon, wire: Wire, replacing: bool
) -> None:
    """The checksum is over the bytes each kept message had in the answer that
    carried it (``append``, a whole ``messages`` answer, ``replace``), so a client
    that keeps those bytes checks it in any language; re-encoding parsed values, as
    the docs' recipe reads, fails once a message holds ``1.0`` (a JavaScript client)."""
    conversation = anthropic_run(40)
    save_file = f"{daemon.dir}/checksum-{replacing}.chat"
    session = wire.result("session.open", {"save_file": save_file, "format": "anthropic"})[
        "session"
    ]
    common: dict[str, Any] = {
        "session": session,
        "delta": True,
        "strategies": "shorten_tools_epoch",
        "config": {"epoch_tool_call_threshold": 8},
    }
    if replacing:
        common["delta_replace"] = True
    prompt: list[bytes] = []
    held = 0
    rounds = kept_rounds = replaced = javascript_mismatches = 0
    for length in range(3, len(conversation) + 1, 2):
        params = {**common, "append": conversation[held:length], "base": held}
        line = wire.send("prepare_prompt", params)
        held = length
        result_at = members(line, 0)["result"]
        result = members(line, result_at)
        keep = json.loads(line[result["keep"] : value_end(line, result["keep"])])
        checksum = json.loads(line[result["checksum"] : value_end(line, result["checksum"])])
        kept = prompt[:keep]
        assert (crc_of_crcs(kept) if replacing else crc_chain(kept)) == checksum, (length, keep)
        reencoded = [javascript_bytes(message) for message in kept]
        if keep and (crc_of_crcs(reencoded) if replacing else crc_chain(reencoded)) != checksum:
            javascript_mismatches += 1
        if replacing:
            for pair in elements(line, result["replace"]):
                index_bytes, message = elements(pair, 0)
                kept[int(index_bytes)] = message
                replaced += 1
        else:
            assert "replace" not in result
        prompt = kept + elements(line, result["append"])
        rounds += 1
        kept_rounds += keep > 0
    assert rounds == 40 and kept_rounds >= 38, (rounds, kept_rounds)
    if replacing:
        assert replaced >= 5, replaced
    assert javascript_mismatches >= kept_rounds - 1, (javascript_mismatches, kept_rounds)


def test_a_report_entry_without_a_reason_sends_null_and_an_empty_list_runs_none(
    daemon: Daemon, wire: Wire
) -> None:
    """``reason`` of a strategy that says nothing (``inbox``) is sent as ``null``, not
    left out; an empty strategy list runs nothing and reports one entry, ``<none>``."""
    messages = [{"role": "user", "content": "hello"}]
    line = wire.send("prepare_prompt", {"messages": messages, "strategies": "inbox"})
    assert b'"reason":null' in line
    (entry,) = json.loads(line)["result"]["report"]
    assert entry["strategy"] == "inbox" and entry["reason"] is None
    names: list[str] = []
    empties: tuple[str | list[str], ...] = ("", ",", [])
    for empty in empties:
        result = wire.result("prepare_prompt", {"messages": messages, "strategies": empty})
        assert result["messages"] == messages
        names.extend(entry["strategy"] for entry in result["report"])
    assert names == ["<none>"] * 3


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def refused_too_deep(answer: dict[str, Any]) -> bool:
    error = answer.get("error") or {}
    data = error.get("data") or {}
    return error.get("code") in (-32700, -32602) and data.get("error") == "nested too deeply"


def test_a_request_nests_up_to_the_interpreters_limit_on_every_path(
    daemon: Daemon, wire: Wire
) -> None:
    """No fixed nesting bound: the decoder stops at the interpreter's recursion limit
    (about 1,000 levels on Python 3.11, 10,000 on 3.13: tests/support/nesting.py), so
    the deepest value accepted in a message is a little under it and moves with the
    path (a line over 256 KiB is decoded in a worker thread and may nest deeper). What
    holds on every path: 100 levels under the limit pass, 100 over are refused with
    ``-32700`` or ``-32602`` and ``data.error`` "nested too deeply"."""
    session = wire.result("session.open", {"save_file": f"{daemon.dir}/deep.chat"})["session"]
    short = {"role": "user", "content": "a", "x": "DEEP"}
    long = {"role": "user", "content": "p" * 300_000, "x": "DEEP"}  # over 256 KiB
    paths: dict[str, dict[str, Any]] = {
        "small": {"messages": [short], "strategies": "none"},
        "padded": {"messages": [long], "strategies": "none"},
        "session": {"session": session, "messages": [short], "strategies": "none"},
    }

    def answer(params: dict[str, Any], depth: int) -> dict[str, Any]:
        """The answer's error, or only where its result starts (it may nest as deep)."""
        wire.ids += 1
        request = {"jsonrpc": "2.0", "id": wire.ids, "method": "prepare_prompt", "params": params}
        text = json.dumps(request, separators=(",", ":")).replace('"DEEP"', nested(depth))
        line = wire.send_line(text.encode(), wire.ids)
        at = members(line, 0)
        if "error" in at:
            return {"error": json.loads(line[at["error"] : value_end(line, at["error"])])}
        return {"result": at["result"]}

    limit = decoder_limit()
    deepest: dict[str, int] = {}
    for name, params in paths.items():
        assert "result" in answer(params, limit - 100), name
        assert refused_too_deep(answer(params, limit + 100)), name
        low, high = limit - 100, limit + 100
        while high - low > 1:
            middle = (low + high) // 2
            reply = answer(params, middle)
            if "result" in reply:
                low = middle
            else:
                assert refused_too_deep(reply), reply
                high = middle
        deepest[name] = low
    assert all(limit - 100 <= depth < limit + 100 for depth in deepest.values()), deepest


def test_recall_with_both_a_handle_and_a_search_answers_the_handle(
    daemon: Daemon, wire: Wire
) -> None:
    """Given both arguments, ``session.recall`` answers ``handle`` and ignores
    ``search``; given neither, it answers ``found`` false with a sentence."""
    conversation = anthropic_run(6)
    session = wire.result("session.open", {"save_file": f"{daemon.dir}/recall.chat"})["session"]
    wire.result("prepare_prompt", {"session": session, "messages": conversation})
    by_handle = wire.result("session.recall", {"session": session, "handle": "#2"})
    both = wire.result("session.recall", {"session": session, "handle": "#2", "search": "res 0 "})
    assert by_handle["found"] and by_handle["handle"] == 2
    assert both == by_handle
    neither = wire.result("session.recall", {"session": session})
    assert neither["found"] is False and neither["handle"] is None and neither["text"]


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"jsonrpc":"1.0","id":5,"method":"status"}', 5),
        (b'{"jsonrpc":"2.0","id":"six"}', "six"),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', 7),
        (b'{"jsonrpc":"2.0","id":1.0,"method":"status"}', None),
        (b'[{"jsonrpc":"2.0","id":9,"method":"status"}]', None),
    ],
)
def test_an_invalid_request_whose_id_reads_is_answered_with_that_id(
    wire: Wire, line: bytes, request_id: int | str | None
) -> None:
    """``-32600`` carries the request's ``id`` whenever the line is an object whose
    ``id`` is of a valid type; only a batch or an ``id`` of a wrong type gets null."""
    wire.sock.sendall(line + b"\n")
    answer = json.loads(wire.line())
    assert answer["error"]["code"] == -32600 and answer["id"] == request_id


def test_an_abort_waiting_in_the_inbox_at_open_is_pushed_once_and_stops_the_next_call(
    daemon: Daemon, wire: Wire
) -> None:
    """An ``abort`` already in the inbox when ``session.open`` arrives (dropped while
    the agent reconnected) is claimed by the open, but not necessarily before its
    answer: ``session.aborted`` may follow the answer. A ``prepare_prompt`` sent
    right after the answer fails with ``-32001`` all the same, and the push comes
    once."""
    chats = 3
    stopped = 0
    for chat in range(chats):
        save_file = f"{daemon.dir}/waiting{chat}.chat"
        inbox = f"{daemon.dir}/waiting{chat}.inbox"
        os.mkdir(inbox)
        with open(f"{daemon.dir}/.abort", "w", encoding="utf-8") as handle:
            handle.write("halt")
        os.rename(f"{daemon.dir}/.abort", f"{inbox}/abort")
        session = wire.result("session.open", {"save_file": save_file})["session"]
        answer = json.loads(wire.send("prepare_prompt", {"session": session, "messages": []}))
        assert answer["error"]["code"] == -32001 and answer["error"]["data"]["reason"] == "halt"
        pushes = [
            line
            for line in wire.lines_until(lambda line: b'"session.aborted"' in line)
            if b'"session.aborted"' in line
        ]
        pushes += wire.pushes
        wire.pushes = []
        assert [json.loads(push)["params"]["session"] for push in pushes] == [session]
        stopped += 1
    assert stopped == chats
