"""The daemon end to end, on a real socket.

Each test starts its own daemon (:mod:`scoutd.testing`) in a short temp dir and
talks to it with raw sockets, so the wire format itself is under test. Tests
that need a process of its own (signals, restarts, startup failures, operator
plugins, fd limits) run ``python -m scoutd serve``; the others run the same
daemon in this process (:class:`InProcessDaemon`), which starts in milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

import scoutd
from scoutd import protocol
from tests.support.daemon import Daemon, InProcessDaemon, LineClient, conversation, wait_for

GATE_MODULE = '''
import os, time

def gate(messages):
    """Block until the test creates gate.release (bounded), after marking gate.started."""
    here = os.path.dirname(os.path.abspath(__file__))
    open(os.path.join(here, "gate.started"), "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(here, "gate.release")):
        if time.monotonic() > deadline:
            raise RuntimeError("gate never released")
        time.sleep(0.005)
    return messages
'''

# The epoch thresholds these tests change belong to this strategy list.
EPOCHS = "shorten_tools_epoch_increment,inbox"


def gated_daemon(**kwargs: Any) -> Daemon:
    d = Daemon(plugins={"gate": "gate:gate"}, **kwargs)
    with open(os.path.join(d.dir, "gate.py"), "w") as handle:
        handle.write(GATE_MODULE)
    return d


def release(d: Daemon) -> None:
    open(os.path.join(d.dir, "gate.release"), "w").close()


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with InProcessDaemon(daemon={"read_timeout": 1.0}) as d:
        yield d


def test_prepare_prompt_equals_the_library(daemon: Daemon) -> None:
    """The wire result is exactly scoutd.prepare's, for several strategy lists."""
    messages = conversation(120)
    with daemon.connect() as c:
        for strategies in (None, ["shorten_tools"], "shorten_tools_epoch, none"):
            params: dict[str, Any] = {"messages": messages}
            if strategies is not None:
                params["strategies"] = strategies
            reply = c.call("prepare_prompt", params)
            expected = scoutd.prepare(
                messages,
                strategies if strategies is not None else None,
                config=scoutd.Config(),
            )
            assert reply["result"]["messages"] == expected.messages
            assert reply["result"]["report"] == msgspec.to_builtins(expected.report)
        # the default list compacted something: the comparison is not vacuous
        assert reply["result"]["messages"] != messages


def test_per_call_config_overrides(daemon: Daemon) -> None:
    messages = conversation(120)
    with daemon.connect() as c:
        overrides = {"epoch_tool_call_threshold": 500, "prompt_strategies": EPOCHS}
        reply = c.call("prepare_prompt", {"messages": messages, "config": overrides})
        assert reply["result"]["messages"] == messages
        bad = c.call("prepare_prompt", {"messages": messages, "config": {"epoch_sise": 3}})
        assert bad["error"]["code"] == protocol.INVALID_PARAMS
        assert "epoch_sise" in bad["error"]["message"]
        bad = c.call("prepare_prompt", {"messages": messages, "config": {"epoch_size": -1}})
        assert bad["error"]["code"] == protocol.INVALID_PARAMS
        assert "epoch_size" in bad["error"]["message"]


def test_bad_frames_get_errors_and_the_connection_goes_on(daemon: Daemon) -> None:
    with daemon.connect() as c:
        c.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        assert c.recv()["error"]["code"] == protocol.PARSE_ERROR
        c.send_raw(b"\xff\xfe\n")
        assert c.recv()["error"]["code"] == protocol.PARSE_ERROR
        c.send_raw(b'[{"jsonrpc": "2.0", "id": 2, "method": "status"}]\n')
        reply = c.recv()
        assert reply["id"] is None and reply["error"]["code"] == protocol.INVALID_REQUEST
        c.send_raw(b'{"jsonrpc": "2.0", "id": true, "method": "status"}\n')
        assert c.recv()["error"]["code"] == protocol.INVALID_REQUEST
        c.send_raw(b'{"jsonrpc": "1.0", "id": 3, "method": "status"}\n')
        reply = c.recv()
        assert reply["id"] == 3 and reply["error"]["code"] == protocol.INVALID_REQUEST
        reply = c.call("no.such.method")
        assert reply["error"]["code"] == protocol.METHOD_NOT_FOUND
        # a notification (no id) is executed and never answered, even when it fails
        c.send({"jsonrpc": "2.0", "method": "no.such.method"})
        c.send({"jsonrpc": "2.0", "method": "status"})
        reply = c.call("status")
        assert "result" in reply
        counts = reply["result"]["counts"]
        assert counts["errors"] >= 5 and counts["requests"] >= 8


