"""FsWatcher in process: real directories, real watchdog observers (native and polling)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import anyio
import pytest
from watchdog.events import FileCreatedEvent

from scoutd.watcher import MAX_PENDING_PATHS, FsWatcher

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


async def test_handler_errors_never_stop_watching(base: str) -> None:
    async with FsWatcher("native") as watcher:
        await watcher.add(base)
        handler = watcher._handler
        # runs in this thread here: a path that cannot be decoded is logged, not raised
        handler.dispatch(FileCreatedEvent(12345))  # type: ignore[arg-type]
        touch(os.path.join(base, "after"))
        await wait_path(watcher, os.path.join(base, "after"))


async def test_overflow_is_reported(base: str) -> None:
    async with FsWatcher("native") as watcher:
        watcher._deliver([f"/p/{i}" for i in range(MAX_PENDING_PATHS)])
        watcher._deliver(["/one/more"])
        batch = await watcher.next_batch()
        assert batch.overflow and not batch.paths
        watcher._deliver(["/again"])
        batch = await watcher.next_batch()
        assert batch.paths == {"/again"} and not batch.overflow
