"""FsWatcher in process: real directories, watchdog's real inotify reader, and polling."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent, InotifyFD, WatchCallback

from scoutd.inbox import inbox_dir, write_abort
from scoutd.watch_state import inode_of
from scoutd.watcher import MAX_PENDING_PATHS, Batch, FsWatcher
from tests.support.daemon import Daemon

pytestmark = pytest.mark.anyio
WAIT = 5.0


@pytest.fixture
def base() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="sd", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture(params=["native", "poll"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def wait_path(watcher: FsWatcher, path: str) -> None:
    """Wait (bounded) for a batch mentioning ``path``."""
    with anyio.fail_after(WAIT):
        while path not in (await watcher.next_batch()).paths:
            pass


def touch(path: str) -> None:
    with open(path, "w") as handle:
        handle.write("x")


async def test_events_reach_the_loop(base: str, mode: str) -> None:
    async with FsWatcher(mode, poll_interval=0.05) as watcher:  # type: ignore[arg-type]
        await watcher.add(base)
        assert watcher.armed(base)
        touch(os.path.join(base, "a"))
        await wait_path(watcher, os.path.join(base, "a"))
        os.rename(os.path.join(base, "a"), os.path.join(base, "b"))
        await wait_path(watcher, os.path.join(base, "b"))  # a move reports its destination


async def test_references_are_counted(base: str) -> None:
    async with FsWatcher("native") as watcher:
        await watcher.add(base)
        await watcher.add(base)
        await watcher.remove(base)
        assert watcher.armed(base)
        await watcher.remove(base)
        assert not watcher.armed(base) and watcher.watched == []
        await watcher.remove(base)  # one too many is harmless


async def test_missing_directory_is_armed_later(base: str, mode: str) -> None:
    inbox = os.path.join(base, "a.inbox")
    async with FsWatcher(mode, poll_interval=0.05) as watcher:  # type: ignore[arg-type]
        await watcher.add(base)
        await watcher.add(inbox)
        assert not watcher.armed(inbox) and not await watcher.ensure(inbox)
        os.mkdir(inbox)
        await wait_path(watcher, inbox)  # seen through the parent's watch
        assert await watcher.ensure(inbox, force=True)
        touch(os.path.join(inbox, "abort"))
        await wait_path(watcher, os.path.join(inbox, "abort"))


async def test_recreated_directory_is_rearmed(base: str, mode: str) -> None:
    inbox = os.path.join(base, "a.inbox")
    os.mkdir(inbox)
    async with FsWatcher(mode, poll_interval=0.05) as watcher:  # type: ignore[arg-type]
        await watcher.add(base)
        await watcher.add(inbox)
        shutil.rmtree(inbox)
        await wait_path(watcher, inbox)
        os.mkdir(inbox)
        # a rescan (ensure without force) notices the dead watch or the new inode
        for _ in range(500):  # what the periodic rescan does, bounded to 5 s
            if await watcher.ensure(inbox):
                break
            await anyio.sleep(0.01)
        else:
            pytest.fail("the re-created directory was never re-armed")
        await watcher.ensure(inbox, force=True)
        touch(os.path.join(inbox, "abort"))
        await wait_path(watcher, os.path.join(inbox, "abort"))


@contextlib.asynccontextmanager
async def watched_inbox(base: str) -> AsyncIterator[tuple[FsWatcher, str, str]]:
    """A native watcher of ``base`` and of its inbox ``a.inbox``, beside a directory
    ``other`` to swap in: ``(watcher, inbox, other)``."""
    inbox, other = os.path.join(base, "a.inbox"), os.path.join(base, "other")
    os.mkdir(inbox)
    os.mkdir(other)
    async with FsWatcher("native") as watcher:
        await watcher.add(base)
        await watcher.add(inbox)
        yield watcher, inbox, other


@pytest.mark.parametrize("first", ["renamed", "removed"])
async def test_a_directory_swapped_for_a_symlink_and_back_is_rearmed_at_once(
    base: str, first: str
) -> None:
    """No rescan: the inbox replaced by a symlink, then by a directory, is watched at once.

    The watch followed the symlink to its target, which gets no event when
    the symlink goes: the new directory stayed unwatched until the periodic
    rescan, so an abort dropped there waited for it.
    """
    async with watched_inbox(base) as (watcher, inbox, other):
        if first == "renamed":
            os.rename(inbox, inbox + ".old")
        else:
            shutil.rmtree(inbox)
        os.symlink(other, inbox)
        await wait_path(watcher, inbox)
        await anyio.sleep(0.2)  # the re-arm after the swap ran
        os.unlink(inbox)
        os.mkdir(inbox)
        await wait_path(watcher, inbox)
        for _ in range(100):  # bounded: 1 s for the loop to re-arm (no ensure: no rescan)
            if watcher.armed(inbox) and watcher._watches[inbox].reg.inode == inode_of(inbox):  # type: ignore[union-attr]
                break
            await anyio.sleep(0.01)
        touch(os.path.join(inbox, "abort"))
        await wait_path(watcher, os.path.join(inbox, "abort"))


def test_the_daemon_pushes_an_abort_in_an_inbox_swapped_for_a_symlink_and_back() -> None:
    """The real daemon, rescans 60 s apart: the operator's abort is pushed at once."""
    with Daemon(daemon={"rescan_interval": 60.0}) as daemon, daemon.connect() as client:
        save_file = os.path.join(daemon.dir, "a.chat")
        inbox, other = inbox_dir(save_file), os.path.join(daemon.dir, "other")
        os.mkdir(inbox)
        os.mkdir(other)
        client.call("session.open", {"save_file": save_file})
        os.rename(inbox, inbox + ".old")
        os.symlink(other, inbox)
        unusable = client.notification("session.aborted", WAIT)  # fails closed meanwhile
        assert "symbolic link" in unusable["params"]["reason"]
        os.unlink(inbox)
        os.mkdir(inbox)
        time.sleep(0.3)  # the swap back is seen (or, before the fix, missed)
        write_abort(save_file, "stop now")
        pushed = client.notification("session.aborted", WAIT)
        assert pushed["params"]["reason"] == "stop now"


