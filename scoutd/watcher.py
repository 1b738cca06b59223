"""Directory watches on one inotify instance and one thread, whatever their number.

watchdog's observers give every watched directory its own emitter thread:
10,000 watched inboxes cost 10,000 threads, and a failure to start one
switched aborts off. Here all directories share one
:class:`watchdog.observers.inotify_c.InotifyFD` (one inotify instance, one
reader thread); the handler in that thread only hands ``(wd, mask, name)``
to the event loop (``loop.call_soon_threadsafe``), where the paths are
deduplicated into a pending set and :meth:`FsWatcher.next_batch` returns
them. ``watch_mode = "poll"`` lists the watched directories from one task
instead (file systems without inotify).

A directory that does not exist (yet) is *anchored*: its nearest existing
ancestor is watched, and when something appears there the directory is armed
and reported as changed, so an abort dropped in a chat directory created after
``session.open`` is seen at once, not at the next rescan. A watched directory
that is deleted, moved or replaced is re-armed (or anchored) the same way.

Failures fall back to the caller's periodic rescan: the inotify instance or
its thread cannot be created (instance limit, ``can't start new thread``), a
watch cannot be added (``ENOSPC``: watch limit), the reader thread died. Each
is logged at error level; :meth:`FsWatcher.ensure_all` (run by every rescan)
tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

__all__ = ["MAX_PENDING_PATHS", "POLL_INTERVAL", "Batch", "FsWatcher"]

log = logging.getLogger("scoutd.watcher")

# Paths waiting for the loop beyond this are dropped and the batch is flagged as an
# overflow: the consumer then rechecks everything it watches instead.
MAX_PENDING_PATHS = 10_000
# How often watch_mode = "poll" lists each watched directory.
POLL_INTERVAL = 0.1

try:  # Linux
    from watchdog.observers.inotify_c import InotifyConstants as _C
    from watchdog.observers.inotify_c import InotifyEvent, InotifyFD

    _MASK = (
        _C.IN_CREATE
        | _C.IN_DELETE
        | _C.IN_MOVED_FROM
        | _C.IN_MOVED_TO
        | _C.IN_CLOSE_WRITE
        | _C.IN_DELETE_SELF
        | _C.IN_MOVE_SELF
        | _C.IN_ONLYDIR
        | _C.IN_EXCL_UNLINK
    )
    # A writer closed the file, or it arrived by rename: it is complete.
    _COMPLETE = _C.IN_CLOSE_WRITE | _C.IN_MOVED_TO
    _SELF_GONE = _C.IN_DELETE_SELF | _C.IN_MOVE_SELF
except (ImportError, OSError, AttributeError):  # no inotify: poll instead
    InotifyFD = None  # type: ignore[assignment,misc]
    _MASK = _COMPLETE = _SELF_GONE = 0


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


@dataclass(slots=True)
class _Registration:
    """One directory added to the inotify instance: ``(wd, callback id)``."""

    path: str
    wd: int
    cid: int
    inode: tuple[int, int] | None


@dataclass(slots=True)
class _Watch:
    refs: int
    reg: _Registration | None = None  # the directory itself, or its anchor
    anchored: bool = False  # reg watches an ancestor: the directory is missing

    @property
    def armed(self) -> bool:
        return self.reg is not None and not self.anchored


class _Handoff:
    """Runs in the inotify reader thread: forward to the loop, never block."""

    def __init__(self, owner: FsWatcher) -> None:
        self._owner = owner

    def _hand(self, *args: Any) -> None:
        try:
            self._owner._loop.call_soon_threadsafe(*args)
        except RuntimeError:  # the loop is closed: the daemon is stopping
            pass
        except Exception:  # an exception here would end the reader thread
            log.exception("a watch event could not be handed to the event loop")

    def on_event(self, event: InotifyEvent) -> None:
        self._hand(self._owner._on_event, event.wd, event.mask, event.name)

    def on_watch_deleted(self, wd: int) -> None:
        self._hand(self._owner._on_gone, wd)

    def on_queue_overflow(self) -> None:
        self._hand(self._owner._on_overflow)


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


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
        self.mode: Literal["native", "poll"] = mode if InotifyFD is not None else "poll"
        self._poll_interval = poll_interval
        self._handler = _Handoff(self)
        self._fd: InotifyFD | None = None
        self._ids = itertools.count(1)
        self._watches: dict[str, _Watch] = {}
        self._by_wd: dict[int, dict[str, _Registration]] = {}  # wd -> directory -> reg
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
        assert InotifyFD is not None
        try:
            reader = InotifyFD()
        except OSError as exc:
            log.error("native file watching unavailable (%s): periodic rescans only", exc)
            return False
        reader.daemon = True
        try:
            reader.start()
        except RuntimeError as exc:  # can't start new thread
            log.error("native file watching unavailable (%s): periodic rescans only", exc)
            with _quiet():
                reader.close()
            return False
        self._fd = reader
        return True

    @staticmethod
    def _stop_reader(reader: InotifyFD) -> None:
        with _quiet():
            reader.stop()
        reader.join(timeout=5)

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
        for directory in list(self._by_wd.get(wd, ())):
            watch = self._watches.get(directory)
            if watch is None:
                continue
            if watch.anchored:  # maybe the next step towards ours appeared in the ancestor
                reg = watch.reg
                step = os.path.join(reg.path, os.fsdecode(name)) if reg and name else None
                if step is None or directory == step or directory.startswith(step + os.sep):
                    self._queue_rearm(directory)
            else:
                if name:
                    child = os.path.join(directory, os.fsdecode(name))
                    self._deliver([child], complete=bool(mask & _COMPLETE))
                if mask & _SELF_GONE:
                    self._deliver([directory])
                    self._queue_rearm(directory)

    def _on_gone(self, wd: int) -> None:
        """The kernel dropped watch ``wd`` (its directory is gone): re-arm its users."""
        for directory, reg in self._by_wd.pop(wd, {}).items():
            watch = self._watches.get(directory)
            if watch is not None and watch.reg is reg:
                watch.reg = None
                if not watch.anchored:
                    self._deliver([directory])
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
            watch = self._watches[directory] = _Watch(refs=1)
            if self.mode == "poll":
                self._snapshots[directory] = await anyio.to_thread.run_sync(_listing, directory)
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
            stale = await anyio.to_thread.run_sync(_stale, watches)
            for directory in stale:
                await self._arm(directory, self._watches[directory])

    async def _healthy(self, directory: str, watch: _Watch) -> bool:
        if not watch.armed or not self._reader_ok():
            return False
        return not await anyio.to_thread.run_sync(_stale, [(directory, watch)])

    async def _restart_reader(self) -> None:
        old, self._fd = self._fd, None
        if old is not None:
            log.error("the file watch thread ended: restarting it")
            await anyio.to_thread.run_sync(self._stop_reader, old)
        self._by_wd.clear()
        for watch in self._watches.values():
            watch.reg, watch.anchored = None, False
        if await anyio.to_thread.run_sync(self._start_reader):
            for directory, watch in list(self._watches.items()):
                await self._arm(directory, watch)

    async def _rearm_loop(self) -> None:
        while True:
            await self._rearm_wakeup.wait()
            self._rearm_wakeup = anyio.Event()
            async with self._lock:
                queued, self._rearm = self._rearm, set()
                for directory in sorted(queued):
                    watch = self._watches.get(directory)
                    if watch is not None and not await self._healthy(directory, watch):
                        await self._arm(directory, watch)
                        if watch.armed:  # it appeared: what it holds may be news
                            self._deliver([directory])

    async def _arm(self, directory: str, watch: _Watch) -> None:
        await self._disarm(directory, watch)
        if self._fd is None:
            return
        found = await anyio.to_thread.run_sync(self._add_nearest, directory)
        if found is None:
            return
        watch.reg, watch.anchored = found, found.path != directory
        self._by_wd.setdefault(found.wd, {})[directory] = found

    async def _disarm(self, directory: str, watch: _Watch) -> None:
        reg, watch.reg, watch.anchored = watch.reg, None, False
        if reg is None:
            return
        users = self._by_wd.get(reg.wd)
        if users is not None and users.get(directory) is reg:
            del users[directory]
            if not users:
                del self._by_wd[reg.wd]
        reader = self._fd
        if reader is not None:
            await anyio.to_thread.run_sync(_remove_callback, reader, reg)

    # --- worker-thread side ----------------------------------------------------------

    def _add_nearest(self, directory: str) -> _Registration | None:
        """Watch ``directory``, else its nearest existing ancestor; None on failure."""
        reader = self._fd
        path = directory
        while reader is not None:
            cid = next(self._ids)
            try:
                wd = reader.add_callback(os.fsencode(path), _MASK, self._handler, cid)  # type: ignore[arg-type]
            except (FileNotFoundError, NotADirectoryError):
                parent = os.path.dirname(path)
                if parent == path:
                    return None
                path = parent
                continue
            except OSError as exc:
                log.error("cannot watch %r (%s): periodic rescans cover it", path, exc)
                return None
            reg = _Registration(path=path, wd=wd, cid=cid, inode=_inode(path))
            if wd < 0:  # watchdog swallows EACCES and returns -1
                _remove_callback(reader, reg)
                log.error("cannot watch %r (permission denied): periodic rescans cover it", path)
                return None
            return reg
        return None

    # --- poll mode -------------------------------------------------------------------

    async def _poll_loop(self) -> None:
        while True:
            await anyio.sleep(self._poll_interval)
            async with self._lock:
                before = {d: self._snapshots.get(d) for d in self._watches}
                after, changed = await anyio.to_thread.run_sync(_poll, before)
                for directory, listing in after.items():
                    if directory in self._watches:
                        self._snapshots[directory] = listing
            if changed:
                self._deliver(changed)


def _stale(watches: list[tuple[str, _Watch]]) -> list[str]:
    """The directories whose watch needs arming again.

    Unarmed (a failure to retry), armed on an inode that is no longer the
    directory's, or anchored while the directory exists (its appearance was
    missed) or on an ancestor that was replaced. A directory still missing
    under a sound anchor is not stale: re-anchoring it at every rescan cost
    a thread round trip per missing inbox.
    """
    stale = []
    for directory, watch in watches:
        reg = watch.reg
        if reg is None:
            stale.append(directory)
        elif watch.anchored:
            if os.path.isdir(directory) or _inode(reg.path) != reg.inode:
                stale.append(directory)
        elif _inode(directory) != reg.inode:
            stale.append(directory)
    return stale


def _remove_callback(reader: InotifyFD, reg: _Registration) -> None:
    with _quiet():
        reader.remove_callbacks([(reg.wd, reg.cid)])  # type: ignore[list-item]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Suppress and log (debug) an exception of watch bookkeeping."""
    try:
        yield
    except Exception as exc:
        log.debug("watch bookkeeping: %r", exc)


def _listing(directory: str) -> dict[str, tuple[int, int, int]] | None:
    """``name -> (inode, size, mtime)`` of ``directory``; None when it cannot be listed."""
    try:
        with os.scandir(directory) as entries:
            out: dict[str, tuple[int, int, int]] = {}
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                out[entry.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
            return out
    except OSError:
        return None


def _poll(
    before: dict[str, dict[str, tuple[int, int, int]] | None],
) -> tuple[dict[str, dict[str, tuple[int, int, int]] | None], list[str]]:
    """List every directory once; return the new listings and the changed paths."""
    after: dict[str, dict[str, tuple[int, int, int]] | None] = {}
    changed: list[str] = []
    for directory, old in before.items():
        new = after[directory] = _listing(directory)
        if (old is None) != (new is None):
            changed.append(directory)
        old, new = old or {}, new or {}
        changed.extend(
            os.path.join(directory, name)
            for name in old.keys() | new.keys()
            if old.get(name) != new.get(name)
        )
    return after, changed