def test_invalid_utf8_is_a_parse_error(daemon: Daemon) -> None:
    with daemon.connect() as c:
        c.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "st\xffatus"}\n')
        assert c.recv()["error"]["code"] == protocol.PARSE_ERROR
        assert "result" in c.call("status")


def test_wrong_param_types_name_the_field(daemon: Daemon) -> None:
    with daemon.connect() as c:
        reply = c.call("prepare_prompt", {"messages": [{"role": "user"}, 7]})
        error = reply["error"]
        assert error["code"] == protocol.INVALID_PARAMS
        assert error["data"]["path"] == "$.params.messages[1]"
        assert "$.params.messages[1]" in error["message"]
        reply = c.call("prepare_prompt", {"messages": [], "strategies": 5})
        assert reply["error"]["data"]["path"] == "$.params.strategies"
        reply = c.call("prepare_prompt", {"messages": [], "bogus": 1})
        assert reply["error"]["code"] == protocol.INVALID_PARAMS
        assert "bogus" in reply["error"]["message"]
        reply = c.call("prepare_prompt", {})
        assert reply["error"]["code"] == protocol.INVALID_PARAMS
        assert "messages" in reply["error"]["message"]
        reply = c.call("session.open", {"save_file": "/x", "pid": 0})
        assert reply["error"]["code"] == protocol.INVALID_PARAMS
        reply = c.call("status", [1, 2])
        assert reply["error"]["code"] == protocol.INVALID_PARAMS
        # A large request (decoded in one pass when valid) still names the bad field.
        big = [{"role": "user", "content": "x" * 1000}] * 400
        reply = c.call("prepare_prompt", {"messages": [*big, 7]})
        assert reply["error"]["data"]["path"] == "$.params.messages[400]"
        reply = c.call("prepare_prompt", {"messages": [], "strategies": ["nope"]})
        assert reply["error"]["code"] == protocol.UNKNOWN_STRATEGY
        assert reply["error"]["data"]["name"] == "nope"
        assert "shorten_tools" in reply["error"]["data"]["available"]


def test_oversized_line_is_refused_and_serving_goes_on() -> None:
    limit = 64 * 1024
    with (
        InProcessDaemon(daemon={"max_request_bytes": limit}) as d,
        d.connect() as c,
        d.connect() as other,
    ):
        big = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "prepare_prompt",
                "params": {"messages": [{"role": "user", "content": "x" * (3 * limit)}]},
            }
        ).encode()
        sender = threading.Thread(target=c.send_raw, args=(big + b"\n",))
        sender.start()
        reply = c.recv()
        assert reply == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": protocol.TOO_LARGE,
                "message": f"request line longer than max_request_bytes ({limit})",
                "data": {"limit": limit, "key": "max_request_bytes"},
            },
        }
        sender.join(10)
        assert "result" in other.call("status")  # another client is served meanwhile
        # the rest of the big line was discarded: the same connection still works
        reply = c.call("prepare_prompt", {"messages": [{"role": "user", "content": "hi"}]})
        assert reply["result"]["messages"] == [{"role": "user", "content": "hi"}]
        assert reply["id"] == 1


