"""An abort that exists always aborts, and its chat stays aborted (docs/RELIABILITY.md).

Two ways a consumed abort used to be lost, so that a later call was served:

* *a chat named through the operator's symlinked directory* (``~/chats`` to
  ``/data/chats``): the daemon, which resolves the directory, marks
  ``/data/chats/run-1.inbox_aborted``; the library given ``~/chats/run-1.chat``
  opened the marker's directory without following its last component, found
  no marker and served the chat (its ``mark`` and ``clear`` missed it too);
* *a full disk*: the abort was consumed though no marker could be written, so
  the call that took it was refused and the next one served.

A marker's directory is now reached as the inbox is (trusted symlinks followed,
the agent's never), a marker there that cannot be reached that way aborts
unread, and an abort no marker can be written for is never consumed. Real
files and directories; a real tmpfs for the full disk (a mount: root only).
"""

from __future__ import annotations

import errno
import logging
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

import scoutd
from scoutd import Aborted, PromptConfig, protocol
from scoutd.errors import AbortNotTaken, StillAborted
from scoutd.inbox import inbox_dir, inbox_removed_dir, write_abort, write_notice
from scoutd.inbox.aborted import Cleared, check, claim_and_mark, clear, held, mark, marker_paths
from scoutd.integrations._run import RunPreparer
from scoutd.security import check_save_file, resolve_roots
from scoutd.strategies.inbox import inbox
from scoutd.testing import InProcessDaemon, wait_for

NOBODY = 65534
# Bounds every wait on the daemon (its rescan runs every 0.5 s in tests).
WAIT = 10.0
CONFIG = PromptConfig()
HELLO = [{"role": "user", "content": "hello"}]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a mount, another uid)")


# --- a chat named through a symlinked directory ----------------------------------------


@pytest.fixture
def chats(tmp_path: pathlib.Path) -> tuple[str, str]:
    """``(given, resolved)``: ``home/chats/run-1.chat``, ``home/chats`` the operator's
    symlink to ``data/chats``, and the save file the daemon works on (its directory
    resolved, as ``check_save_file`` does)."""
    real = tmp_path / "data" / "chats"
    real.mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "chats").symlink_to(real)
    given = str(tmp_path / "home" / "chats" / "run-1.chat")
    resolved = check_save_file(given, resolve_roots([str(tmp_path)]))
    assert resolved == str(real / "run-1.chat")
    return given, resolved


def test_the_daemons_marker_aborts_a_chat_named_through_the_users_symlink(
    chats: tuple[str, str],
) -> None:
    """The daemon consumed the abort on the resolved path: every in-process entry point
    given the symlinked path aborts with its reason."""
    given, resolved = chats
    write_abort(given, "stop run 1")  # scoutd abort ~/chats/run-1.chat: the operator's link
    assert claim_and_mark(resolved) == "stop run 1"  # the daemon's watcher, on its own path
    assert os.path.isfile(marker_paths(resolved)[0])
    assert os.path.lexists(marker_paths(given)[0])  # the kernel sees it through the link
    assert held(given) == "stop run 1"
    with pytest.raises(StillAborted, match="stop run 1"):
        scoutd.prepare(HELLO, save_file=given)
    with scoutd.Session(given) as session, pytest.raises(Aborted, match="stop run 1"):
        session.prepare_prompt(HELLO)
    with RunPreparer(save_file=given) as preparer, pytest.raises(Aborted, match="stop run 1"):
        preparer.prepare(HELLO)


def test_marking_and_clearing_through_the_users_symlink_reach_the_daemons_marker(
    chats: tuple[str, str],
) -> None:
    """The marker a hook writes through the link is the one the daemon reads, beside the
    chat; ``scoutd clear`` through the link removes it, and the chat is served again."""
    given, resolved = chats
    assert mark(given, "stopped by the hook") == marker_paths(given)[0]  # beside, no fallback
    assert held(resolved) == "stopped by the hook"
    cleared = clear(given)
    assert cleared == Cleared([marker_paths(given)[0]], [], None)
    assert not os.path.lexists(marker_paths(resolved)[0])
    assert held(resolved) is None
    assert scoutd.prepare(HELLO, save_file=given).messages == HELLO