async def test_handler_errors_never_stop_watching(base: str) -> None:
    async with FsWatcher("native") as watcher:
        await watcher.add(base)
        handler = watcher._handler
        loop = watcher._loop
        # the hand-off fails (a loop that refuses the call): logged, never raised
        watcher._loop = None  # type: ignore[assignment]
        handler.on_event(InotifyEvent(1, 0, 0, b"x"))  # type: ignore[arg-type]
        watcher._loop = loop
        # an event for a watch nobody knows is ignored
        handler.on_event(InotifyEvent(987654, 0, 0, b"\xff\xfe"))  # type: ignore[arg-type]
        touch(os.path.join(base, "after"))
        await wait_path(watcher, os.path.join(base, "after"))


async def collect(watcher: FsWatcher, path: str) -> Batch:
    """The union of batches up to the first one mentioning ``path`` (bounded)."""
    union = Batch(paths=set(), overflow=False)
    with anyio.fail_after(WAIT):
        while path not in union.paths:
            batch = await watcher.next_batch()
            union.paths |= batch.paths
            union.complete |= batch.complete
    return union


def own_threads() -> int:
    """The inotify reader threads of this process (other tests' threads may come and go)."""
    return sum(1 for t in threading.enumerate() if isinstance(t, InotifyFD))


async def test_threads_and_inotify_instances_stay_bounded(base: str) -> None:
    before = own_threads()
    async with FsWatcher("native") as watcher:
        with_one = own_threads()
        assert with_one - before == 1  # the one reader thread
        directories = [os.path.join(base, f"d{n:04d}") for n in range(400)]
        for directory in directories:
            os.mkdir(directory)
            await watcher.add(directory)
        assert own_threads() == with_one
        assert all(watcher.armed(d) for d in directories)
        touch(os.path.join(directories[-1], "abort"))
        await wait_path(watcher, os.path.join(directories[-1], "abort"))
        for directory in directories:
            await watcher.remove(directory)
        assert watcher._by_wd == {}
    assert own_threads() == before