def test_a_half_sent_line_is_cut_after_read_timeout(daemon: Daemon) -> None:
    with daemon.connect() as c, daemon.connect() as other:
        started = time.monotonic()
        c.send_raw(b'{"jsonrpc": "2.0", "id": 1, "met')
        reply = c.recv(timeout=10)
        assert reply["error"]["code"] == protocol.INVALID_REQUEST
        assert "read timeout" in reply["error"]["message"]
        assert c.read_line(timeout=10) == b""  # then the daemon closes the connection
        assert time.monotonic() - started >= 0.9  # not before the read timeout
        assert "result" in other.call("status")


def test_idle_connections_are_closed() -> None:
    with InProcessDaemon(daemon={"idle_timeout": 0.5}) as d, d.connect() as c:
        assert "result" in c.call("status")
        assert c.read_line(timeout=10) == b""


def test_concurrent_requests_on_one_connection_are_answered_by_id() -> None:
    with gated_daemon() as d, d.connect() as c:
        slow = c.request("prepare_prompt", {"messages": [], "strategies": ["gate"]})
        wait_for(lambda: os.path.exists(os.path.join(d.dir, "gate.started")), 10, "the gate")
        ids = [c.request("status") for _ in range(5)]
        ids.append(c.request("prepare_prompt", {"messages": conversation(30)}, id="text-id"))
        # the fast ones come back while the slow one still waits
        for rid in ids:
            assert "result" in c.response(rid)
        assert slow not in c.responses
        release(d)
        assert c.response(slow)["result"]["messages"] == []


def test_a_slow_request_does_not_stall_other_clients() -> None:
    with gated_daemon() as d, d.connect() as a, d.connect() as b:
        big = conversation(2000, output_size=2000)
        slow = a.request("prepare_prompt", {"messages": big, "strategies": "gate,shorten_tools"})
        wait_for(lambda: os.path.exists(os.path.join(d.dir, "gate.started")), 10, "the gate")
        # answered while the slow request is still held at the gate (how fast is
        # a matter for scripts/bench)
        reply = b.call("prepare_prompt", {"messages": conversation(10)}, timeout=10)
        assert "result" in reply
        release(d)
        reply = a.response(slow, timeout=60)
        assert len(reply["result"]["messages"]) < len(big) + 1


def test_sigterm_lets_the_request_in_flight_finish() -> None:
    d = gated_daemon(daemon={"shutdown_timeout": 20})
    with d, d.connect() as c, d.connect() as idle:
        slow = c.request(
            "prepare_prompt",
            {"messages": [{"role": "user", "content": "x"}], "strategies": ["gate"]},
        )
        wait_for(lambda: os.path.exists(os.path.join(d.dir, "gate.started")), 10, "the gate")
        d.signal(signal.SIGTERM)
        # new requests on open connections are refused while the old one runs
        reply = wait_for(lambda: _shutting_down(idle), 10, "SHUTTING_DOWN")
        assert reply["error"]["code"] == protocol.SHUTTING_DOWN
        assert d.proc is not None and d.proc.poll() is None
        release(d)
        assert c.response(slow, timeout=10)["result"]["messages"] == [
            {"role": "user", "content": "x"}
        ]
        assert d.wait(15) == 0
        assert not os.path.exists(d.socket_path)
        # waited for: the requests refused meanwhile did not end the wait early
        assert "shutting down" in d.log() and "abandoned" not in d.log()


def _shutting_down(c: LineClient) -> dict[str, Any] | None:
    reply = c.call("status")
    return reply if "error" in reply else None


def test_a_stale_socket_file_is_replaced_and_a_live_one_refused() -> None:
    d = Daemon()
    try:
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(d.socket_path)
        stale.close()  # the file stays, nobody listens: a stale socket
        with d:
            with d.connect() as c:
                assert "result" in c.call("status")
            second = subprocess.run(
                [sys.executable, "-m", "scoutd", "serve", "--config", d.config_path],
                capture_output=True,
                text=True,
                timeout=30,
                cwd=d.dir,
            )
            assert second.returncode == 1
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1 and "already serving" in lines[0]
            with d.connect() as c:
                assert "result" in c.call("status")  # the first one is unharmed
            assert d.stop() == 0
            assert not os.path.exists(d.socket_path)
    finally:
        d.cleanup()


