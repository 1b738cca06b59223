"""Directory watches shared by reference count, with paths handed to the event loop.

watchdog runs its observers in their own threads. The handler here does one
thing in that thread: it hands the event's paths to the event loop
(``loop.call_soon_threadsafe``) where they are deduplicated into a pending
set. The loop side (:meth:`FsWatcher.next_batch`) decides what the paths mean.
Nothing that happens there can kill the observer thread, and nothing the
handler does can block it.

Missed events are expected (queue overflow, network file systems, a watched
directory deleted and re-created): the watcher reports an *overflow* batch
when its pending set grows too large, and :meth:`FsWatcher.ensure` re-arms a
watch whose directory was re-created; the caller rescans periodically.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import anyio
from watchdog.events import (
    EVENT_TYPE_CLOSED_NO_WRITE,
    EVENT_TYPE_OPENED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver

__all__ = ["MAX_PENDING_PATHS", "MOVE_PAIRING_DELAY", "POLL_INTERVAL", "Batch", "FsWatcher"]

log = logging.getLogger("scoutd.watcher")

# Paths waiting for the loop beyond this are dropped and the batch is flagged as an
# overflow: the consumer then rechecks everything it watches instead.
MAX_PENDING_PATHS = 10_000
# How often the polling observer (watch_mode = "poll") lists each watched directory.
# Short, because a poll is the only way some file systems report an abort at all, and
# listing a handful of inbox directories ten times a second costs next to nothing.
POLL_INTERVAL = 0.1
# watchdog's inotify emitter holds every IN_MOVED_FROM for up to 0.5 s to pair it with
# its IN_MOVED_TO, and its reader sleeps out that delay even when the pair arrives at
# once. Aborts arrive by rename, so that delay was the push latency (p90 ~500 ms
# measured). The kernel queues both halves of a rename together: 5 ms is plenty to
# pair them, and an unpaired half still reports the path we need.
MOVE_PAIRING_DELAY = 0.005


def _shorten_move_pairing() -> None:
    """Lower the inotify move-pairing delay (see MOVE_PAIRING_DELAY); no-op elsewhere."""
    try:
        from watchdog.observers.inotify_move_event_grouper import InotifyMoveEventGrouper
    except ImportError:  # not Linux, or a watchdog without the grouper
        return
    InotifyMoveEventGrouper.delay = min(InotifyMoveEventGrouper.delay, MOVE_PAIRING_DELAY)


# Reading a file changes nothing: without this filter, reading the config file on reload
# would be reported as a change of the config file, and trigger the next reload.
_READ_ONLY_EVENTS = frozenset({EVENT_TYPE_OPENED, EVENT_TYPE_CLOSED_NO_WRITE})


@dataclass(slots=True)
class Batch:
    """Paths that changed since the last batch; ``overflow``: some were lost."""

    paths: set[str]
    overflow: bool


@dataclass(slots=True)
class _Watch:
    refs: int
    handle: ObservedWatch | None = None
    inode: tuple[int, int] | None = None


class _Handoff(FileSystemEventHandler):
    """Runs in watchdog's thread: forward paths to the loop, never raise."""

    def __init__(self, owner: FsWatcher) -> None:
        self._owner = owner

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _READ_ONLY_EVENTS:
            return
        try:
            paths = [os.fsdecode(p) for p in (event.src_path, event.dest_path) if p]
            self._owner._loop.call_soon_threadsafe(self._owner._deliver, paths)
        except RuntimeError:  # the loop is closed: the daemon is stopping
            pass
        except Exception:  # an exception here would end the observer's thread
            log.exception("watch event %r could not be handed to the event loop", event)

    def dispatch(self, event: FileSystemEvent) -> None:
        self.on_any_event(event)


