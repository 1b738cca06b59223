"""Inbox tricks: only a regular file in the inbox is ever delivered, nothing else is opened.

A symlink to a secret file, a hard link, a FIFO, a device node, a socket, names
with newlines or invalid UTF-8 as notices (``prepare_prompt``): never delivered.
As the reserved ``abort`` (the session watcher's claim and the inbox strategy):
it aborts all the same (fail closed), unread. A FIFO is the witness that
nothing was opened (tests/support/odd_entries.py).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.strategies.inbox import inbox_dir, inbox_removed_dir, write_abort
from tests.reliability.harness import NOBODY
from tests.support.daemon import Daemon, LineClient, wait_for
from tests.support.odd_entries import (
    KIND_WORDS,
    KINDS,
    SECRET,
    FifoWitness,
    OddEntry,
    make_socket_file,
)


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with Daemon(daemon={"rescan_interval": 0.2}) as d:
        yield d


@pytest.fixture
def slow_daemon() -> Iterator[Daemon]:
    """A daemon whose rescan never comes during a test: what arrives came by file event."""
    with Daemon(daemon={"rescan_interval": 60.0}) as d:
        yield d


def prepare(c: LineClient, save_file: str) -> list[Any]:
    reply = c.call(
        "prepare_prompt", {"messages": [], "strategies": "inbox", "save_file": save_file}
    )
    assert "result" in reply, reply
    return [m["content"] for m in reply["result"]["messages"]]


def secret_file(d: Daemon) -> str:
    path = os.path.join(d.dir, "secret")
    with open(path, "w") as handle:
        handle.write(SECRET)
    os.chmod(path, 0o600)
    return path


def test_notices_that_are_not_regular_files_are_left_alone(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "t.chat")
    inbox = inbox_dir(save_file)
    os.makedirs(inbox)
    secret = secret_file(daemon)
    os.symlink(secret, os.path.join(inbox, "1-symlink"))
    os.symlink(os.path.dirname(secret), os.path.join(inbox, "2-dirlink"))
    os.mkfifo(os.path.join(inbox, "3-fifo"))
    os.mkdir(os.path.join(inbox, "4-dir"))
    listener = make_socket_file(os.path.join(inbox, "5-sock"))
    try:
        os.mknod(os.path.join(inbox, "6-dev"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        devices = ["6-dev"]
    except PermissionError:
        devices = []  # no CAP_MKNOD here: the other kinds are still checked
    with open(os.path.join(inbox, "7-real"), "w") as handle:
        handle.write("a real notice")
    witness = FifoWitness(os.path.join(inbox, "3-fifo"))
    try:
        with daemon.connect() as c:
            # each call is bounded by the client's timeout: a daemon stuck on the
            # FIFO fails here (how fast it answers is for scripts/bench)
            assert prepare(c, save_file) == ["a real notice"]
            assert prepare(c, save_file) == []
        assert not witness.opened.is_set(), "the daemon opened a FIFO"
    finally:
        witness.release()
        listener.close()
    expected = ["1-symlink", "2-dirlink", "3-fifo", "4-dir", "5-sock", *devices]
    assert sorted(os.listdir(inbox)) == expected  # untouched, in place
    assert os.listdir(inbox_removed_dir(save_file)) == ["7-real"]
    with open(secret) as handle:
        assert handle.read() == SECRET


@pytest.mark.parametrize("kind", KINDS)
def test_an_abort_that_is_not_a_regular_file_aborts_unread(slow_daemon: Daemon, kind: str) -> None:
    """Fail closed: the agent cannot make itself un-abortable with an odd ``abort`` entry.

    Pushed at once by the session watcher (by file event), then, for a
    second such entry in a chat no session watches, refused by a session-less
    ``prepare_prompt`` (the inbox strategy). Never opened, followed or read; the
    entry itself is recorded.
    """
    save_file = os.path.join(slow_daemon.dir, f"{kind}.chat")
    inbox = inbox_dir(save_file)
    os.makedirs(inbox)
    abort = os.path.join(inbox, "abort")
    reason = f"aborted by operator (the abort entry is {KIND_WORDS[kind]}; not read)"
    scratch = os.path.join(slow_daemon.dir, "scratch")
    with slow_daemon.connect() as c:
        session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        entry = OddEntry(abort, kind, scratch)
        try:
            note = c.notification("session.aborted", 5)
            assert note["params"] == {"session": session, "save_file": save_file, "reason": reason}
            refused = c.call("prepare_prompt", {"messages": [], "session": session})
            assert refused["error"]["code"] == -32001
            entry.assert_moved_to(os.path.join(inbox_removed_dir(save_file), "abort"))
            entry.assert_untouched()
        finally:
            entry.close()
    other = os.path.join(slow_daemon.dir, f"{kind}-sessionless.chat")  # never watched
    os.makedirs(inbox_dir(other))
    second = OddEntry(os.path.join(inbox_dir(other), "abort"), kind, os.path.join(scratch, "2"))
    try:
        with slow_daemon.connect() as c:
            reply = c.call(
                "prepare_prompt", {"messages": [], "strategies": "inbox", "save_file": other}
            )
            assert reply["error"]["code"] == -32001, reply
            assert reply["error"]["data"]["reason"] == reason
            assert "result" in c.call("status")
        second.assert_moved_to(os.path.join(inbox_removed_dir(other), "abort"))
        second.assert_untouched()
    finally:
        second.close()
    assert "Traceback" not in slow_daemon.log()


def test_an_abort_directory_sends_the_abort_signal() -> None:
    """``abort_signal`` reaches the agent's pid for an odd abort entry too."""
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Daemon(daemon={"rescan_interval": 60.0, "abort_signal": "TERM"}) as d:
            save_file = os.path.join(d.dir, "signalled.chat")
            os.makedirs(inbox_dir(save_file))
            with d.connect() as c:
                reply = c.call("session.open", {"save_file": save_file, "pid": agent.pid})
                assert "result" in reply, reply
                os.mkdir(os.path.join(inbox_dir(save_file), "abort"))
                c.notification("session.aborted", 5)
                assert agent.wait(timeout=10) == -15  # ended by SIGTERM
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(timeout=10)


