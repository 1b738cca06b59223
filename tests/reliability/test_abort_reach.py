"""An operator's abort reaches the agent it was meant for, and no other.

* A session opened by another uid used to receive the abort meant for an
  agent running in its own process, in a shared sticky directory: the daemon
  (root) took it with its own rights. A claim now takes an abort only for the
  sessions whose uid could take it itself (the access rights, the sticky bit)
  and pushes it only to them; otherwise it stays for its owner.
* An agent that swaps its chat directory for a symlink to another agent's
  used to make the daemon claim the other agent's abort for it. The daemon
  follows no symlink another user made on the way to an inbox: the swapped
  chat fails closed, the other agent's abort stays where it is.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from scoutd import Aborted, PromptConfig
from scoutd.strategies.inbox import inbox, inbox_dir, inbox_removed_dir, write_abort
from tests.reliability.harness import AGENT, NOBODY, unprivileged_python
from tests.support.daemon import Daemon, LineClient, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")

PUSH = 10.0


@contextmanager
def nobody_session(
    d: Daemon, save_file: str, prefix: list[str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    keeper = unprivileged_python(AGENT, d.socket_path, save_file, prefix=prefix)
    try:
        assert keeper.stdout is not None
        json.loads(keeper.stdout.readline())  # its session's id: open
        yield keeper
    finally:
        keeper.kill()
        keeper.wait(10)
        for stream in (keeper.stdin, keeper.stdout):
            if stream is not None:
                stream.close()


def pushed_to(keeper: subprocess.Popen[str]) -> list[str]:
    """The reasons pushed to the keeper's session so far (a round trip: nothing in flight)."""
    assert keeper.stdin is not None and keeper.stdout is not None
    keeper.stdin.write(json.dumps(["status", {}]) + "\n")
    keeper.stdin.flush()
    pushed: list[str] = json.loads(keeper.stdout.readline())["pushed"]
    return pushed


def wait_pushed(keeper: subprocess.Popen[str]) -> list[str]:
    """The reasons pushed to the keeper's session, once there is one (at most PUSH s)."""
    pushed: list[str] = []

    def arrived() -> bool:
        pushed.extend(pushed_to(keeper))
        return bool(pushed)

    wait_for(arrived, PUSH, "a push to the session")
    return pushed


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    d = Daemon(daemon={"allowed_uids": [0, NOBODY], "socket_mode": 0o666})
    os.chmod(d.dir, 0o755)
    with d:
        yield d


def shared_chat(d: Daemon) -> str:
    shared = os.path.join(d.dir, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)  # like /tmp
    return os.path.join(shared, "agent.chat")


def open_session(c: LineClient, save_file: str) -> str:
    session: str = c.call("session.open", {"save_file": save_file})["result"]["session"]
    return session


def test_another_uids_session_never_takes_my_abort(daemon: Daemon) -> None:
    """My agent runs in its own process; uid 65534 has a session on the same chat."""
    d = daemon
    save_file = shared_chat(d)
    with nobody_session(d, save_file) as keeper:
        write_abort(save_file, "meant for my agent")  # my inbox: 0755, mine
        wait_for(lambda: "left for its owner" in d.log(), PUSH, "the claim to pass it by")
        assert pushed_to(keeper) == []
        assert os.listdir(inbox_dir(save_file)) == ["abort"]  # not taken, not read
        with pytest.raises(Aborted, match="meant for my agent"):  # my agent is stopped
            inbox([], PromptConfig(), save_file=save_file)


@pytest.mark.parametrize("inbox_mode", [0o755, 0o1777])
def test_an_abort_is_pushed_only_to_sessions_that_may_take_it(
    daemon: Daemon, inbox_mode: int
) -> None:
    """A session of mine and one of uid 65534 on one chat: only mine is aborted.

    0o1777: uid 65534 may write the inbox, but the sticky bit keeps it from
    taking an entry it does not own, so the daemon does not take it for it.
    """
    d = daemon
    save_file = shared_chat(d)
    with d.connect() as c, nobody_session(d, save_file) as keeper:
        mine = open_session(c, save_file)
        # the inbox appears after the sessions opened (an open checks the same rights)
        os.mkdir(inbox_dir(save_file))
        os.chmod(inbox_dir(save_file), inbox_mode)
        write_abort(save_file, "stop")
        note = c.notification("session.aborted", PUSH)
        assert note["params"]["session"] == mine and note["params"]["reason"] == "stop"
        assert pushed_to(keeper) == []
    assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]  # taken once, for mine


