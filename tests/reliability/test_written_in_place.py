"""A file still open for writing is never delivered, through the daemon either.

docs/OPERATIONS.md promised that the daemon waits until a writer closes a
file; its prepare calls applied the 50 ms settle rule instead, so a writer
pausing mid-notice had half of it delivered (and the call slept meanwhile).
Now a file some process holds open for writing is left in the inbox, without
any wait, and taken whole once closed (the kernel tells, by a read lease).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd import protocol
from scoutd.inbox.files import being_written
from scoutd.inbox.pickup import BEING_WRITTEN
from scoutd.strategies.inbox import inbox_dir
from tests.support.daemon import Daemon, LineClient
from tests.support.ids import NOBODY

PAUSE = 0.3  # six settle times: the old rule took the file as it was then


@pytest.fixture
def daemon(tmp_path: pathlib.Path) -> Iterator[Daemon]:
    probe = tmp_path / "lease-probe"
    probe.write_text("x")
    fd = os.open(probe, os.O_RDONLY)
    try:
        if being_written(fd) is None:
            pytest.skip("no read leases here: only the settle rule applies")
    finally:
        os.close(fd)
    with Daemon() as d:
        yield d


def prepare(c: LineClient, **params: Any) -> dict[str, Any]:
    return c.call("prepare_prompt", {"messages": [], "strategies": "inbox", **params})


@pytest.mark.parametrize("with_session", [False, True])
def test_a_notice_open_for_writing_is_delivered_whole_once_closed(
    daemon: Daemon, with_session: bool
) -> None:
    d = daemon
    save_file = os.path.join(d.dir, "agent.chat")
    os.makedirs(inbox_dir(save_file))
    with d.connect() as c:
        params: dict[str, Any] = {"save_file": save_file}
        if with_session:
            session = c.call("session.open", {"save_file": save_file})["result"]["session"]
            params = {"session": session, "messages": []}
        path = os.path.join(inbox_dir(save_file), "note.txt")
        with open(path, "w") as writer:
            writer.write("first half, ")
            writer.flush()
            time.sleep(PAUSE)
            reply = prepare(c, **params)
            assert reply["result"]["messages"] == []
            writer.write("second half")
        reply = prepare(c, **params)
        assert reply["result"]["messages"] == [
            {"role": "user", "content": "first half, second half"}
        ]


def test_an_abort_open_for_writing_aborts_at_once_and_keeps_its_reason(daemon: Daemon) -> None:
    d = daemon
    save_file = os.path.join(d.dir, "agent.chat")
    os.makedirs(inbox_dir(save_file))
    path = os.path.join(inbox_dir(save_file), "abort")
    with d.connect() as c:
        with open(path, "w") as writer:
            writer.write("budget ")
            writer.flush()
            time.sleep(PAUSE)
            reply = prepare(c, save_file=save_file)
            assert reply["error"]["code"] == protocol.ABORTED
            assert reply["error"]["data"]["reason"] == BEING_WRITTEN
            assert os.path.exists(path)  # not consumed: its reason is not known yet
            assert c.call("status")["result"]["counts"]["aborts"] == 0  # nor counted
            writer.write("exhausted")
        reply = prepare(c, save_file=save_file)
        assert reply["error"]["data"]["reason"] == "budget exhausted"
        assert c.call("status")["result"]["counts"]["aborts"] == 1


@pytest.fixture
def leaseless_daemon() -> Iterator[Daemon]:
    """A daemon as root without ``CAP_LEASE``: for a file of another user it cannot ask the
    kernel whether anyone writes it, as a daemon on its own account cannot (docs/OPERATIONS.md,
    "Files written in place"); the times decide."""
    drop = ["setpriv", "--bounding-set=-lease"]
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("dropping CAP_LEASE needs root and setpriv")
    if subprocess.run([*drop, "true"], capture_output=True, timeout=30).returncode:
        pytest.skip("this machine does not let root drop a capability (no CAP_SETPCAP)")
    with Daemon(argv_prefix=drop) as d:
        yield d


def notice_of_another_user(save_file: str, name: str, text: str, date: float) -> str:
    """``text`` as ``name`` in the inbox, owned by uid 65534: written aside, dated ``date``
    and renamed in, as ``rsync -a`` delivers a file."""
    inbox = inbox_dir(save_file)
    os.makedirs(inbox, exist_ok=True)
    aside = os.path.join(os.path.dirname(inbox), f".{name}.part")
    pathlib.Path(aside).write_text(text)
    os.chown(aside, NOBODY, NOBODY)
    os.utime(aside, (date, date))
    path = os.path.join(inbox, name)
    os.rename(aside, path)
    return path


def test_without_leases_a_notice_dated_ahead_of_the_clock_is_delivered_at_once(
    leaseless_daemon: Daemon,
) -> None:
    """Before: a notice copied with its date from a machine whose clock runs an hour ahead
    (``rsync -a``, ``scp -p``, ``tar``) stayed in the inbox for that hour, at every call."""
    d = leaseless_daemon
    save_file = os.path.join(d.dir, "agent.chat")
    ahead = time.time() + 3600
    path = notice_of_another_user(save_file, "note.txt", "from the future", ahead)
    assert os.stat(path).st_mtime > time.time() + 3000  # the date the rename kept
    with d.connect() as c:
        reply = prepare(c, save_file=save_file)
    assert reply["result"]["messages"] == [{"role": "user", "content": "from the future"}]
    assert not os.path.exists(path)