async def test_a_chat_directory_created_later_is_watched_at_once(base: str) -> None:
    """Directory, inbox and abort all appear after the watch: no rescan needed."""
    chat_dir = os.path.join(base, "later", "deeper")
    inbox = os.path.join(chat_dir, "a.inbox")
    async with FsWatcher("native") as watcher:
        await watcher.add(chat_dir)
        await watcher.add(inbox)
        assert not watcher.armed(chat_dir) and not watcher.armed(inbox)
        os.makedirs(inbox)
        await wait_path(watcher, inbox)  # armed and reported by the watcher itself
        assert watcher.armed(inbox) and watcher.armed(chat_dir)
        touch(os.path.join(inbox, "abort"))
        await wait_path(watcher, os.path.join(inbox, "abort"))
        shutil.rmtree(os.path.join(base, "later"))
        await wait_path(watcher, inbox)
        # The kernel's word that the old inbox's watch is gone can come after the
        # parent's report of its deletion; a new inbox may even reuse the inode.
        # Until then a file made in the new one goes unseen (the late word then
        # reports the inbox itself, so its listing finds the file): wait for it.
        for _ in range(500):  # bounded: 5 s
            if not any(r.path == inbox for regs in watcher._by_wd.values() for r in regs):
                break
            await anyio.sleep(0.01)
        else:
            pytest.fail("the deleted inbox's watch was never dropped")
        os.makedirs(inbox)  # re-created: armed again without any ensure()
        for _ in range(500):  # bounded: 5 s
            if watcher.armed(inbox):
                break
            await anyio.sleep(0.01)
        else:
            pytest.fail("the re-created directory was never armed")
        touch(os.path.join(inbox, "abort"))
        await wait_path(watcher, os.path.join(inbox, "abort"))


async def test_closed_and_renamed_files_are_reported_complete(base: str) -> None:
    async with FsWatcher("native") as watcher:
        await watcher.add(base)
        path = os.path.join(base, "abort")
        handle = open(path, "w")  # noqa: SIM115, ASYNC230 - kept open on purpose
        handle.write("half")
        handle.flush()
        batch = await collect(watcher, path)
        assert path not in batch.complete  # created, still open for writing
        handle.close()
        assert path in (await collect(watcher, path)).complete
        os.rename(path, os.path.join(base, "moved"))
        moved = os.path.join(base, "moved")
        assert moved in (await collect(watcher, moved)).complete


async def test_overflow_is_reported(base: str) -> None:
    async with FsWatcher("native") as watcher:
        watcher._deliver([f"/p/{i}" for i in range(MAX_PENDING_PATHS)])
        watcher._deliver(["/one/more"])
        batch = await watcher.next_batch()
        assert batch.overflow and not batch.paths
        watcher._deliver(["/again"])
        batch = await watcher.next_batch()
        assert batch.paths == {"/again"} and not batch.overflow


async def test_a_kernel_queue_overflow_keeps_the_reader_and_asks_for_a_rescan(base: str) -> None:
    """watchdog's own reader dispatches an overflow to every method it knows of.

    Its 7.1 release added ``on_events_lost``, which the hand-off lacked: the
    reader thread raised and ended, taking every watch with it.
    """
    async with FsWatcher("native") as watcher:
        await watcher.add(base)
        reader = watcher._fd
        assert reader is not None
        overflow = InotifyEvent(-1, InotifyConstants.IN_Q_OVERFLOW, 0, b"")  # type: ignore[arg-type]
        reader.handle_event(overflow)  # what the reader thread runs on the kernel's event
        with anyio.fail_after(WAIT):
            batch = await watcher.next_batch()
        assert batch.overflow
        assert reader.is_alive()
        touch(os.path.join(base, "after"))
        await wait_path(watcher, os.path.join(base, "after"))


async def test_every_watchdog_notification_is_answered_and_new_ones_rescan(base: str) -> None:
    async with FsWatcher("native") as watcher:
        handler = watcher._handler
        known = [name for name in dir(WatchCallback) if name.startswith("on_")]
        assert "on_event" in known and "on_queue_overflow" in known
        for name in known:
            assert callable(getattr(handler, name)), name
        handler.on_something_a_later_release_adds()  # type: ignore[attr-defined]
        with anyio.fail_after(WAIT):
            assert (await watcher.next_batch()).overflow
        with pytest.raises(AttributeError):
            handler.not_a_notification  # noqa: B018
