"""Hostile requests against the real daemon: each one fails alone, the daemon keeps serving.

One regression test per defect of the adversarial review (docs/RELIABILITY.md,
"Hostile requests"): undecodable paths in aborts, answers a client never
reads, unfinished requests across connections, per-call overrides above the
operator's limits, another uid's save file, half-written config files, tool
messages without content, connections that hold slots.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoutd import protocol
from scoutd.strategies.inbox import inbox_dir, write_abort, write_notice
from tests.reliability.harness import ROOT
from tests.support.daemon import Daemon, LineClient, wait_for
from tests.test_hostile_inputs import STRATEGIES, any_message, overrides

HELLO = [{"role": "user", "content": "hello"}]
MIB = 1024 * 1024


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with Daemon() as d:
        yield d


def error_of(response: dict[str, object]) -> dict[str, object]:
    assert "error" in response, response
    error = response["error"]
    assert isinstance(error, dict)
    return error


def closed(client: LineClient) -> bool:
    """Whether the daemon closed the connection (unread data turns EOF into a reset)."""
    try:
        return client.read_line(timeout=10) == b""
    except ConnectionResetError:
        return True


# --- item 1: paths are bytes ---------------------------------------------------------------


def test_abort_under_an_undecodable_directory_name(daemon: Daemon) -> None:
    """The abort reason names a path that is not UTF-8: escaped, never a crash."""
    real = os.path.join(os.fsencode(daemon.dir), b"caf\xe9-\xff")
    os.mkdir(real)
    os.symlink(real, os.path.join(os.fsencode(daemon.dir), b"link"))
    save_file = os.path.join(daemon.dir, "link", "agent.chat")
    session_file = os.path.join(daemon.dir, "link", "other.chat")
    with daemon.client() as c:
        opened = c.call("session.open", {"save_file": session_file})["result"]
        write_abort(os.fsdecode(os.path.join(real, b"other.chat")))  # empty: the generic reason
        pushed = c.notification("session.aborted", timeout=10)["params"]
        assert "\\xe9-\\xff" in pushed["reason"]
        assert pushed["session"] == opened["session"]

        write_abort(os.fsdecode(os.path.join(real, b"agent.chat")))
        error = error_of(c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file}))
        assert error["code"] == protocol.ABORTED
        assert "\\xe9-\\xff" in str(error["message"])
        assert c.call("status")["result"]["counts"]["aborts"] == 2
    assert daemon.alive()
    assert "Traceback" not in daemon.log()  # logging the paths did not fail either


# --- item 3: bounded buffers ---------------------------------------------------------------


def test_unread_answers_stop_the_reading() -> None:
    """Many tiny requests whose large answers are never read: the daemon holds little."""
    answer_bytes = 4 * MIB
    big = [{"role": "user", "content": "x" * (answer_bytes // 4)} for _ in range(4)]
    with Daemon(daemon={"max_queued_response_bytes": MIB}) as d, d.client(timeout=30) as c:
        session = c.call("session.open", {"save_file": os.path.join(d.dir, "a.chat")})
        sid = session["result"]["session"]
        c.call("prepare_prompt", {"session": sid, "messages": big}, timeout=30)
        baseline = d.rss_kib()
        line = (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "prepare_prompt",
                    "params": {"session": sid},
                }
            ).encode()
            + b"\n"
        )
        count = 100  # 400 MiB of answers if all were held
        sender = c.sock.dup()
        sender.settimeout(120)
        writer = threading.Thread(target=sender.sendall, args=(line * count,))
        writer.start()
        try:
            wait_for(lambda: d.status()["counts"]["requests"] >= 4, 20, "requests to run")
            peak = baseline
            for _ in range(20):  # look a while: an unbounded daemon grows meanwhile
                peak = max(peak, d.rss_kib())
                time.sleep(0.05)
            # Bounded: max_queued_response_bytes plus a few answers in the making.
            assert peak - baseline < 96 * 1024, (baseline, peak)
            # Nothing is lost: every answer comes once the client reads.
            for _ in range(count):
                message = c.recv(timeout=60)
                assert message.get("id") == 7 and "result" in message, str(message)[:200]
        finally:
            writer.join(120)
            sender.close()
        assert d.alive()


def test_unfinished_requests_are_bounded_in_total() -> None:
    limits = {"max_request_bytes": MIB, "max_pending_request_bytes": MIB + MIB // 2}
    with Daemon(daemon=limits) as d, d.connect() as first, d.connect() as second:
        first.send_raw(b"[" * (900 * 1024))
        wait_for(
            lambda: d.status()["counts"]["pending_request_bytes"] >= 900 * 1024,
            10,
            "the daemon to hold the first unfinished line",
        )
        # (closed while we are still sending: also a refusal)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            second.send_raw(b"[" * (900 * 1024))
        error = error_of(second.recv(timeout=10))
        assert error["code"] == protocol.TOO_LARGE
        assert "max_pending_request_bytes" in str(error["message"])
        assert closed(second)
        first.send_raw(b"\n")
        assert error_of(first.recv())["code"] == protocol.PARSE_ERROR
        assert "result" in first.call("status")


# --- item 4: overrides tighten only, a budget per call -------------------------------------


def test_overrides_may_only_lower_inbox_limits() -> None:
    with Daemon(prompt={"inbox_max_bytes": 1000, "inbox_max_total_bytes": 1000}) as d:
        save_file = os.path.join(d.dir, "a.chat")
        for key in ("inbox_max_bytes", "inbox_max_total_bytes"):
            with d.client() as c:
                params = {"messages": HELLO, "save_file": save_file, "config": {key: 1 << 40}}
                error = error_of(c.call("prepare_prompt", params))
                assert error["code"] == protocol.INVALID_PARAMS
                assert "may only lower" in str(error["message"])
        write_notice(save_file, "y" * 600, name="n.txt")
        with d.client() as c:
            params = {"messages": HELLO, "save_file": save_file, "config": {"inbox_max_bytes": 10}}
            messages = c.call("prepare_prompt", params)["result"]["messages"]
        assert messages[-1]["content"].startswith("y" * 10 + "\n[scoutd: notice truncated at 10")


def test_one_call_reads_at_most_its_notice_budget() -> None:
    with Daemon(prompt={"inbox_max_total_bytes": 1000}) as d:
        save_file = os.path.join(d.dir, "a.chat")
        for n in range(5):
            write_notice(save_file, str(n) * 400, name=f"{n}.txt")
        with d.client() as c:
            params = {"messages": HELLO, "save_file": save_file}
            first = c.call("prepare_prompt", params)["result"]
            second = c.call("prepare_prompt", params)["result"]
            delivered = [m["content"] for m in first["messages"][1:]]
            assert [text[0] for text in delivered] == ["0", "1", "2"]
            assert delivered[2].startswith("2" * 200 + "\n[scoutd: notice truncated at 200")
            assert sum(len(text) for text in delivered) < 1100
            assert [m["content"] for m in second["messages"][1:]] == ["3" * 400, "4" * 400]
            # An abort sorted after the notices is taken even when the budget would be
            # spent, and alone: every notice stays for the next run.
            for n in range(5):
                write_notice(save_file, str(n) * 400, name=f"{n}.txt")
            write_abort(save_file, "stop")
            error = error_of(c.call("prepare_prompt", params))
            assert error["code"] == protocol.ABORTED and error["data"]["reason"] == "stop"  # type: ignore[index]
        assert sorted(os.listdir(inbox_dir(save_file))) == [f"{n}.txt" for n in range(5)]


# --- item 7: half-written config files -----------------------------------------------------


def config_check(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scoutd", "config", "check", path],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.parametrize(
    "text",
    [
        "",  # truncated to nothing
        "\n  \n",
        "[daemon]\n",  # stalled after the first line: allowed_roots would become "/"
        '[daemon]\nallowed_roots = ["/tmp/x", "/e',  # cut in the middle of a value
        '[daemon]\nallowed_roots = ["relative/dir"]\n',
        "[daemon]\nallowed_roots = []\n",
        # nested past what the reader walks: a RecursionError stopped the daemon's reloads
        '[daemon]\nallowed_roots = ["/tmp"]\n[prompt]\nx = ' + "[" * 3000 + "]" * 3000,
    ],
)
def test_a_partial_config_never_replaces_the_running_one(text: str) -> None:
    with Daemon() as d:
        bad = os.path.join(d.dir, "bad.toml")
        with open(bad, "w", encoding="utf-8") as handle:
            handle.write(text)
        check = config_check(bad)
        d.write_config(text)
        with d.client() as c:
            error = error_of(c.call("config.reload"))
            assert error["code"] == protocol.CONFIG_INVALID
            status = c.call("status")["result"]
            assert status["config"]["generation"] == 1
            assert status["config"]["last_reload_error"]
            error = error_of(
                c.call("prepare_prompt", {"messages": HELLO, "save_file": "/etc/x.chat"})
            )
            assert error["code"] == protocol.FORBIDDEN
        if text != "[daemon]\n":  # valid alone; refused only as a reload that drops a key
            assert check.returncode != 0, check.stdout
            assert check.stderr.startswith("scoutd:"), check.stderr


# --- item 8: malformed tool messages, failed calls ----------------------------------------


def test_tool_message_without_content_and_a_failed_call(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "a.chat")
    history = [
        {"role": "user", "content": "go"},
        {"role": "function_call"},  # no content at all
        {"role": "function_call_output", "content": None},
        {"role": "function_call", "content": "[" * 5000 + "]" * 5000},
    ]
    with daemon.client() as c:
        sid = c.call("session.open", {"save_file": save_file, "messages": history})["result"][
            "session"
        ]
        first = c.call("prepare_prompt", {"session": sid, "append": [], "base": 4})
        assert first["result"]["messages"] == history
        bad = {"session": sid, "append": HELLO, "base": 4, "strategies": "no_such_strategy"}
        assert error_of(c.call("prepare_prompt", bad))["code"] == protocol.UNKNOWN_STRATEGY
        bad = {"session": sid, "messages": HELLO, "strategies": "no_such_strategy"}
        assert error_of(c.call("prepare_prompt", bad))["code"] == protocol.UNKNOWN_STRATEGY
        # Exactly as before the failed calls: 4 messages, not 5 nor 1.
        again = c.call("prepare_prompt", {"session": sid, "append": HELLO, "base": 4})
        assert again["result"]["messages"] == [*history, *HELLO]
    assert "Traceback" not in daemon.log()


# --- item 11: slots ------------------------------------------------------------------------


def test_a_session_does_not_keep_an_idle_connection_open() -> None:
    with Daemon(daemon={"idle_timeout": 0.5}) as d:
        with d.client() as c:
            c.call("session.open", {"save_file": os.path.join(d.dir, "a.chat")})
            assert closed(c)
        wait_for(lambda: d.status()["counts"]["sessions"] == 0, 10, "the session to close")


def test_connections_per_uid_are_limited() -> None:
    with Daemon(daemon={"max_connections_per_uid": 2}) as d:
        # the harness's readiness probe has closed; wait until the daemon saw it
        wait_for(lambda: d.status()["counts"]["connections"] == 1, 10, "probes to close")
        with d.connect() as one, d.connect() as two:
            assert "result" in one.call("status") and "result" in two.call("status")
            third = LineClient(d.socket_path)
            try:
                error = error_of(third.recv())
                assert error["code"] == protocol.TOO_LARGE
                assert "max_connections_per_uid" in str(error["message"])
            finally:
                third.close()

        def served() -> bool:  # refused while the daemon still counts the closed ones
            try:
                return bool(d.status()["counts"]["connections"] == 1)
            except (EOFError, KeyError, OSError):
                return False

        wait_for(served, 10, "the slots to free")


# --- the principle: no frame makes the daemon answer -32603 --------------------------------

hostile_frames = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.integers(0, 1000),
        "method": st.sampled_from(["prepare_prompt", "session.open", "status"]),
        "params": st.fixed_dictionaries(
            {},
            optional={
                "messages": st.lists(any_message, max_size=6),
                "strategies": st.sampled_from(STRATEGIES),
                "config": overrides,
                "save_file": st.sampled_from(["/etc/x.chat", "rel.chat", "", "/"])
                | st.text(max_size=20),
            },
        ),
    }
)


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[Daemon]:
    with Daemon() as d:
        yield d


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(frame=hostile_frames)
def test_no_frame_gets_an_internal_error(shared_daemon: Daemon, frame: dict[str, object]) -> None:
    with shared_daemon.client() as c:
        c.send_raw(msgspec.json.encode(frame) + b"\n")
        answer = c.recv(timeout=30)
    assert answer.get("id") == frame["id"], answer
    if "error" in answer:
        assert error_of(answer)["code"] != protocol.INTERNAL_ERROR, answer
    assert shared_daemon.alive()
    assert "Traceback" not in shared_daemon.log()
