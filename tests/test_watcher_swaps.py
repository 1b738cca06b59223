"""FsWatcher when a watched directory is swapped while its watch is being added.

A watch follows whatever the path names at the instant it is added; the
inode the watcher records for it must be that same directory's, or the
rescan's check and the re-arm after the next event both take a watch on the
wrong directory for a sound one, and an abort dropped in the right one
waits for nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from scoutd import watch_state
from scoutd.inbox import inbox_dir, write_abort
from scoutd.watcher import FsWatcher
from tests.reliability.harness import FaultDaemon
from tests.test_watcher import WAIT, touch, wait_path, watched_inbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def base(tmp_path: Path) -> str:
    return str(tmp_path)


def after_next_add(watcher: FsWatcher, step: Callable[[], None]) -> list[bytes]:
    """Run ``step`` (in the adding thread) right after the watcher's next watch is added.

    Returns the list the added paths are appended to, so a test can tell the
    hook ran.
    """
    reader = watcher._fd
    assert reader is not None
    real = reader.add_callback
    added: list[bytes] = []

    def add_callback(path: bytes, *args: Any) -> int:
        wd: int = real(path, *args)
        added.append(path)
        if len(added) == 1:
            step()
        return wd

    reader.add_callback = add_callback  # type: ignore[method-assign,assignment]
    return added


async def settled(watcher: FsWatcher) -> None:
    """Wait (bounded) until no re-arm is queued or running."""
    with anyio.fail_after(WAIT):
        while True:
            await anyio.sleep(0.05)
            if not watcher._rearm and not watcher._lock.locked():
                return


@pytest.mark.parametrize("names", ["proc", "no_proc"])
@pytest.mark.parametrize("swap", ["symlink_to_directory", "directory_to_directory"])
async def test_a_directory_swapped_while_its_watch_is_added_is_armed_on_the_new_one(
    base: str, swap: str, names: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path changes between the watch's addition and the look at its inode.

    The watch went on the old directory (a symlink's target, or a directory
    since renamed away) while the inode recorded was the new directory's: the
    events of the swap found the watch "healthy" and left it there, so an
    abort dropped in the new inbox went unseen until the periodic rescan,
    which trusted the same inode and never re-armed it either.
    """
    if names == "no_proc":  # no descriptor names: the path is looked at again instead
        monkeypatch.setattr(watch_state, "FD_NAMES", os.path.join(base, "none"), raising=False)
    async with watched_inbox(base) as (watcher, inbox, other):
        os.rename(inbox, inbox + ".old")
        if swap == "symlink_to_directory":
            os.symlink(other, inbox)

            def step() -> None:
                os.unlink(inbox)
                os.mkdir(inbox)
        else:
            os.mkdir(inbox)

            def step() -> None:
                os.rename(inbox, inbox + ".older")
                os.mkdir(inbox)

        added = after_next_add(watcher, step)  # no await since the swap: not re-armed yet
        await wait_path(watcher, inbox)
        await settled(watcher)
        assert added, "the swap never ran while a watch was being added"
        assert watcher.armed(inbox)
        touch(os.path.join(inbox, "abort"))
        await wait_path(watcher, os.path.join(inbox, "abort"))  # no rescan, no ensure()
        # and what the periodic rescan checks agrees: nothing is left stale
        assert await watcher.ensure(inbox)
        assert added[0].startswith(b"/proc/self/fd/") == (names == "proc")


async def test_an_inbox_made_in_a_replaced_chat_directory_before_its_rearm_is_watched(
    base: str,
) -> None:
    """The chat directory moved away and made again, its inbox too, before any re-arm.

    Moving a directory tells its own watch, not the watches of what it holds:
    the inbox's watch followed the old inbox away and still counted as armed.
    The new inbox was made before the new chat directory was watched, so no
    event named it: an abort dropped there waited for the periodic rescan.
    """
    chat = os.path.join(base, "chat")
    inbox = os.path.join(chat, "a.inbox")
    os.makedirs(inbox)
    async with FsWatcher("native") as watcher:
        await watcher.add(chat)
        await watcher.add(inbox)
        os.rename(chat, chat + ".old")
        os.makedirs(inbox)  # no await since the move: nothing re-armed yet
        await wait_path(watcher, chat)
        await settled(watcher)
        touch(os.path.join(inbox, "abort"))
        await wait_path(watcher, os.path.join(inbox, "abort"))  # no rescan, no ensure()
        assert await watcher.ensure(inbox)


# The daemon's watch on the symlink's target is added; right then (in the adding
# thread, once) the symlink gives way to a directory: the operator's swap back at
# the worst moment, made certain.
SWAP_BACK_WHILE_ADDING = """
import os
import scoutd.watcher

_add_callback = scoutd.watcher.Reader.add_callback


def add_callback(self, path, *args):
    wd = _add_callback(self, path, *args)
    target = os.path.realpath(os.fsdecode(path))
    toggle = os.path.join(os.path.dirname(target), "faults.on")
    if os.path.basename(target) == "other" and os.path.exists(toggle):
        inbox = os.path.join(os.path.dirname(target), "a.inbox")
        os.unlink(inbox)
        os.mkdir(inbox)
        os.unlink(toggle)
    return wd


scoutd.watcher.Reader.add_callback = add_callback
"""


def test_the_daemon_pushes_an_abort_in_an_inbox_swapped_back_while_its_watch_is_added() -> None:
    """The real daemon, rescans 60 s apart: the abort is pushed at once all the same."""
    faults = SWAP_BACK_WHILE_ADDING
    with (
        FaultDaemon(faults, daemon={"rescan_interval": 60.0}) as daemon,
        daemon.connect() as client,
    ):
        save_file = os.path.join(daemon.dir, "a.chat")
        inbox, other = inbox_dir(save_file), os.path.join(daemon.dir, "other")
        assert os.path.basename(inbox) == "a.inbox"
        os.mkdir(inbox)
        os.mkdir(other)
        client.call("session.open", {"save_file": save_file})
        daemon.fault(True)
        os.rename(inbox, inbox + ".old")
        os.symlink(other, inbox)
        deadline = time.monotonic() + WAIT
        while os.path.exists(daemon.toggle):  # bounded: the daemon swaps back as it watches
            assert time.monotonic() < deadline, "the daemon never watched the symlink's target"
            time.sleep(0.01)
        assert os.path.isdir(inbox) and not os.path.islink(inbox)
        time.sleep(0.3)  # the claim the re-arm asked for has looked (and found nothing)
        write_abort(save_file, "stop now")
        deadline = time.monotonic() + WAIT  # long before the 60 s rescan
        reasons = []  # the symlink's own abort (fails closed) may come first, or not at all
        while "stop now" not in reasons:  # bounded: each wait ends by the deadline
            left = max(0.0, deadline - time.monotonic())
            reasons.append(client.notification("session.aborted", left)["params"]["reason"])
