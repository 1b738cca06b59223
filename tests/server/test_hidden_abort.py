"""An agent cannot hide from an operator's abort by locking its own inbox.

The agent (uid 65534, a stdlib-only client run with ``setpriv``) owns its
chat directory and inbox and opens a session on the daemon (root). It then
takes its own rights away (``chmod 0070``: the owner bits win, the group bits
never apply to the owner), so that it could not take an abort itself. The
daemon used to leave the operator's abort "for its owner" and do nothing:
no ``session.aborted``, no ``abort_signal``, the agent's calls merely
``-32003``. A directory's owner can give itself its rights back at any
time, so the abort is its own all the same: the daemon still never takes it
for that user (it stays in place, unread: docs/RELIABILITY.md rule 3), but
the session fails closed, with a generic reason.

Another user's directory that keeps a session out is not the session's doing;
that case, the abort left for its owner, is tests/reliability/test_abort_reach.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from scoutd import protocol
from scoutd.inbox import inbox_dir, inbox_removed_dir, write_abort
from tests.reliability.harness import AGENT, NOBODY, unprivileged_python
from tests.support.daemon import Daemon, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")

PUSH = 10.0
SLOW_RESCAN = 60.0  # never reached here: pushes come from file events


class Agent:
    """The agent's process and its session (see :data:`AGENT`)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.session: str = json.loads(proc.stdout.readline())
        self.pushed: list[str] = []  # every session.aborted reason seen so far

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One call of the agent's; the pushes before its answer go to :attr:`pushed`."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([method, params]) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        self.pushed.extend(reply["pushed"])
        answer: dict[str, Any] = reply["answer"]
        return answer

    def was_pushed(self) -> bool:
        self.call("status", {})
        return bool(self.pushed)


@contextmanager
def agent_session(d: Daemon, save_file: str) -> Iterator[Agent]:
    proc = unprivileged_python(AGENT, d.socket_path, save_file)
    try:
        yield Agent(proc)
    finally:
        proc.kill()
        proc.wait(PUSH)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def agents_daemon(**daemon: Any) -> Daemon:
    """A daemon (root) that lets uid 65534 in, its directory searchable by it."""
    d = Daemon(
        daemon={
            "allowed_uids": [0, NOBODY],
            "socket_mode": 0o666,
            "rescan_interval": SLOW_RESCAN,
            **daemon,
        }
    )
    os.chmod(d.dir, 0o755)
    return d


def agents_chat(d: Daemon) -> str:
    """The agent's chat: its own chat directory and inbox (mode 0755, uid 65534)."""
    chat = os.path.join(d.dir, "agent")
    save_file = os.path.join(chat, "agent.chat")
    os.makedirs(inbox_dir(save_file))
    for directory in (chat, inbox_dir(save_file)):
        os.chown(directory, NOBODY, NOBODY)
        os.chmod(directory, 0o755)
    return save_file


LOCKED = {"inbox": inbox_dir, "chat directory": os.path.dirname}


@pytest.mark.parametrize("locked", sorted(LOCKED))
def test_an_agent_that_locks_its_own_inbox_is_aborted_all_the_same(locked: str) -> None:
    """Aborted unconsumed with a generic reason; the abort stays in place, unread."""
    with agents_daemon() as d, d.connect() as c:
        save_file = agents_chat(d)
        with agent_session(d, save_file) as agent:
            os.chmod(LOCKED[locked](save_file), 0o070)  # what the agent does
            write_abort(save_file, "stop, agent")  # the operator (root)
            wait_for(agent.was_pushed, PUSH, "session.aborted for the agent")
            [reason] = agent.pushed
            assert "made unusable for itself" in reason and "stop, agent" not in reason
            reply = agent.call("prepare_prompt", {"messages": [], "session": agent.session})
            assert reply["error"]["code"] == protocol.ABORTED  # was -32003, forbidden
            assert reply["error"]["data"]["reason"] == reason
            assert os.listdir(inbox_dir(save_file)) == ["abort"]  # not taken for it
            assert c.call("status")["result"]["counts"]["aborts"] == 0  # nothing consumed
            agent.call("status", {})
            assert agent.pushed == [reason]  # pushed once, however often claimed


def test_a_locked_inbox_does_not_dodge_abort_signal() -> None:
    """With ``abort_signal = "TERM"`` the agent is ended, 0755 or 0070 alike."""
    with agents_daemon(abort_signal="TERM") as d:
        save_file = agents_chat(d)
        with agent_session(d, save_file) as agent:
            os.chmod(inbox_dir(save_file), 0o070)
            write_abort(save_file, "stop, agent")
            assert agent.proc.wait(PUSH) == -signal.SIGTERM
        assert os.listdir(inbox_dir(save_file)) == ["abort"]


def test_the_abort_is_taken_for_those_who_may_and_the_locked_out_session_fails_closed() -> None:
    """A root session on the same chat gets the abort (consumed, read); the agent's
    session, locked out of its own inbox, the generic reason."""
    with agents_daemon() as d, d.connect() as c:
        save_file = agents_chat(d)
        mine = c.call("session.open", {"save_file": save_file})["result"]["session"]
        with agent_session(d, save_file) as agent:
            os.chmod(inbox_dir(save_file), 0o070)
            write_abort(save_file, "stop, both")
            note = c.notification("session.aborted", PUSH)
            assert note["params"]["session"] == mine and note["params"]["reason"] == "stop, both"
            wait_for(agent.was_pushed, PUSH, "session.aborted for the agent")
            assert len(agent.pushed) == 1 and "stop, both" not in agent.pushed[0]
        assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]  # taken once, for mine