def test_startup_errors_are_one_clear_line() -> None:
    d = Daemon()
    try:
        with open(d.socket_path, "w") as handle:
            handle.write("not a socket")
        for argv, needle in (
            (["--socket", d.socket_path], "not a socket"),
            (["--socket", os.path.join(d.dir, "missing", "s.sock")], "does not exist"),
        ):
            run = subprocess.run(
                [sys.executable, "-m", "scoutd", "serve", "--config", d.config_path, *argv],
                capture_output=True,
                text=True,
                timeout=30,
                cwd=d.dir,
            )
            assert run.returncode == 1
            assert needle in run.stderr and len(run.stderr.strip().splitlines()) == 1
        with open(d.config_path, "a") as handle:
            handle.write("\n[prompt]\nepoch_sise = 3\n")
        run = subprocess.run(
            [sys.executable, "-m", "scoutd", "serve", "--config", d.config_path],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=d.dir,
        )
        assert run.returncode == 1 and "epoch_sise" in run.stderr
        with open(d.socket_path) as handle:
            assert handle.read() == "not a socket"  # never replaced
    finally:
        d.cleanup()


def test_socket_mode_is_applied() -> None:
    with InProcessDaemon(daemon={"socket_mode": 0o600}) as d:
        assert os.stat(d.socket_path).st_mode & 0o777 == 0o600
    with InProcessDaemon(daemon={"socket_mode": 0o666}) as d:
        assert os.stat(d.socket_path).st_mode & 0o777 == 0o666


def test_max_connections_refuses_the_extra_one() -> None:
    with InProcessDaemon(daemon={"max_connections": 2}) as d, d.connect() as a, d.connect() as b:
        assert "result" in a.call("status") and "result" in b.call("status")
        with d.connect() as extra:
            reply = extra.recv()
            assert reply["error"]["code"] == protocol.TOO_LARGE
            assert reply["error"]["data"] == {"limit": 2, "key": "max_connections"}
            assert extra.read_line() == b""
        b.close()
        wait_for(lambda: _connections(a) == 1, 10, "the closed connection to be counted")
        with d.connect() as again:
            assert "result" in again.call("status")


def _connections(c: LineClient) -> int:
    return int(c.call("status")["result"]["counts"]["connections"])


def test_status_reports_counts_and_latency(daemon: Daemon) -> None:
    with daemon.connect() as c:
        for _ in range(3):
            c.call("prepare_prompt", {"messages": conversation(5)})
        result = c.call("status")["result"]
        assert result["version"] == scoutd.__version__
        assert result["uptime"] > 0
        assert result["config"] == {
            "path": daemon.config_path,
            "generation": 1,
            "last_reload_error": None,
        }
        with daemon.connect() as other:
            assert "result" in other.call("status")
            # exactly the two open ones (an earlier test's closed one may take a moment)
            wait_for(lambda: _connections(c) == 2, 10, "two open connections")
        wait_for(lambda: _connections(c) == 1, 10, "the closed connection to be counted")
        assert result["latency"]["count"] >= 3  # the prepares answered before this status
        assert 0 < result["latency"]["p50_ms"] <= result["latency"]["max_ms"]


def test_socat_session_from_the_protocol_doc(daemon: Daemon) -> None:
    """The one-liner of docs/PROTOCOL.md works as written."""
    socat = subprocess.run(["sh", "-c", "command -v socat"], capture_output=True, text=True)
    if socat.returncode != 0:  # a skip would hide a failure (README, "Set up")
        pytest.fail("socat is not installed: apt-get install socat")
    run = subprocess.run(
        ["socat", "-", f"UNIX-CONNECT:{daemon.socket_path}"],
        input=b'{"jsonrpc":"2.0","id":1,"method":"status"}\n',
        capture_output=True,
        timeout=30,
    )
    reply = json.loads(run.stdout)
    assert reply["id"] == 1 and reply["result"]["config"]["generation"] == 1


