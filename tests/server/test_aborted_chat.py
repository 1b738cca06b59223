"""An aborted chat stays aborted in the daemon too: new sessions, session-less calls, restarts.

The daemon's watcher consumes the abort and marks the chat (its durable
marker, :mod:`scoutd.inbox.aborted`); a session opened later on that chat is
aborted at once (``session.aborted`` arrives before the open's answer), a
call without a session fails, and a daemon started afresh finds the marker
on disk. ``scoutd.inbox.aborted.clear`` (``scoutd clear``) lifts it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from scoutd import protocol
from scoutd.inbox import write_abort
from scoutd.inbox.aborted import clear, held, mark, marker_paths
from scoutd.server import sessions as sessions_module
from scoutd.server.claims import marked as real_marked
from tests.support.daemon import Daemon, InProcessDaemon, LineClient, wait_for

PUSH_TIMEOUT = 10.0
HELLO = [{"role": "user", "content": "hello"}]


def open_session(c: LineClient, save_file: str) -> str:
    reply = c.call("session.open", {"save_file": save_file})
    assert "result" in reply, reply
    return str(reply["result"]["session"])


def refused(c: LineClient, params: dict[str, Any]) -> dict[str, Any]:
    reply = c.call("prepare_prompt", {"messages": HELLO, **params})
    assert reply.get("error", {}).get("code") == protocol.ABORTED, reply
    data: dict[str, Any] = reply["error"]["data"]
    return data


def test_the_watchers_abort_outlives_its_session(tmp_path: Any) -> None:
    with InProcessDaemon() as daemon, daemon.connect() as c:
        save_file = os.path.join(daemon.dir, "agent.chat")
        first = open_session(c, save_file)
        write_abort(save_file, "runaway loop")
        note = c.notification("session.aborted", PUSH_TIMEOUT)
        assert note["params"]["session"] == first
        assert held(save_file) == "runaway loop"  # the daemon marked the chat
        assert c.call("session.close", {"session": first})["result"] == {}
        # a new run of that chat: aborted at once, before any inference
        second = open_session(c, save_file)
        pushed = c.notification("session.aborted", PUSH_TIMEOUT)
        assert pushed["params"] == {
            "session": second,
            "save_file": save_file,
            "reason": "runaway loop",
        }
        for _ in range(2):
            assert refused(c, {"session": second})["reason"] == "runaway loop"
            assert refused(c, {"save_file": save_file})["reason"] == "runaway loop"
        counts = c.call("status")["result"]["counts"]
        assert counts["aborts"] == 1  # one abort file consumed, however often refused
        clear(save_file)
        third = open_session(c, save_file)
        reply = c.call("prepare_prompt", {"messages": HELLO, "session": third})
        assert reply["result"]["messages"] == HELLO
        reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
        assert reply["result"]["messages"] == HELLO


def test_a_daemon_started_afresh_finds_the_chat_aborted() -> None:
    with Daemon() as first, first.connect() as c:
        save_file = os.path.join(first.dir, "agent.chat")
        session = open_session(c, save_file)
        write_abort(save_file, "stop for the night")
        c.notification("session.aborted", PUSH_TIMEOUT)
        first.stop()
        first.start()
        with first.connect() as again:
            session = open_session(again, save_file)
            data = refused(again, {"session": session})
            assert data == {
                "reason": "stop for the night",
                "save_file": save_file,
                "session": session,
            }


def test_a_chat_marked_by_the_library_is_aborted_in_the_daemon() -> None:
    with InProcessDaemon() as daemon, daemon.connect() as c:
        save_file = os.path.join(daemon.dir, "agent.chat")
        assert mark(save_file, "from the agent's own process") == marker_paths(save_file)[0]
        session = open_session(c, save_file)
        assert c.notification("session.aborted", PUSH_TIMEOUT)["params"]["session"] == session
        assert refused(c, {"session": session})["reason"] == "from the agent's own process"


def test_a_clear_lifts_the_abort_the_watcher_kept_for_session_less_calls() -> None:
    """While the chat is marked, a session-less call gets the abort the watcher took
    (the newest), then the marker's first reason. Cleared before such a call came, the
    next one is served, not refused once more; the session stays aborted for its life."""
    with Daemon() as daemon, daemon.connect() as c:
        save_file = os.path.join(daemon.dir, "agent.chat")
        mark(save_file, "first")
        session = open_session(c, save_file)
        c.notification("session.aborted", PUSH_TIMEOUT)  # aborted at open, by the marker

        def claimed(count: int) -> bool:
            return bool(c.call("status")["result"]["counts"]["aborts"] == count)

        write_abort(save_file, "second")
        wait_for(lambda: claimed(1), PUSH_TIMEOUT, "the watcher's claim")
        assert refused(c, {"save_file": save_file})["reason"] == "second"
        assert refused(c, {"save_file": save_file})["reason"] == "first"
        write_abort(save_file, "third")
        wait_for(lambda: claimed(2), PUSH_TIMEOUT, "the watcher's claim")
        assert clear(save_file).still is None
        reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
        assert reply.get("result", {}).get("messages") == HELLO, reply
        assert refused(c, {"session": session})["reason"] == "third"  # the last pushed to it


def test_a_session_opened_while_its_claim_moves_the_abort_is_told_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The open spawns a claim and reads the chat's marker meanwhile; the claim writes
    the marker before it moves the abort away. An open that read the marker in between
    pushed ``session.aborted`` for it, and the claim pushed the same abort again at its
    end (1 in 10 opens alone, 1 in 3 under load). Here the open reads the marker after
    the claim wrote it and before it moves the abort: that interleaving, every time."""
    moving, looked = threading.Event(), threading.Event()
    real_rename = os.rename

    def marked(resolved: str) -> str | None:
        moving.wait(5.0)  # the open looks once the claim has marked the chat
        try:
            return real_marked(resolved)
        finally:
            looked.set()

    def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if src == "abort":  # the claim's move, its marker written: the open looks now
            moving.set()
            looked.wait(5.0)
        real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr("scoutd.server.sessions.marked", marked)
    monkeypatch.setattr(os, "rename", rename)
    with InProcessDaemon(daemon={"rescan_interval": 60.0}) as daemon, daemon.connect() as c:
        save_file = os.path.join(daemon.dir, "agent.chat")
        write_abort(save_file, "stop once")
        session = open_session(c, save_file)
        wait_for(lambda: "abort consumed" in daemon.log(), PUSH_TIMEOUT, "the claim to end")
        counts = c.call("status")["result"]["counts"]  # a round trip: every push has come
        pushed = [n["params"] for n in c.notifications if n["method"] == "session.aborted"]
        assert pushed == [{"session": session, "save_file": save_file, "reason": "stop once"}]
        assert counts["aborts"] == 1


