"""Directory watches on one inotify instance and one thread, whatever their number.

watchdog's observers run a thread per watched directory (10,000 inboxes,
10,000 threads). Here all directories share one watchdog ``InotifyFD`` (one
inotify instance, one reader thread) whose handler
(:class:`~scoutd.watch_reader.Handoff`) only hands ``(wd, mask, name)`` to the
event loop (``call_soon_threadsafe``); :meth:`FsWatcher.next_batch`
returns the deduplicated paths. ``watch_mode = "poll"`` lists the watched
directories from one task instead (file systems without inotify).

A directory that does not exist (yet) is *anchored*: its nearest existing
ancestor is watched, and when something appears there the directory is armed
and reported as changed, so an abort dropped in a chat directory created after
``session.open`` is seen at once, not at the next rescan. A watched directory
deleted, moved or replaced (by a symlink and back too) is re-armed the same way,
and the watched directories beneath it are checked with it (a move tells them
nothing). A watch is added through the directory held open, so the inode
recorded for it is the one watched, however fast the path is swapped.

Failures (no inotify instance or thread: instance limit, ``can't start new
thread``; a watch refused: ``ENOSPC``; the reader thread died) are logged at
error level and left to the caller's periodic rescan, whose
:meth:`FsWatcher.ensure_all` tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import anyio

from .watch_reader import COMPLETE, MASK, SELF_GONE, Handoff, Reader
from .watch_state import (
    GONE,
    Registration,
    Watch,
    beneath,
    inode_of,
    listing,
    nearest_existing,
    next_step,
    pinned,
    poll,
    stale,
)

__all__ = ["MAX_PENDING_PATHS", "POLL_INTERVAL", "Batch", "FsWatcher"]

log = logging.getLogger("scoutd.watcher")

# Paths waiting for the loop beyond this are dropped and the batch is flagged as an
# overflow: the consumer then rechecks everything it watches instead.
MAX_PENDING_PATHS = 10_000
# How often watch_mode = "poll" lists each watched directory.
POLL_INTERVAL = 0.1


@dataclass(slots=True)
class Batch:
    """Paths that changed since the last batch; ``overflow``: some were lost.

    ``complete``: the paths of ``paths`` whose writer closed them or that
    arrived by rename (known with inotify only): no need to wait for them to
    settle.
    """

    paths: set[str]
    overflow: bool
    complete: set[str] = field(default_factory=set)


class FsWatcher:
    """Reference-counted, non-recursive watches on directories.

    Use as an async context manager inside the event loop that consumes the
    batches. ``add``/``remove`` count references; a missing directory is
    anchored to its nearest existing ancestor and armed when it appears.

    Resource handling: the inotify instance and its reader thread (or the
    poll task) live from enter to exit; watches are dropped with them.
    Error handling: see the module docstring: every failure leaves the
    periodic rescan in charge, and :meth:`ensure_all` retries.
    """

    def __init__(
        self, mode: Literal["native", "poll"] = "native", *, poll_interval: float = POLL_INTERVAL
    ) -> None:
        self.mode: Literal["native", "poll"] = mode if Reader is not None else "poll"
        if self.mode != mode:
            log.warning("no inotify reader here (not Linux?): polling the watched directories")
        self._poll_interval = poll_interval
        self._handler = Handoff(
            lambda: self._loop, self._on_event, self._on_gone, self._on_overflow
        )
        self._fd: Reader | None = None
        self._ids = itertools.count(1)
        self._watches: dict[str, Watch] = {}
        self._regs: dict[str, Registration] = {}  # watched path -> its registration
        self._by_wd: dict[int, list[Registration]] = {}  # one per path (aliases share a wd)
        self._snapshots: dict[str, dict[str, tuple[int, int, int]] | None] = {}
        self._pending: set[str] = set()
        self._complete: set[str] = set()
        self._overflow = False
        self._wakeup = anyio.Event()
        self._rearm: set[str] = set()
        self._rearm_wakeup = anyio.Event()
        self._lock = anyio.Lock()
        self._loop: asyncio.AbstractEventLoop
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> FsWatcher:
        self._loop = asyncio.get_running_loop()
        if self.mode == "native":
            await anyio.to_thread.run_sync(self._start_reader)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._poll_loop if self.mode == "poll" else self._rearm_loop)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self._tg = None
        reader, self._fd = self._fd, None
        if reader is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._stop_reader, reader)

    # --- the inotify instance --------------------------------------------------------

    def _start_reader(self) -> bool:
        """Create the inotify instance and its reader thread; False (logged) if impossible."""
        assert Reader is not None
        reader = None
        try:
            reader = Reader()
            reader.daemon = True
            reader.start()  # RuntimeError: can't start new thread
        except (OSError, RuntimeError) as exc:
            log.error("native file watching unavailable (%s): periodic rescans only", exc)
            if reader is not None:
                with _quiet():
                    reader.close()
                with _quiet():
                    reader.release()
            return False
        self._fd = reader
        return True

    @staticmethod
    def _stop_reader(reader: Reader) -> None:
        with _quiet():
            reader.stop()
        reader.join(timeout=5)
        with _quiet():
            reader.release()  # what its thread did not close (watch_reader.Reader)

    def _reader_ok(self) -> bool:
        return self._fd is not None and self._fd.is_alive()

    # --- loop side: events -----------------------------------------------------------

    def _deliver(self, paths: Iterable[str], *, complete: bool = False) -> None:
        paths = list(paths)
        if len(self._pending) + len(paths) > MAX_PENDING_PATHS:
            self._pending.clear()
            self._complete.clear()
            self._overflow = True
        else:
            self._pending.update(paths)
            if complete:
                self._complete.update(paths)
        self._wakeup.set()

    def _on_event(self, wd: int, mask: int, name: bytes) -> None:
        for reg in self._by_wd.get(wd, ()):
            if name:
                child = os.path.join(reg.path, os.fsdecode(name))
                if reg.direct:
                    self._deliver([child], complete=bool(mask & COMPLETE))
                for directory in reg.waiting.get(child, ()):  # the next step appeared (or went)
                    self._queue_rearm(directory)
                if child in self._watches:  # made, removed, swapped: a symlink's target is mute
                    self._queue_rearm(child)
            if mask & SELF_GONE:
                self._reanchor(reg)

    def _on_gone(self, wd: int) -> None:
        """The kernel dropped watch ``wd`` (its directory is gone): re-arm its users."""
        for reg in self._by_wd.pop(wd, []):
            reg.dead = True
            self._reanchor(reg)

    def _reanchor(self, reg: Registration) -> None:
        """Re-arm every user of ``reg``: its directory moved, went or was replaced."""
        if self._regs.get(reg.path) is reg:  # retired: a new arm must watch afresh
            del self._regs[reg.path]
        if reg.direct:
            self._deliver([reg.path])
            self._queue_rearm(reg.path)
        for directories in reg.waiting.values():
            for directory in directories:
                self._queue_rearm(directory)

    def _on_overflow(self) -> None:
        self._overflow = True
        self._wakeup.set()

    def _queue_rearm(self, directory: str) -> None:
        self._rearm.add(directory)
        self._rearm_wakeup.set()

    async def next_batch(self) -> Batch:
        """Wait for changed paths (deduplicated since the previous batch)."""
        while not self._pending and not self._overflow:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
        batch = Batch(paths=self._pending, overflow=self._overflow, complete=self._complete)
        self._pending, self._complete, self._overflow = set(), set(), False
        return batch

    @property
    def watched(self) -> list[str]:
        """Directories with at least one reference (armed or not)."""
        return list(self._watches)

    def armed(self, directory: str) -> bool:
        """Whether events of ``directory`` itself are reported (poll: it exists)."""
        watch = self._watches.get(directory)
        if watch is None:
            return False
        if self.mode == "poll":
            return self._snapshots.get(directory) is not None
        return watch.armed

    # --- loop side: references -------------------------------------------------------

    async def add(self, directory: str) -> None:
        """Take a reference on ``directory``; arm its watch (or its anchor's)."""
        async with self._lock:
            watch = self._watches.get(directory)
            if watch is not None:
                watch.refs += 1
                return
            watch = self._watches[directory] = Watch(refs=1)
            if self.mode == "poll":
                self._snapshots[directory] = await anyio.to_thread.run_sync(listing, directory)
            else:
                await self._arm(directory, watch)

    async def remove(self, directory: str) -> None:
        """Drop a reference; the last one removes the watch."""
        async with self._lock:
            watch = self._watches.get(directory)
            if watch is None:
                return
            watch.refs -= 1
            if watch.refs > 0:
                return
            del self._watches[directory]
            self._snapshots.pop(directory, None)
            await self._disarm(directory, watch)

    async def ensure(self, directory: str, *, force: bool = False) -> bool:
        """Re-arm ``directory`` if it is unarmed, anchored, dead or re-created.

        ``force`` re-arms unconditionally. Returns whether it is armed.
        """
        async with self._lock:
            watch = self._watches.get(directory)
            if watch is None:
                return False
            if self.mode == "poll":
                return self.armed(directory)
            if force or not await self._healthy(directory, watch):
                await self._arm(directory, watch)
            return watch.armed

    async def ensure_all(self, directories: Iterable[str]) -> None:
        """:meth:`ensure` every referenced directory of ``directories`` (rescans).

        Restarts a dead or missing inotify instance first. One worker-thread
        call checks all directories; only those needing it are re-armed.
        """
        if self.mode == "poll":
            return
        async with self._lock:
            if not self._reader_ok():
                await self._restart_reader()
            watches = [(d, w) for d in directories if (w := self._watches.get(d)) is not None]
            for directory in await anyio.to_thread.run_sync(stale, watches):
                await self._arm(directory, self._watches[directory])

    async def _healthy(self, directory: str, watch: Watch) -> bool:
        if not watch.armed or not self._reader_ok():
            return False
        return not await anyio.to_thread.run_sync(stale, [(directory, watch)])

    async def _restart_reader(self) -> None:
        old, self._fd = self._fd, None
        if old is not None:
            log.error("the file watch thread ended: restarting it")
            await anyio.to_thread.run_sync(self._stop_reader, old)
        self._by_wd.clear()
        self._regs.clear()
        for watch in self._watches.values():
            watch.reg, watch.anchored = None, False
        if await anyio.to_thread.run_sync(self._start_reader):
            for directory, watch in list(self._watches.items()):
                await self._arm(directory, watch)

    async def _rearm_loop(self) -> None:
        """Re-arm the directories events said moved, went or appeared.

        Runs in the watcher's task group, whose scope encloses its owner's code:
        an exception here must not end it, so it is logged; the rescan repairs.
        """
        while True:
            await self._rearm_wakeup.wait()
            self._rearm_wakeup = anyio.Event()
            try:
                await self._rearm_queued()
            except Exception:
                log.exception("re-arming watches failed; the next rescan retries")

    async def _rearm_queued(self) -> None:
        async with self._lock:
            queued, self._rearm = self._rearm, set()
            moved: set[str] = set()
            for directory in sorted(queued):
                watch = self._watches.get(directory)
                if watch is not None and not await self._healthy(directory, watch):
                    if watch.reg is not None and not watch.anchored:
                        moved.add(directory)  # moved, gone or replaced: see below
                    await self._arm(directory, watch)
                    if watch.armed:  # it appeared: what it holds may be news
                        self._deliver([directory])
            # A directory moved takes its watched subdirectories along with no event
            # of theirs: they are checked too (else one made anew in its place before
            # it was watched again stayed unwatched until the rescan).
            for directory in beneath(moved, self._watches):
                self._queue_rearm(directory)

    async def _arm(self, directory: str, watch: Watch) -> None:
        """Watch ``directory``, else anchor it to its nearest existing ancestor."""
        await self._disarm(directory, watch)
        for _ in range(8):  # bounded: the tree may change while we look
            if self._fd is None:
                return
            # one thread round trip: find the path to watch, and add it unless known
            located = await anyio.to_thread.run_sync(self._locate, directory)
            if located is None:
                return
            path, found = located
            if found is GONE:
                continue
            reg = self._regs.get(path)
            if isinstance(found, Registration):
                if reg is not None and not reg.dead:  # registered meanwhile: share it
                    await anyio.to_thread.run_sync(_remove_callback, self._fd, found)
                else:
                    reg = self._regs[path] = found
                    self._by_wd.setdefault(reg.wd, []).append(reg)
            if reg is None or reg.dead:
                continue  # retired while we looked: look again
            watch.reg, watch.anchored = reg, path != directory
            if watch.anchored:
                reg.waiting.setdefault(next_step(path, directory), set()).add(directory)
            else:
                reg.direct = True
            return

    async def _disarm(self, directory: str, watch: Watch) -> None:
        reg, watch.reg = watch.reg, None
        anchored, watch.anchored = watch.anchored, False
        if reg is None:
            return
        if anchored:
            step = next_step(reg.path, directory)
            waiting = reg.waiting.get(step)
            if waiting is not None:
                waiting.discard(directory)
                if not waiting:
                    del reg.waiting[step]
        else:
            reg.direct = False
        if reg.used():
            return
        if self._regs.get(reg.path) is reg:
            del self._regs[reg.path]
        users = self._by_wd.get(reg.wd)
        if users is not None and reg in users:
            users.remove(reg)
            if not users:
                del self._by_wd[reg.wd]
        reader = self._fd
        if reader is not None and not reg.dead:
            await anyio.to_thread.run_sync(_remove_callback, reader, reg)

    # --- worker-thread side ----------------------------------------------------------

    def _locate(self, directory: str) -> tuple[str, Registration | object | None] | None:
        """The path to watch for ``directory`` and, unless already watched, its new watch.

        None: nothing to watch (no ancestor exists, or adding failed: logged).
        The second item is None when the path is already registered (read
        without the loop's lock: the loop checks again), or GONE.
        """
        path = nearest_existing(directory)
        if path is None:
            return None
        known = self._regs.get(path)
        if known is not None and not known.dead:
            return path, None
        found = self._add(path)
        return None if found is None else (path, found)

    def _add(self, path: str) -> Registration | object | None:
        """Add ``path`` to the inotify instance: its registration, GONE, or None (logged)."""
        reader = self._fd
        if reader is None:
            return None
        cid = next(self._ids)
        try:
            with pinned(path) as pin:  # the inode recorded is the one watched (watch_state)
                wd = reader.add_callback(os.fsencode(pin.name), MASK, self._handler, cid)  # type: ignore[arg-type]
                inode = pin.inode if pin.exact else inode_of(path)
        except (FileNotFoundError, NotADirectoryError):
            return GONE
        except OSError as exc:
            log.error("cannot watch %r (%s): periodic rescans cover it", path, exc)
            return None
        reg = Registration(path=path, wd=wd, cid=cid, inode=inode)
        if wd >= 0 and pin.inode is not None and inode != pin.inode:  # swapped meanwhile
            _remove_callback(reader, reg)
            return GONE
        if wd < 0:  # watchdog swallows EACCES and returns -1
            _remove_callback(reader, reg)
            log.error("cannot watch %r (permission denied): periodic rescans cover it", path)
            return None
        return reg

    # --- poll mode -------------------------------------------------------------------

    async def _poll_loop(self) -> None:
        """List every watched directory each poll interval (``watch_mode = "poll"``)."""
        while True:
            await anyio.sleep(self._poll_interval)
            try:
                async with self._lock:
                    before = {d: self._snapshots.get(d) for d in self._watches}
                    after, changed = await anyio.to_thread.run_sync(poll, before)
                    for directory, entries in after.items():
                        if directory in self._watches:
                            self._snapshots[directory] = entries
            except Exception:  # like _rearm_loop: never end the owner's scope
                log.exception("polling the watched directories failed")
                continue
            if changed:
                self._deliver(changed)


def _remove_callback(reader: Reader, reg: Registration) -> None:
    with _quiet():
        reader.remove_callbacks([(reg.wd, reg.cid)])  # type: ignore[list-item]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Suppress and log (debug) an exception of watch bookkeeping."""
    try:
        yield
    except Exception as exc:
        log.debug("watch bookkeeping: %r", exc)