def test_an_abort_is_pushed_to_another_uid_that_may_take_it(daemon: Daemon) -> None:
    """The same check lets uid 65534 have the abort of an inbox it owns."""
    d = daemon
    save_file = shared_chat(d)
    os.mkdir(inbox_dir(save_file))
    os.chown(inbox_dir(save_file), NOBODY, NOBODY)
    with nobody_session(d, save_file) as keeper:
        write_abort(save_file, "stop, nobody")
        assert wait_pushed(keeper) == ["stop, nobody"]


def test_a_chat_directory_swapped_for_a_symlink_fails_closed(daemon: Daemon) -> None:
    """The agent points its chat directory at another agent's: that agent's abort stays."""
    d = daemon
    agents = os.path.join(d.dir, "agents")
    a1, a2 = os.path.join(agents, "a1"), os.path.join(agents, "a2")
    for directory in (a1, a2):
        os.makedirs(directory)
    mine, theirs = os.path.join(a1, "agent.chat"), os.path.join(a2, "agent.chat")
    write_abort(theirs, "for a2 only")
    with d.connect() as c:
        session = open_session(c, mine)
        os.rename(a1, a1 + ".real")  # what the agent (uid 65534) does in its own tree
        # made aside and renamed in, so that it appears as the agent's: a symlink of
        # root's (the test's), even for an instant, is one the daemon may follow
        os.symlink(a2, a1 + ".new")
        os.lchown(a1 + ".new", NOBODY, NOBODY)
        os.rename(a1 + ".new", a1)
        note = c.notification("session.aborted", PUSH)
        assert note["params"]["session"] == session
        assert "symbolic link owned by uid 65534" in note["params"]["reason"]
        assert "for a2 only" not in note["params"]["reason"]
        os.unlink(a1)  # and swaps back: still aborted
        os.rename(a1 + ".real", a1)
        reply = c.call("prepare_prompt", {"messages": [], "session": session})
        assert reply["error"]["data"]["reason"] == note["params"]["reason"]
    assert os.listdir(inbox_dir(theirs)) == ["abort"]  # a2's abort: untouched, unread


def test_an_abort_left_for_its_owner_reaches_the_owners_session_opened_later() -> None:
    """At its open, not at the next rescan: an inbox already watched is claimed again."""
    with Daemon(
        daemon={"allowed_uids": [0, NOBODY], "socket_mode": 0o666, "rescan_interval": 60.0}
    ) as d:
        os.chmod(d.dir, 0o755)
        save_file = shared_chat(d)
        with nobody_session(d, save_file) as keeper, d.connect() as c:
            write_abort(save_file, "meant for my agent")  # my inbox: 0755, mine
            wait_for(lambda: "left for its owner" in d.log(), PUSH, "the claim to pass it by")
            mine = open_session(c, save_file)
            note = c.notification("session.aborted", PUSH)
            assert note["params"] == {
                "session": mine,
                "save_file": save_file,
                "reason": "meant for my agent",
            }
            # The push may come from the open itself, which saw the marker the claim
            # writes before it moves the abort away: the claim ends a moment later
            # (and would push to the sessions it took the abort for then).
            wait_for(lambda: "abort consumed" in d.log(), PUSH, "the claim to end")
            assert pushed_to(keeper) == []
        assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]


def test_an_abort_is_taken_for_a_session_by_the_groups_its_process_holds() -> None:
    """The claim judged a session by the user database's groups, not by those its
    process holds (``SO_PEERGROUPS``): a session of uid 65534 running with a group
    the database does not list (systemd's ``SupplementaryGroups=``) was passed by
    ("left for its owner") in that group's inbox it could empty itself."""
    gid = 4242
    with Daemon(
        daemon={"allowed_uids": [0, NOBODY], "socket_mode": 0o666, "rescan_interval": 60.0}
    ) as d:
        os.chmod(d.dir, 0o755)
        directory = os.path.join(d.dir, "group")
        os.mkdir(directory)
        save_file = os.path.join(directory, "g.chat")
        os.mkdir(inbox_dir(save_file))
        for path in (directory, inbox_dir(save_file)):
            os.chown(path, 0, gid)
            os.chmod(path, 0o770)
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={gid}"]
        with nobody_session(d, save_file, prefix=prefix) as keeper:
            write_abort(save_file, "stop, group")
            assert wait_pushed(keeper) == ["stop, group"]