class FsWatcher:
    """Reference-counted, non-recursive watches on directories.

    Use as an async context manager inside the event loop that consumes the
    batches. ``add``/``remove`` count references; a directory that does not
    exist yet is remembered and armed by a later :meth:`ensure`.

    Resource handling: the observer thread is started on enter and stopped
    (and joined, in a worker thread) on exit; watches are dropped with it.
    Error handling: scheduling failures (missing directory, inotify limits)
    are logged at debug level and leave the watch unarmed; the caller's
    periodic rescan covers it.
    """

    def __init__(
        self, mode: Literal["native", "poll"] = "native", *, poll_interval: float = POLL_INTERVAL
    ) -> None:
        self.mode = mode
        if mode == "poll":
            self._observer: BaseObserver = PollingObserver(timeout=poll_interval)
        else:
            _shorten_move_pairing()
            self._observer = Observer()
        self._handler = _Handoff(self)
        self._watches: dict[str, _Watch] = {}
        self._pending: set[str] = set()
        self._overflow = False
        self._wakeup = anyio.Event()
        self._lock = anyio.Lock()
        self._loop: asyncio.AbstractEventLoop

    async def __aenter__(self) -> FsWatcher:
        self._loop = asyncio.get_running_loop()
        self._observer.daemon = True
        self._observer.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        observer = self._observer
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._stop_observer, observer)

    @staticmethod
    def _stop_observer(observer: BaseObserver) -> None:
        observer.stop()
        observer.join(timeout=5)

    # --- loop side -------------------------------------------------------------------

    def _deliver(self, paths: list[str]) -> None:
        if len(self._pending) + len(paths) > MAX_PENDING_PATHS:
            self._pending.clear()
            self._overflow = True
        else:
            self._pending.update(paths)
        self._wakeup.set()

    async def next_batch(self) -> Batch:
        """Wait for changed paths (deduplicated since the previous batch)."""
        while not self._pending and not self._overflow:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
        batch = Batch(paths=self._pending, overflow=self._overflow)
        self._pending, self._overflow = set(), False
        return batch

    @property
    def watched(self) -> list[str]:
        """Directories with at least one reference (armed or not)."""
        return list(self._watches)

    def armed(self, directory: str) -> bool:
        watch = self._watches.get(directory)
        return watch is not None and watch.handle is not None

    async def add(self, directory: str) -> None:
        """Take a reference on ``directory`` and arm its watch if it exists."""
        async with self._lock:
            watch = self._watches.get(directory)
            if watch is not None:
                watch.refs += 1
                return
            watch = self._watches[directory] = _Watch(refs=1)
            await anyio.to_thread.run_sync(self._arm, directory, watch)

    async def remove(self, directory: str) -> None:
        """Drop a reference; the last one unschedules the watch."""
        async with self._lock:
            watch = self._watches.get(directory)
            if watch is None:
                return
            watch.refs -= 1
            if watch.refs > 0:
                return
            del self._watches[directory]
            await anyio.to_thread.run_sync(self._disarm, watch)

    async def ensure(self, directory: str, *, force: bool = False) -> bool:
        """Re-arm the watch of ``directory`` if it is unarmed, dead or re-created.

        ``force`` re-arms unconditionally (the directory was just created: its
        inode number may be a recycled one). Returns whether the watch is armed.
        """
        async with self._lock:
            watch = self._watches.get(directory)
            if watch is None:
                return False
            return await anyio.to_thread.run_sync(self._rearm, directory, watch, force)

    async def ensure_all(self, directories: Iterable[str]) -> None:
        """:meth:`ensure` every directory of ``directories`` that has a reference.

        One worker-thread call for all of them: the periodic rescan of thousands
        of watched inboxes must not cost a thread round trip per directory.
        """
        async with self._lock:
            watches = [(d, w) for d in directories if (w := self._watches.get(d)) is not None]
            if watches:
                await anyio.to_thread.run_sync(self._rearm_all, watches)

    # --- worker-thread side ----------------------------------------------------------

    def _inode(self, directory: str) -> tuple[int, int] | None:
        try:
            st = os.stat(directory)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _arm(self, directory: str, watch: _Watch) -> None:
        inode = self._inode(directory)
        if inode is None:
            return
        try:
            watch.handle = self._observer.schedule(self._handler, directory, recursive=False)
            watch.inode = inode
        except OSError as exc:
            log.debug("cannot watch %s yet: %s", directory, exc)

    def _disarm(self, watch: _Watch) -> None:
        handle, watch.handle, watch.inode = watch.handle, None, None
        if handle is None:
            return
        try:
            self._observer.unschedule(handle)
        except (KeyError, OSError) as exc:  # the emitter already ended with its directory
            log.debug("unschedule %s: %r", handle.path, exc)

    def _live_handles(self) -> set[ObservedWatch]:
        """The watches whose emitter thread is still running."""
        return {e.watch for e in list(self._observer.emitters) if e.is_alive()}

    def _rearm(
        self, directory: str, watch: _Watch, force: bool, live: set[ObservedWatch] | None = None
    ) -> bool:
        inode = self._inode(directory)
        if (
            watch.handle is not None
            and not force
            and inode is not None
            and inode == watch.inode
            and watch.handle in (self._live_handles() if live is None else live)
        ):
            return True
        self._disarm(watch)
        self._arm(directory, watch)
        return watch.handle is not None

    def _rearm_all(self, watches: list[tuple[str, _Watch]]) -> None:
        live = self._live_handles()
        for directory, watch in watches:
            self._rearm(directory, watch, False, live)
