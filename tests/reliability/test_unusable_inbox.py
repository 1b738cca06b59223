"""An inbox that exists but cannot be used fails closed, with a session and without.

The agent writes in its own chat directory, so it can make its inbox unusable
to hide an abort an operator drops there (as root, who writes through any
mode): mode 000, no search bit, a symlink, a regular file, a FIFO, a symlink
loop on the way; in a deployment with its own daemon account an operator's
inbox of mode 0700 (umask 077) does the same by accident. The daemon used to
log "cannot list inbox" and serve the chat. Now every such inbox stops the
chat (``Aborted``, code -32001, and ``session.aborted`` pushed) until an
operator repairs it; an inbox that does not exist holds nothing and is served.

The daemon runs as uid 65534 on a tree it owns (root reads through any mode).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from scoutd import protocol
from scoutd.strategies.inbox import inbox_dir, inbox_removed_dir
from tests.reliability.harness import NOBODY, give_away, unprivileged_prefix
from tests.support.daemon import Daemon, LineClient

PUSH = 5.0
HELLO = [{"role": "user", "content": "hello"}]


def _mode(mode: int) -> Callable[[str], None]:
    def make(inbox: str) -> None:
        os.mkdir(inbox)
        with open(os.path.join(inbox, "abort"), "w") as handle:  # as root: through any mode
            handle.write("the operator's abort")
        os.chown(inbox, NOBODY, NOBODY)
        os.chmod(inbox, mode)

    return make


def _other_uid_0700(inbox: str) -> None:
    """An operator's inbox made with umask 077, owned by root: the daemon's uid is locked out."""
    os.mkdir(inbox, 0o700)
    with open(os.path.join(inbox, "abort"), "w") as handle:
        handle.write("the operator's abort")


def _symlink(inbox: str) -> None:
    elsewhere = inbox + ".elsewhere"
    os.mkdir(elsewhere)
    os.chown(elsewhere, NOBODY, NOBODY)
    os.symlink(elsewhere, inbox)
    os.lchown(inbox, NOBODY, NOBODY)


def _regular_file(inbox: str) -> None:
    with open(inbox, "w") as handle:
        handle.write("not a directory")
    os.chown(inbox, NOBODY, NOBODY)


def _fifo(inbox: str) -> None:
    os.mkfifo(inbox)
    os.chown(inbox, NOBODY, NOBODY)


BREAKS: dict[str, Callable[[str], None]] = {
    "mode-000": _mode(0o000),
    "no-search-bit": _mode(0o600),
    "no-read-bit": _mode(0o300),
    "root-0700": _other_uid_0700,
    "symlink": _symlink,
    "regular-file": _regular_file,
    "fifo": _fifo,
}


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    """A daemon that cannot read through file modes (uid 65534 when we are root)."""
    d = Daemon(
        daemon={"allowed_uids": [0, os.getuid(), NOBODY], "socket_mode": 0o666},
        argv_prefix=unprivileged_prefix(),
    )
    give_away(d.dir)
    try:
        with d:
            yield d
    finally:
        d.cleanup()


def chat(d: Daemon, name: str) -> str:
    directory = os.path.join(d.dir, name)
    os.mkdir(directory)
    os.chown(directory, NOBODY, NOBODY)
    return os.path.join(directory, "agent.chat")


def prepare(c: LineClient, **params: Any) -> dict[str, Any]:
    return c.call("prepare_prompt", {"messages": HELLO, **params})


def assert_fails_closed(reply: dict[str, Any], words: str = "cannot be used") -> str:
    assert reply.get("error", {}).get("code") == protocol.ABORTED, reply
    reason: str = reply["error"]["data"]["reason"]
    assert words in reason, reason
    return reason


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the daemon as uid 65534")
@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_an_inbox_that_cannot_be_used_stops_its_chat(daemon: Daemon, kind: str) -> None:
    d = daemon
    save_file = chat(d, kind)
    BREAKS[kind](inbox_dir(save_file))
    with d.connect() as c:
        assert_fails_closed(prepare(c, save_file=save_file))  # without a session
        session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        note = c.notification("session.aborted", PUSH)  # the claim at open fails closed
        assert note["params"]["session"] == session
        assert "cannot be used" in note["params"]["reason"]
        assert_fails_closed(prepare(c, session=session))
        # stopped three times, but no abort file was consumed: none is counted
        assert c.call("status")["result"]["counts"]["aborts"] == 0
    assert not os.path.exists(inbox_removed_dir(save_file))  # nothing was taken
    log = d.log()
    assert "cannot be used" in log and "Traceback" not in log


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the daemon as uid 65534")
def test_a_chat_is_served_again_once_its_inbox_is_repaired(daemon: Daemon) -> None:
    """Fail closed is no abort: nothing was consumed, and a repaired inbox is served."""
    d = daemon
    save_file = chat(d, "repaired")
    inbox = inbox_dir(save_file)
    os.mkdir(inbox)
    with open(os.path.join(inbox, "note.txt"), "w") as handle:
        handle.write("kept for later")
    give_away(inbox)
    os.chmod(inbox, 0)
    with d.connect() as c:
        assert_fails_closed(prepare(c, save_file=save_file))
        os.chmod(inbox, 0o755)
        reply = prepare(c, save_file=save_file, strategies="inbox")
        notice = {"role": "user", "content": "kept for later"}
        assert reply["result"]["messages"] == [*HELLO, notice]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the daemon as uid 65534")
def test_a_symlink_loop_on_the_way_and_a_missing_inbox(daemon: Daemon) -> None:
    """ELOOP above the inbox fails closed; no inbox at all (or no chat directory) is served."""
    d = daemon
    loop = os.path.join(d.dir, "loop")
    os.symlink(loop, loop)
    os.lchown(loop, NOBODY, NOBODY)
    with d.connect() as c:
        assert_fails_closed(prepare(c, save_file=os.path.join(loop, "agent.chat")))
        for missing in (chat(d, "fresh"), os.path.join(d.dir, "no", "such", "agent.chat")):
            assert prepare(c, save_file=missing)["result"]["messages"] == HELLO


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the daemon as uid 65534")
def test_an_abort_the_daemon_cannot_read_still_aborts(daemon: Daemon) -> None:
    """EACCES on the abort entry itself: taken unread, with a generic reason."""
    d = daemon
    save_file = chat(d, "unreadable")
    inbox = inbox_dir(save_file)
    os.mkdir(inbox)
    os.chown(inbox, NOBODY, NOBODY)
    abort = os.path.join(inbox, "abort")
    with open(abort, "w") as handle:
        handle.write("secret reason")
    os.chmod(abort, 0)  # root's, unreadable to the daemon
    os.utime(abort, (1, 1))  # written long ago: complete (nothing can probe it open)
    with d.connect() as c:
        reason = assert_fails_closed(prepare(c, save_file=save_file), "aborted by operator")
        assert "secret reason" not in reason
        assert c.call("status")["result"]["counts"]["aborts"] == 1  # taken, unread
    assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]