def test_a_session_opened_while_a_claim_runs_gets_the_abort_it_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A claim looks at the sessions open when it starts. A session opened while it
    ran, before it wrote the chat's marker, read no marker and was not among those
    the claim pushed to: the abort was consumed and that session never heard of it
    (1 of 3 sessions, once in a full loaded run). Here the first open's claim waits
    until the second session is open and the abort written: that interleaving,
    every time."""
    opened = threading.Event()
    real_claim_for = sessions_module.claim_for

    def claim_for(*args: Any, **kwargs: Any) -> Any:
        opened.wait(5.0)
        return real_claim_for(*args, **kwargs)

    monkeypatch.setattr(sessions_module, "claim_for", claim_for)
    with InProcessDaemon(daemon={"rescan_interval": 60.0}) as daemon, daemon.connect() as c:
        save_file = os.path.join(daemon.dir, "agent.chat")
        os.makedirs(os.path.dirname(save_file), exist_ok=True)
        first = open_session(c, save_file)
        second = open_session(c, save_file)
        write_abort(save_file, "both of you")
        opened.set()
        wait_for(lambda: "abort consumed" in daemon.log(), PUSH_TIMEOUT, "the claim to end")
        counts = c.call("status")["result"]["counts"]  # a round trip: every push has come
        pushed = sorted(
            n["params"]["session"] for n in c.notifications if n["method"] == "session.aborted"
        )
        assert pushed == sorted([first, second])
        assert counts["aborts"] == 1
        assert held(save_file) == "both of you"
