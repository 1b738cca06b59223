"""Filesystem errors during pickup: a clear log line, no crash, nothing duplicated.

Permission faults need an unprivileged daemon: when the suite runs as root, the
daemon runs as uid 65534 (``setpriv``) on a tree it owns.
"""

from __future__ import annotations

import logging
import os
import pathlib
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd import PromptConfig
from scoutd.inbox.aborted import clear, held
from scoutd.strategies.inbox import (
    inbox,
    inbox_dir,
    inbox_removed_dir,
    write_abort,
    write_notice,
)
from tests.reliability.harness import NOBODY, give_away, unprivileged_prefix
from tests.support.daemon import Daemon, LineClient, wait_for

PUSH = 5.0


def drop(save_file: str, name: str, text: str, mode: int = 0o644) -> str:
    os.makedirs(inbox_dir(save_file), exist_ok=True)
    path = os.path.join(inbox_dir(save_file), name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


def prepare(c: LineClient, save_file: str) -> list[Any]:
    reply = c.call(
        "prepare_prompt", {"messages": [], "strategies": "inbox", "save_file": save_file}
    )
    assert "result" in reply, reply
    return [m["content"] for m in reply["result"]["messages"]]


def listing(path: str) -> list[str]:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


@pytest.fixture
def unprivileged() -> Iterator[Daemon]:
    """A daemon that cannot read through file modes (uid 65534 when we are root)."""
    d = Daemon(
        daemon={"allowed_uids": [0, os.getuid(), NOBODY], "socket_mode": 0o666},
        argv_prefix=unprivileged_prefix(),
    )
    try:
        yield d
    finally:
        d.cleanup()


def test_an_unreadable_notice_is_left_in_place_with_a_clear_log_line(unprivileged: Daemon) -> None:
    d = unprivileged
    save_file = os.path.join(d.dir, "agent.chat")
    drop(save_file, "a.txt", "A")
    forged = "b\nERROR scoutd.server: forged line.txt"
    drop(save_file, forged, "B", mode=0)
    drop(save_file, "c.txt", "C")
    give_away(d.dir)
    with d, d.connect() as c:
        assert prepare(c, save_file) == ["A", "C"]
        assert prepare(c, save_file) == []  # tried again, still unreadable, still in place
        assert listing(inbox_dir(save_file)) == [forged]
        assert listing(inbox_removed_dir(save_file)) == ["a.txt", "c.txt"]
        assert "result" in c.call("status")
        log = d.log()
    assert "left in place" in log and "Permission denied" in log
    assert repr(os.path.join(inbox_dir(save_file), forged)) in log
    assert not any(line.startswith("ERROR scoutd.server: forged") for line in log.splitlines())


def test_a_removed_directory_that_is_not_writable_still_aborts(unprivileged: Daemon) -> None:
    """Notices wait in place; an abort fails closed: pushed at once, recorded in the inbox."""
    d = unprivileged
    save_file = os.path.join(d.dir, "ro.chat")
    drop(save_file, "note.txt", "kept")
    os.makedirs(inbox_removed_dir(save_file))
    give_away(d.dir)
    os.chmod(inbox_removed_dir(save_file), 0o555)
    with d, d.connect() as c:
        assert prepare(c, save_file) == []
        assert listing(inbox_dir(save_file)) == ["note.txt"]
        session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        write_abort(save_file, "cannot move me")
        note = c.notification("session.aborted", PUSH)
        assert note["params"] == {
            "session": session,
            "save_file": save_file,
            "reason": "cannot move me",
        }
        hidden = [n for n in os.listdir(inbox_dir(save_file)) if n.startswith(".abort-")]
        assert len(hidden) == 1 and listing(inbox_dir(save_file)) == [hidden[0], "note.txt"]
        with open(os.path.join(inbox_dir(save_file), hidden[0])) as handle:
            assert handle.read() == "cannot move me"
        # the abort the watcher claimed keeps the chat aborted until an operator clears it
        for _ in range(2):
            reply = c.call("prepare_prompt", {"messages": [], "save_file": save_file})
            assert reply["error"]["code"] == -32001
        os.chmod(inbox_removed_dir(save_file), 0o755)
        assert held(save_file) == "cannot move me"
        clear(save_file)
        assert prepare(c, save_file) == ["kept"]
        assert listing(inbox_removed_dir(save_file)) == ["note.txt"]
        log = d.log()
    assert "left in place" in log and "Permission denied" in log
    assert "ERROR scoutd.inbox: abort file" in log and "recorded as" in log


SWAPPER = r"""
import os, sys, time
path, stop, rounds, kinds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
tmp = os.path.join(os.path.dirname(path), ".swap")
for n in range(rounds):
    if os.path.exists(stop):
        break
    kind = kinds[n % len(kinds)]
    try:
        if kind != "d" and os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        if kind == "r":
            with open(tmp, "w") as handle:
                handle.write(f"regular {n}")
            # dated back, as scoutd's own writers do: complete at once when renamed in
            past = time.time() - 1
            os.utime(tmp, (past, past))
            os.rename(tmp, path)
        elif kind == "f":
            os.mkfifo(tmp)
            os.rename(tmp, path)
        else:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            elif os.path.lexists(path):
                os.unlink(path)
            os.mkdir(path)
    except OSError:
        for cleanup in (os.unlink, os.rmdir):
            try:
                cleanup(tmp)
            except OSError:
                pass
print("done", flush=True)
"""


def test_notices_swapped_for_fifos_and_directories_during_pickup(
    caplog: pytest.LogCaptureFixture, tmp_path: pathlib.Path
) -> None:
    """A real race: another process keeps replacing ``note`` while the strategy picks up.

    An entry that turns out not to be a regular file after the claim goes back to
    the inbox, unless the name was taken again meanwhile: it then stays in the
    removed directory under its private ``.claim-`` name, with a warning. No
    record name ever holds anything but a delivered regular file.
    """
    base = str(tmp_path)  # removed by pytest, unlike a bare mkdtemp
    save_file = os.path.join(base, "swap.chat")
    os.makedirs(inbox_dir(save_file))
    stop = os.path.join(base, "stop")
    target = os.path.join(inbox_dir(save_file), "note")
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, target, stop, "2000000", "rfrd"], stdout=subprocess.DEVNULL
    )
    delivered: list[str] = []
    config = PromptConfig()
    caplog.set_level(logging.WARNING, logger="scoutd.inbox")
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and swapper.poll() is None:
            # a call blocked on a FIFO never returns: the suite's timeout fails it
            out, _ = inbox([], config, save_file=save_file)
            delivered.extend(m["content"] for m in out)
    finally:
        open(stop, "w").close()
        swapper.wait(30)
    assert delivered, "the race never let a regular notice through"
    assert all(text.startswith("regular ") for text in delivered)
    assert len(delivered) == len(set(delivered))
    removed = inbox_removed_dir(save_file)
    records: list[str] = []
    stranded = 0
    for name in os.listdir(removed):
        path = os.path.join(removed, name)
        if name.startswith(".claim-"):
            assert not stat.S_ISREG(os.lstat(path).st_mode), name
            stranded += 1
            continue
        assert stat.S_ISREG(os.lstat(path).st_mode), name
        with open(path, encoding="utf-8") as handle:
            records.append(handle.read())
    assert sorted(records) == sorted(delivered)
    assert caplog.text.count("could not return") == stranded


