"""Sessions and the abort push, against a real daemon and real inbox files.

Each abort is dropped with ``write_abort`` (a rename into the inbox, as the CLI
does); the test then waits, bounded, for the ``session.aborted`` notification.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd import protocol
from scoutd.inbox.aborted import clear
from scoutd.strategies.inbox import (
    inbox_dir,
    inbox_removed_dir,
    write_abort,
    write_notice,
)
from tests.support.daemon import Daemon, InProcessDaemon, LineClient, wait_for

PUSH_TIMEOUT = 5.0
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(params=["native", "poll"])
def daemon(request: pytest.FixtureRequest) -> Iterator[Daemon]:
    with InProcessDaemon(daemon={"watch_mode": request.param}) as d:
        yield d


def open_session(c: LineClient, save_file: str, **extra: Any) -> str:
    reply = c.call("session.open", {"save_file": save_file, **extra})
    assert "result" in reply, reply
    return str(reply["result"]["session"])


def removed_aborts(save_file: str) -> list[str]:
    removed = inbox_removed_dir(save_file)
    if not os.path.isdir(removed):
        return []
    return sorted(name for name in os.listdir(removed) if name.startswith("abort"))


def status_counts(c: LineClient) -> dict[str, int]:
    counts: dict[str, int] = c.call("status")["result"]["counts"]
    return counts


def test_abort_is_pushed_and_fails_the_next_prepare(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "agent.chat")
    os.makedirs(inbox_dir(save_file))
    with daemon.connect() as c:
        session = open_session(c, save_file)
        assert "result" in c.call("prepare_prompt", {"messages": HELLO, "session": session})
        write_abort(save_file, "  operator says stop \n")
        note = c.notification("session.aborted", PUSH_TIMEOUT)
        assert note == {
            "jsonrpc": "2.0",
            "method": "session.aborted",
            "params": {"session": session, "save_file": save_file, "reason": "operator says stop"},
        }
        assert not os.path.exists(os.path.join(inbox_dir(save_file), "abort"))
        assert removed_aborts(save_file) == ["abort"]
        for _ in range(2):  # an aborted session stays aborted
            reply = c.call("prepare_prompt", {"messages": HELLO, "session": session})
            assert reply["error"]["code"] == protocol.ABORTED
            assert reply["error"]["data"] == {
                "reason": "operator says stop",
                "save_file": save_file,
                "session": session,
            }
        # calls for that save file without a session fail too: the chat stays aborted
        for _ in range(2):
            reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
            assert reply["error"]["code"] == protocol.ABORTED
            assert reply["error"]["data"]["session"] is None
        clear(save_file)  # until an operator clears it
        reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
        assert reply["result"]["messages"] == HELLO
        counts = status_counts(c)
        assert counts["aborts"] == 1 and counts["sessions"] == 1 and counts["watches"] == 1
        assert c.call("session.close", {"session": session})["result"] == {}
        assert status_counts(c)["sessions"] == 0


def test_inbox_created_after_session_open(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "late.chat")
    with daemon.connect() as c:
        session = open_session(c, save_file)
        assert not os.path.exists(inbox_dir(save_file))  # the daemon never creates it
        write_abort(save_file, "late")  # creates the inbox, then renames the abort into it
        note = c.notification("session.aborted", PUSH_TIMEOUT)
        assert note["params"] == {"session": session, "save_file": save_file, "reason": "late"}
        assert removed_aborts(save_file) == ["abort"]


def test_inbox_deleted_and_recreated(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "again.chat")
    os.makedirs(inbox_dir(save_file))
    with daemon.connect() as c:
        session = open_session(c, save_file)
        shutil.rmtree(inbox_dir(save_file))
        os.makedirs(inbox_dir(save_file))
        write_notice(save_file, "not an abort")  # an ordinary file is left for the strategy
        write_abort(save_file, "after re-creation")
        note = c.notification("session.aborted", PUSH_TIMEOUT)
        assert note["params"]["reason"] == "after re-creation"
        assert note["params"]["session"] == session
        assert len(os.listdir(inbox_dir(save_file))) == 1  # the notice is still there
        assert removed_aborts(save_file) == ["abort"]


def test_one_abort_reaches_every_session_and_is_consumed_once(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "shared.chat")
    os.makedirs(inbox_dir(save_file))
    with daemon.connect() as a, daemon.connect() as b:
        sessions = [open_session(a, save_file), open_session(a, save_file)]
        sessions.append(open_session(b, save_file))
        write_abort(save_file, "everyone")
        got = {a.notification("session.aborted", PUSH_TIMEOUT)["params"]["session"]}
        got.add(a.notification("session.aborted", PUSH_TIMEOUT)["params"]["session"])
        got.add(b.notification("session.aborted", PUSH_TIMEOUT)["params"]["session"])
        assert got == set(sessions)
        assert removed_aborts(save_file) == ["abort"]
        assert status_counts(a)["aborts"] == 1
        # a second abort later is a second, separate claim
        write_abort(save_file, "twice")
        assert b.notification("session.aborted", PUSH_TIMEOUT)["params"]["reason"] == "twice"
        assert removed_aborts(save_file) == ["abort", "abort.1"]


def test_an_abort_waiting_before_open_is_claimed(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "early.chat")
    write_abort(save_file, "")
    with daemon.connect() as c:
        session = open_session(c, save_file)
        note = c.notification("session.aborted", PUSH_TIMEOUT)
        assert note["params"]["session"] == session
        assert note["params"]["reason"]  # a blank abort still gets a reason naming the file


def test_prepare_without_session_consumes_the_abort_itself(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "plain.chat")
    write_notice(save_file, "first a notice")
    write_abort(save_file, "inline")
    with daemon.connect() as c:
        reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
        assert reply["error"]["code"] == protocol.ABORTED
        assert reply["error"]["data"] == {
            "reason": "inline",
            "save_file": save_file,
            "session": None,
        }
        assert removed_aborts(save_file) == ["abort"]
        write_notice(save_file, "a notice")
        reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
        assert reply["error"]["data"]["reason"] == "inline"  # the chat stays aborted
        clear(save_file)
        reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
        assert reply["result"]["messages"][-1] == {"role": "user", "content": "a notice"}
        counts = status_counts(c)
        assert counts["aborts"] == 1 and counts["notices_delivered"] >= 1


def test_closing_the_connection_closes_its_sessions(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "gone.chat")
    with daemon.connect() as observer:
        with daemon.connect() as c:
            session = open_session(c, save_file)
            counts = status_counts(observer)
            assert counts["sessions"] == 1 and counts["watches"] == 1
        wait_for(lambda: status_counts(observer)["sessions"] == 0, 10, "sessions to close")
        assert status_counts(observer)["watches"] == 0
        reply = observer.call("session.close", {"session": session})
        assert reply["error"]["code"] == protocol.UNKNOWN_SESSION
        reply = observer.call("prepare_prompt", {"messages": HELLO, "session": "nope"})
        assert reply["error"]["code"] == protocol.UNKNOWN_SESSION


def test_session_and_save_file_must_agree(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "one.chat")
    with daemon.connect() as c:
        session = open_session(c, save_file)
        other = os.path.join(daemon.dir, "two.chat")
        reply = c.call(
            "prepare_prompt", {"messages": HELLO, "session": session, "save_file": other}
        )
        assert reply["error"]["code"] == protocol.INVALID_PARAMS
        reply = c.call(
            "prepare_prompt", {"messages": HELLO, "session": session, "save_file": save_file}
        )
        assert reply["result"]["messages"] == HELLO


def test_abort_signal_reaches_the_registered_pid() -> None:
    with Daemon(daemon={"abort_signal": "TERM"}) as d:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL
        )
        try:
            save_file = os.path.join(d.dir, "signal.chat")
            with d.connect() as c:
                open_session(c, save_file, pid=child.pid)
                write_abort(save_file, "stop the agent")
                c.notification("session.aborted", PUSH_TIMEOUT)
                assert child.wait(PUSH_TIMEOUT) == -signal.SIGTERM
        finally:
            child.kill()
            child.wait(10)


def test_the_client_library_sees_the_abort(daemon: Daemon) -> None:
    """The same push through scoutd.Client: wait_aborted wakes, the next call raises."""
    from scoutd.client import Client
    from scoutd.errors import Aborted

    save_file = os.path.join(daemon.dir, "client.chat")
    messages = [{"role": "user", "content": "hi"}]
    with Client(daemon.socket_path, timeout=10) as client:
        assert client.prepare_prompt(messages, "none") == messages
        with client.session(save_file) as session:
            assert client.status()["counts"]["sessions"] == 1
            write_abort(save_file, "client stop")
            assert session.wait_aborted(PUSH_TIMEOUT)
            assert session.reason == "client stop"
            with pytest.raises(Aborted, match="client stop"):
                client.prepare_prompt(messages, session=session)