def _config_status(c: LineClient) -> dict[str, Any]:
    config: dict[str, Any] = c.call("status")["result"]["config"]
    return config


def test_config_file_edits_are_reloaded() -> None:
    """A rewrite-and-rename of the config file changes the next call's thresholds."""
    messages = conversation(120)
    first = {"epoch_tool_call_threshold": 500, "prompt_strategies": EPOCHS}
    with InProcessDaemon(prompt=first) as d, d.connect() as c:
        assert c.call("prepare_prompt", {"messages": messages})["result"]["messages"] == messages
        d.prompt = {"epoch_tool_call_threshold": 50, "prompt_strategies": EPOCHS}
        d.write_config()
        wait_for(lambda: _config_status(c)["generation"] == 2, 10, "the reload")
        reply = c.call("prepare_prompt", {"messages": messages})
        report = reply["result"]["report"][0]
        assert report["strategy"] == "shorten_tools_epoch_increment"
        assert report["outputs_truncated"] + report["outputs_dropped"] > 0
        assert reply["result"]["messages"] != messages

        # an invalid edit: the last good config stays in force, the error is reported
        d.write_config("[prompt]\nepoch_sise = 3\n")
        status = wait_for(
            lambda: (s := _config_status(c))["last_reload_error"] and s, 10, "the failed reload"
        )
        assert status["generation"] == 2 and "epoch_sise" in status["last_reload_error"]
        again = c.call("prepare_prompt", {"messages": messages})
        assert again["result"] == reply["result"]
        failed = c.call("config.reload")
        assert failed["error"]["code"] == protocol.CONFIG_INVALID
        assert "epoch_sise" in failed["error"]["data"]["error"]

        # prompt_strategies from the file replace the default list
        d.prompt = {"prompt_strategies": "none"}
        d.write_config()
        wait_for(lambda: _config_status(c)["generation"] == 3, 10, "the second reload")
        assert _config_status(c)["last_reload_error"] is None
        assert c.call("prepare_prompt", {"messages": messages})["result"]["messages"] == messages
        assert c.call("config.reload")["result"] == {"generation": 4}


def test_sighup_reloads() -> None:
    with Daemon() as d, d.connect() as c:
        d.signal(signal.SIGHUP)
        wait_for(lambda: _config_status(c)["generation"] == 2, 10, "the SIGHUP reload")
        d.signal(signal.SIGHUP)
        wait_for(lambda: _config_status(c)["generation"] == 3, 10, "the second SIGHUP reload")
        assert "configuration reloaded" in d.log()


def test_running_out_of_file_descriptors_does_not_stop_accepting() -> None:
    """With RLIMIT_NOFILE tiny, accept() fails with EMFILE; the loop waits and goes on."""
    d = Daemon(argv_prefix=["sh", "-c", 'ulimit -n 48 && exec "$@"', "sh"])
    with d:
        clients: list[socket.socket] = []
        try:
            for _ in range(70):  # more than the daemon can hold: the backlog keeps the rest
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(10)
                sock.connect(d.socket_path)
                clients.append(sock)
            wait_for(lambda: "accept failed" in d.log(), 10, "the accept loop to hit EMFILE")
        finally:
            for sock in clients:
                sock.close()
        with d.connect() as c:  # once descriptors are free again, new clients are served
            assert "result" in c.call("status", timeout=15)
        assert d.proc is not None and d.proc.poll() is None


def test_socket_group_is_applied() -> None:
    import grp

    try:
        group = grp.getgrgid(65534)
    except KeyError:
        pytest.skip("no group with gid 65534 on this machine")
    with Daemon(daemon={"socket_group": group.gr_name}) as d:
        assert os.stat(d.socket_path).st_gid == group.gr_gid