def test_names_with_newlines_and_invalid_utf8_are_delivered_and_recorded(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "names.chat")
    inbox = os.fsencode(inbox_dir(save_file))
    os.makedirs(inbox)
    names = [b"a\nINFO forged log line", b"b\xff\xfe.txt", b"c\r\n.txt", b"d \t.txt"]
    for n, name in enumerate(names):
        with open(os.path.join(inbox, name), "w") as handle:
            handle.write(f"notice {n}")
    with daemon.connect() as c:
        assert prepare(c, save_file) == [f"notice {n}" for n in range(len(names))]
    assert sorted(os.listdir(os.fsencode(inbox_removed_dir(save_file)))) == sorted(names)
    assert os.listdir(inbox) == []
    assert not any(line.startswith("INFO forged") for line in daemon.log().splitlines())


def test_a_hard_link_is_a_regular_file(
    daemon: Daemon,
) -> None:
    """A hard link in the inbox is delivered like any notice: its other name stays.

    What stops a client from linking a file it cannot read into its inbox (to have
    the daemon read it) is the kernel's ``fs.protected_hardlinks``, checked
    by the next test, as uid 65534 (it needs root).
    """
    save_file = os.path.join(daemon.dir, "hard.chat")
    inbox = inbox_dir(save_file)
    os.makedirs(inbox)
    shared = os.path.join(daemon.dir, "shared.txt")
    with open(shared, "w") as handle:
        handle.write("linked text")
    os.link(shared, os.path.join(inbox, "linked"))
    with daemon.connect() as c:
        assert prepare(c, save_file) == ["linked text"]
    with open(shared) as handle:
        assert handle.read() == "linked text"  # the other name is untouched


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="trying as uid 65534 needs root and setpriv",
)
def test_the_kernel_keeps_another_user_from_linking_a_secret_into_an_inbox(
    daemon: Daemon,
) -> None:
    save_file = os.path.join(daemon.dir, "hard-other.chat")
    inbox = inbox_dir(save_file)
    os.makedirs(inbox)
    with open("/proc/sys/fs/protected_hardlinks") as handle:
        if handle.read().strip() != "1":
            pytest.skip("fs.protected_hardlinks is off on this machine")
    secret = secret_file(daemon)
    os.chmod(daemon.dir, 0o755)
    os.chmod(inbox, 0o777)
    run = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            sys.executable,
            "-c",
            "import os, sys; os.link(sys.argv[1], sys.argv[2])",
            secret,
            os.path.join(inbox, "stolen"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode != 0 and "Operation not permitted" in run.stderr
    assert not os.path.exists(os.path.join(inbox, "stolen"))


def test_a_regular_abort_beside_the_tricks_is_claimed_once(daemon: Daemon) -> None:
    """After all the refusals, the real thing still works: one claim, one push."""
    save_file = os.path.join(daemon.dir, "real.chat")
    os.makedirs(inbox_dir(save_file))
    os.mkfifo(os.path.join(inbox_dir(save_file), "abort.fifo"))
    with daemon.connect() as c:
        c.call("session.open", {"save_file": save_file})
        write_abort(save_file, "real")
        assert c.notification("session.aborted", 5)["params"]["reason"] == "real"
        # Two whole rescans after the push (the first may have begun before the
        # claim), then a request on the same connection: a second push from a
        # rescan would be written before this answer.
        start = c.call("status")["result"]["counts"]["rescans"]
        wait_for(lambda: daemon.status()["counts"]["rescans"] >= start + 2, 10, "two rescans")
        c.call("status")
        assert [m for m in c.notifications if m.get("method") == "session.aborted"] == []
    assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]