@root_only
def test_a_marker_behind_the_agents_symlink_aborts_unread(tmp_path: pathlib.Path) -> None:
    """An agent swaps its chat directory for a symlink to another agent's aborted chat:
    nothing is read through the link (rule 4), but what the kernel sees there aborts."""
    a1, a2 = tmp_path / "a1", tmp_path / "a2"
    a2.mkdir()
    a1.symlink_to(a2)
    os.lchown(a1, NOBODY, NOBODY)
    mine, theirs = str(a1 / "agent.chat"), str(a2 / "agent.chat")
    assert held(mine) is None  # nothing behind the link: the inbox side decides
    assert mark(theirs, "the secret reason of a2") == marker_paths(theirs)[0]
    reason = held(mine)
    assert reason is not None
    assert reason.startswith(f"aborted by operator (the abort marker {marker_paths(mine)[0]}")
    assert "symbolic link owned by uid 65534" in reason and "secret" not in reason
    with pytest.raises(Aborted) as raised:
        scoutd.prepare(HELLO, save_file=mine)
    assert "secret" not in raised.value.reason
    cleared = clear(mine)  # never through the agent's link
    assert cleared.removed == [] and cleared.still == reason
    assert held(theirs) == "the secret reason of a2"


# --- a full disk -----------------------------------------------------------------------


class Disk:
    """A mounted tmpfs that can be filled up to the last byte, and freed again."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.filler = os.path.join(path, "filler")

    def fill(self) -> None:
        """Write until not one more byte fits (``ENOSPC``); bounded by the disk's size."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            for chunk in (1 << 16, 1 << 12, 1):
                while True:
                    try:
                        os.write(fd, b"\0" * chunk)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        os.unlink(self.filler)


@pytest.fixture
def disk(tmp_path: pathlib.Path) -> Iterator[Disk]:
    """A real tmpfs of 256 KiB, mounted for the test and unmounted after it."""
    path = tmp_path / "disk"
    path.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(path)]
    subprocess.run(mount, check=True, timeout=30)
    try:
        yield Disk(str(path))
    finally:
        subprocess.run(["umount", str(path)], check=True, timeout=30)


