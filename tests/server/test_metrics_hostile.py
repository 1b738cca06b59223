"""``metrics`` against a hostile client, on a real daemon subprocess: what a client
sends (method names, labels, paths, strategies, bytes that are not UTF-8) never
reaches the text, 10,000 distinct method names do not grow it, and every counter
equals what the test did, before and after a reload."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from scoutd import protocol
from scoutd.strategies.inbox import write_abort, write_notice
from tests.server.test_metrics import parse_exposition
from tests.support.daemon import Daemon, LineClient, conversation, wait_for

DISTINCT_METHODS = 10_000
BATCH = 500  # requests written before their answers are read
MAX_REQUEST_BYTES = 256 * 1024
HOSTILE = 'x"\\\n# TYPE scoutd_forged counter\nscoutd_forged{a="b"} 1\n\u2028\x1b[2J'


def _hostile_method(i: int) -> str:
    """A distinct method name per ``i``, made of what could break the exposition."""
    return f"{HOSTILE}{i}" if i % 1000 else HOSTILE + "#" * 100_000 + str(i)


def _pipeline(c: LineClient, lines: list[bytes]) -> list[dict[str, Any]]:
    """Write ``lines`` in batches and read one answer per line."""
    answers: list[dict[str, Any]] = []
    for start in range(0, len(lines), BATCH):
        chunk = lines[start : start + BATCH]
        c.send_raw(b"".join(chunk))
        answers.extend(c.recv(timeout=30) for _ in chunk)
    return answers


def _metrics(c: LineClient) -> tuple[str, dict[str, float]]:
    text = c.call("metrics", timeout=30)["result"]["text"]
    return text, parse_exposition(text)


def _codes(answers: list[dict[str, Any]]) -> dict[int, int]:
    found: dict[int, int] = {}
    for answer in answers:
        if "error" in answer:
            code = answer["error"]["code"]
            found[code] = found.get(code, 0) + 1
    return found


def test_a_hostile_client_neither_forges_nor_grows_the_metrics() -> None:
    d = Daemon(daemon={"max_request_bytes": MAX_REQUEST_BYTES})
    with d, d.connect() as c:
        baseline_text, baseline = _metrics(c)
        chats = os.path.join(d.dir, "chats\n# HELP x")
        os.makedirs(chats)
        expected_errors: dict[int, int] = {}
        # what came before (the harness's own status), and the metrics call to come
        by_method = {
            k.split('"')[1]: int(v)
            for k, v in baseline.items()
            if k.startswith("scoutd_requests_total{")
        }
        by_method["metrics"] += 1
        assert not any(k.startswith("scoutd_errors_total{") for k in baseline)

        def expect(code: int, count: int = 1) -> None:
            expected_errors[code] = expected_errors.get(code, 0) + count

        # 10,000 distinct unknown methods, one of them per thousand 100 KB long
        lines = [
            json.dumps({"jsonrpc": "2.0", "id": i, "method": _hostile_method(i)}).encode() + b"\n"
            for i in range(DISTINCT_METHODS)
        ]
        assert max(map(len, lines)) < MAX_REQUEST_BYTES
        answers = _pipeline(c, lines)
        assert _codes(answers) == {protocol.METHOD_NOT_FOUND: DISTINCT_METHODS}
        expect(protocol.METHOD_NOT_FOUND, DISTINCT_METHODS)
        by_method["other"] += DISTINCT_METHODS

        # lines that are no request: not UTF-8, not JSON, not an object
        garbage = [
            b"\xff\xfe" + HOSTILE.replace("\n", " ").encode() + b"\n",
            b"{\n",
            b"[]\n",
            b'"x"\n',
        ]
        answers = _pipeline(c, garbage)
        codes = _codes(answers)
        assert sum(codes.values()) == len(garbage)
        for code, count in codes.items():
            expect(code, count)
        by_method["other"] += len(garbage)

        # known methods with hostile params: labels, formats, strategies, paths
        hostile_calls: list[tuple[str, dict[str, Any]]] = [
            ("status", {"verbose": HOSTILE}),
            ("session.close", {"session": HOSTILE}),
            ("session.open", {"save_file": "/etc/" + HOSTILE}),
            ("session.open", {"save_file": os.path.join(chats, "a.chat"), "format": HOSTILE}),
            ("prepare_prompt", {"messages": conversation(2), "strategies": [HOSTILE]}),
        ]
        for method, params in hostile_calls:
            reply = c.call(method, params, timeout=30)
            assert "error" in reply, reply
            expect(reply["error"]["code"])
            by_method[method] += 1

        # sessions with hostile labels: 3 opened, 2 closed
        opened = []
        for n in range(3):
            save_file = os.path.join(chats, f"{HOSTILE}{n}.chat".replace("\n", "_"))
            reply = c.call("session.open", {"save_file": save_file, "label": HOSTILE[:200]})
            opened.append(reply["result"]["session"])
        for session in opened[:2]:
            assert "result" in c.call("session.close", {"session": session})
        by_method["session.open"] += 3
        by_method["session.close"] += 2

        # two notices delivered, one abort consumed
        save_file = os.path.join(chats, "notices.chat")
        write_notice(save_file, HOSTILE, name="n1")
        write_notice(save_file, HOSTILE, name="n2")
        reply = c.call("prepare_prompt", {"messages": conversation(3), "save_file": save_file})
        assert "result" in reply
        by_method["prepare_prompt"] = by_method["prepare_prompt"] + 1
        write_abort(os.path.join(chats, f"{HOSTILE}2.chat".replace("\n", "_")), HOSTILE)
        c.notification("session.aborted", timeout=10)

        # a line over max_request_bytes, on a connection of its own
        with d.connect() as big:
            big.send_raw(b"x" * (MAX_REQUEST_BYTES + 10) + b"\n")
            assert big.recv(timeout=30)["error"]["code"] == protocol.TOO_LARGE
        expect(protocol.TOO_LARGE)

        def status() -> dict[str, Any]:
            by_method["status"] += 1
            answer: dict[str, Any] = c.call("status")["result"]
            return answer

        # the daemon sees that connection end a moment later
        wait_for(lambda: status()["counts"]["connections"] == 1, 10, "one connection left")

        text, samples = _metrics(c)
        assert "forged" not in text and "\x1b" not in text and "\u2028" not in text
        assert len(text) < len(baseline_text) + 2048, len(text)  # bounded, whatever came
        allowed = {*protocol.METHOD_PARAMS, "other"}
        methods = {k.split('"')[1] for k in samples if k.startswith("scoutd_requests_total{")}
        assert methods == allowed
        errors_seen = {k for k in samples if k.startswith("scoutd_errors_total{")}
        assert len(errors_seen) == len(expected_errors)
        assert set(baseline) | errors_seen == set(samples)  # no other sample appeared
        for method in allowed:
            key = f'scoutd_requests_total{{method="{method}"}}'
            assert samples[key] == by_method[method], method
        for code, count in expected_errors.items():
            key = next(k for k in errors_seen if f'code="{code}"' in k)
            assert samples[key] == count, (code, samples[key], count)
            assert 'name="unknown"' not in key
        assert samples["scoutd_sessions_opened_total{}"] == 3
        assert samples["scoutd_notices_delivered_total{}"] == 2
        assert samples["scoutd_aborts_total{}"] == 1
        assert samples["scoutd_connections{}"] == 1
        counts = status()["counts"]
        assert counts["requests"] == sum(by_method.values())
        assert counts["errors"] == sum(expected_errors.values())

        # a reload keeps every counter: only this connection's own calls are added
        d.signal(signal.SIGHUP)
        wait_for(lambda: status()["config"]["generation"] == 2, 10, "the reload")
        by_method["metrics"] += 1
        _, after = _metrics(c)
        for key, value in samples.items():
            if key.startswith("scoutd_requests_total{"):
                assert after[key] == by_method[key.split('"')[1]], key
            elif "_total" in key or "_count" in key or "_bucket" in key:
                assert after[key] == value, key
        assert after["scoutd_config_generation{}"] == 2