def test_an_abort_swapped_for_fifos_and_directories_aborts_unread_each_time() -> None:
    """Fail closed under a race: every ``abort`` entry that appears aborts, none is read.

    Another process keeps replacing ``abort`` by a FIFO or a directory. The
    daemon stays responsive; each entry it claims is recorded as itself (a FIFO
    or a directory, never a copy) and pushed once, with the generic reason that
    names its type.
    """
    generic = {
        f"aborted by operator (the abort entry is {kind}; not read)"
        for kind in ("a FIFO", "a directory")
    }
    with Daemon(daemon={"rescan_interval": 0.2}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "swap.chat")
        os.makedirs(inbox_dir(save_file))
        c.call("session.open", {"save_file": save_file})
        stop = os.path.join(d.dir, "stop")
        target = os.path.join(inbox_dir(save_file), "abort")
        swapper = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, target, stop, "3000", "fd"], stdout=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:  # the daemon stays responsive meanwhile
                assert "result" in c.call("status", timeout=5)
                time.sleep(0.05)
        finally:
            open(stop, "w").close()
            swapper.wait(30)
        wait_for(lambda: not os.path.lexists(target), PUSH, "the last abort entry claimed")
        removed = inbox_removed_dir(save_file)
        # the last claim may still be on its way to its record: wait, never strand one
        wait_for(
            lambda: not [n for n in listing(removed) if n.startswith(".")],
            PUSH,
            "no claim left over",
        )
        records = [os.path.join(removed, n) for n in listing(removed)]
        # an entry replaced again mid-claim, more than a few times: its hidden record
        inbox_path = inbox_dir(save_file)
        records += [os.path.join(inbox_path, n) for n in listing(inbox_path) if n != ".swap"]
        assert records
        for record in records:
            mode = os.lstat(record).st_mode
            assert stat.S_ISFIFO(mode) or stat.S_ISDIR(mode), record
        reasons = [c.notification("session.aborted", PUSH)["params"]["reason"] for _ in records]
        assert set(reasons) <= generic
        assert "result" in c.call("status")
        assert [m for m in c.notifications if m.get("method") == "session.aborted"] == []
        write_abort(save_file, "a real one")
        assert c.notification("session.aborted", PUSH)["params"]["reason"] == "a real one"


def test_a_notice_larger_than_inbox_max_bytes_is_cut_visibly_once() -> None:
    with Daemon(prompt={"inbox_max_bytes": 1000}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "big.chat")
        write_notice(save_file, "é" * 3000, name="big.txt")  # 6,000 bytes
        [text] = prepare(c, save_file)
        assert text == "é" * 500 + "\n[scoutd: notice truncated at 1000 of 6000 bytes]"
        assert prepare(c, save_file) == []  # delivered once
        with open(os.path.join(inbox_removed_dir(save_file), "big.txt"), encoding="utf-8") as f:
            assert f.read() == "é" * 3000  # the record keeps the whole file
        c.call("session.open", {"save_file": save_file})
        write_abort(save_file, "stop " + "x" * 5000)
        reason = c.notification("session.aborted", PUSH)["params"]["reason"]
        assert reason.startswith("stop xxx") and reason.endswith("of 5005 bytes]")
        assert len(reason) < 1100