@root_only
def test_an_abort_no_marker_can_be_written_for_stays_and_aborts_every_call(
    disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    """Never consumed unmarked: it waits in the inbox and aborts every call, until a
    marker can be written (the next call then takes it) or an operator clears it."""
    save_file = os.path.join(disk.path, "run-1.chat")
    write_abort(save_file, "stop: disk full")
    write_notice(save_file, "carry on", name="note.txt")
    disk.fill()
    refusals: list[type[Aborted]] = []
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        for _ in range(3):  # a new call each time: the second one used to be served
            with pytest.raises(Aborted, match="stop: disk full") as raised:
                scoutd.prepare(HELLO, save_file=save_file)
            refusals.append(type(raised.value))
    assert refusals == [AbortNotTaken] * 3  # none consumed it
    assert "no abort marker could be written" in caplog.text
    assert "left in place, not consumed" in caplog.text
    with scoutd.Session(save_file) as session:
        for _ in range(2):
            with pytest.raises(Aborted, match="stop: disk full"):
                session.prepare_prompt(HELLO)
    assert sorted(os.listdir(inbox_dir(save_file))) == ["abort", "note.txt"]
    assert not os.path.lexists(inbox_removed_dir(save_file))  # nothing moved
    assert held(save_file) is None  # no marker: the abort itself stands
    disk.free()  # a marker fits again: the next call consumes the abort and marks the chat
    with pytest.raises(Aborted, match="stop: disk full") as raised:
        scoutd.prepare(HELLO, save_file=save_file)
    assert type(raised.value) is Aborted  # consumed now
    assert os.listdir(inbox_dir(save_file)) == ["note.txt"]
    assert held(save_file) == "stop: disk full"
    with pytest.raises(StillAborted, match="stop: disk full"):
        scoutd.prepare(HELLO, save_file=save_file)
    clear(save_file)
    assert scoutd.prepare(HELLO, save_file=save_file).messages[-1]["content"] == "carry on"


@root_only
@pytest.mark.parametrize("removed", ["a directory", "a regular file"])
@pytest.mark.parametrize("consumer", ["pickup", "watcher claim", "hook check"])
def test_no_consumer_takes_an_abort_it_cannot_mark(disk: Disk, consumer: str, removed: str) -> None:
    """One rule for the library's pickup, the daemon watcher's claim (``claim_and_mark``)
    and a hook's check, wherever the abort would go (the record directory, or a hidden
    name in the inbox when the record directory cannot take it)."""
    save_file = os.path.join(disk.path, "run-1.chat")
    write_abort(save_file, "stop")
    if removed == "a regular file":
        pathlib.Path(inbox_removed_dir(save_file)).write_text("")
    disk.fill()
    for _ in range(2):
        if consumer == "pickup":
            with pytest.raises(AbortNotTaken, match="stop"):
                inbox(HELLO, CONFIG, save_file=save_file)
        elif consumer == "watcher claim":  # as the daemon runs it: never waits
            with pytest.raises(AbortNotTaken, match="stop"):
                claim_and_mark(save_file, complete=True, wait=False)
        else:
            assert check(save_file) == "stop"  # a reason, which the hook keeps
    assert os.listdir(inbox_dir(save_file)) == ["abort"]


@root_only
def test_a_hook_that_met_an_abort_it_could_not_mark_stays_aborted(disk: Disk) -> None:
    """The run that saw the abort stays aborted, even after the operator's clear; a new
    run is aborted by the abort still waiting, and served once it is cleared."""
    save_file = os.path.join(disk.path, "run-1.chat")
    write_abort(save_file, "stop the run")
    disk.fill()
    with RunPreparer(save_file=save_file) as first:
        with pytest.raises(Aborted, match="stop the run"):
            first.prepare(HELLO)
        with RunPreparer(save_file=save_file) as second, pytest.raises(Aborted, match="stop"):
            second.check()
        abort = os.path.join(inbox_dir(save_file), "abort")
        assert clear(save_file) == Cleared([abort], [], None)
        with pytest.raises(Aborted, match="stop the run"):
            first.prepare(HELLO)
        assert first.aborted == "stop the run"
    with RunPreparer(save_file=save_file) as third:
        assert third.prepare(HELLO).messages == HELLO


@root_only
def test_a_chat_already_marked_takes_a_new_abort_on_a_full_disk(disk: Disk) -> None:
    """The marker there is kept as it is, with nothing to write: the abort is durable
    already, so it is consumed (and the first reason stays)."""
    save_file = os.path.join(disk.path, "run-1.chat")
    assert mark(save_file, "first") == marker_paths(save_file)[0]
    write_abort(save_file, "second")
    disk.fill()
    assert claim_and_mark(save_file, complete=True, wait=False) == "second"
    assert not os.path.lexists(os.path.join(inbox_dir(save_file), "abort"))
    assert held(save_file) == "first"


@root_only
def test_the_daemon_leaves_an_abort_it_cannot_mark_and_stays_aborted(disk: Disk) -> None:
    """The daemon's watcher follows the same rule: the sessions are aborted, the abort
    stays, and every call without a session is refused (the second one was served);
    once space is freed, the abort is consumed and the chat marked."""
    save_file = os.path.join(disk.path, "run-1.chat")
    os.mkdir(inbox_dir(save_file))
    staged = os.path.join(disk.path, "staged")
    pathlib.Path(staged).write_text("stop: disk full")
    disk.fill()
    with InProcessDaemon(daemon={"allowed_roots": [disk.path]}) as daemon, daemon.connect() as c:
        opened = c.call("session.open", {"save_file": save_file})
        session = opened["result"]["session"]
        # dropped whole by a rename, as ``scoutd abort`` does: it needs no space
        os.rename(staged, os.path.join(inbox_dir(save_file), "abort"))
        pushed = c.notification("session.aborted", WAIT)["params"]
        assert pushed == {"session": session, "save_file": save_file, "reason": "stop: disk full"}
        for _ in range(3):
            reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
            assert reply.get("error", {}).get("code") == protocol.ABORTED, reply
            assert reply["error"]["data"]["reason"] == "stop: disk full"
        assert os.listdir(inbox_dir(save_file)) == ["abort"]
        assert c.call("status")["result"]["counts"]["aborts"] == 0  # nothing consumed
        disk.free()  # the rescan (or the next call) consumes it now, and marks the chat
        wait_for(lambda: held(save_file) == "stop: disk full", WAIT, "the chat's marker")
        wait_for(lambda: c.call("status")["result"]["counts"]["aborts"] == 1, WAIT, "the take")
        assert os.listdir(inbox_dir(save_file)) == []
        reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file})
        assert reply["error"]["data"]["reason"] == "stop: disk full"
