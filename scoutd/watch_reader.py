"""watchdog's inotify reader, as the watcher drives it, and the hand-off to the loop.

:class:`~scoutd.watcher.FsWatcher` puts every watched directory on one
watchdog ``InotifyFD`` (one inotify instance, one reader thread). The reader
calls its callbacks' methods by name from its thread; :class:`Handoff`
answers each and only hands the event to the event loop
(``call_soon_threadsafe``), never blocking and never raising there: an
exception in the reader thread ends it, and every watch with it until the
next rescan.

The names come from watchdog's ``WatchCallback``: ``InotifyFD`` since 7.0,
the queue-overflow notices since 7.1 (``on_queue_overflow``, then
``on_events_lost``). A notice a later release adds is taken as lost events
(the watcher rechecks every watch) rather than left to raise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["COMPLETE", "MASK", "SELF_GONE", "Handoff", "InotifyEvent", "InotifyFD", "Reader"]

log = logging.getLogger("scoutd.watcher")

try:  # Linux
    from watchdog.observers.inotify_c import InotifyConstants as _C
    from watchdog.observers.inotify_c import InotifyEvent, InotifyFD

    MASK = (
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
    COMPLETE = _C.IN_CLOSE_WRITE | _C.IN_MOVED_TO
    SELF_GONE = _C.IN_DELETE_SELF | _C.IN_MOVE_SELF

    class Reader(InotifyFD):
        """watchdog's ``InotifyFD``, whose descriptors end when it is stopped, however
        its thread ended.

        ``InotifyFD`` leaves its inotify descriptor and wake-up pipe to its thread to
        close when it is closed during a read. Stopped before its thread's first
        read (a daemon stopped just after it started, on a loaded machine), or after
        its thread ended on an error, nothing closed them: three descriptors stayed
        open for good each time (docs/RELIABILITY.md, rule 22). :meth:`release`
        closes them once the thread is gone.
        """

        _released = False

        def _close_resources(self) -> None:
            self._released = True
            super()._close_resources()

        def release(self) -> None:
            """Close the descriptors if the thread has ended (or never ran) without."""
            with self._lock:
                if self._closed and not self._released and not self.is_alive():
                    self._close_resources()

except (ImportError, OSError, AttributeError):  # no inotify: the watcher polls instead
    InotifyFD = None  # type: ignore[assignment,misc]
    Reader = None  # type: ignore[assignment,misc]
    InotifyEvent = None  # type: ignore[assignment,misc]
    MASK = COMPLETE = SELF_GONE = 0


class Handoff:
    """Runs in the inotify reader thread: forward to the loop, never block, never raise.

    ``loop`` gives the event loop to hand to (read at each event); ``event``,
    ``gone`` and ``overflow`` run there: a directory's event ``(wd, mask,
    name)``, a watch the kernel dropped ``(wd)``, events lost.
    """

    def __init__(
        self,
        loop: Callable[[], asyncio.AbstractEventLoop],
        event: Callable[[int, int, bytes], None],
        gone: Callable[[int], None],
        overflow: Callable[[], None],
    ) -> None:
        self._loop, self._event, self._gone, self._overflow = loop, event, gone, overflow

    def _hand(self, *args: Any) -> None:
        try:
            self._loop().call_soon_threadsafe(*args)
        except RuntimeError:  # the loop is closed: the daemon is stopping
            pass
        except Exception:  # an exception here would end the reader thread
            log.exception("a watch event could not be handed to the event loop")

    def on_event(self, event: InotifyEvent) -> None:
        self._hand(self._event, event.wd, event.mask, event.name)

    def on_watch_deleted(self, wd: int) -> None:
        self._hand(self._gone, wd)

    def on_queue_overflow(self) -> None:
        self._hand(self._overflow)

    def on_events_lost(self) -> None:  # watchdog 7.1.1: after every on_queue_overflow
        self._hand(self._overflow)

    def __getattr__(self, name: str) -> Any:
        """A notice a later watchdog added: taken as lost events (a rescan).

        A name missing here raised in the reader thread and ended it (watchdog
        7.1.1 added ``on_events_lost``).
        """
        if not name.startswith("on_"):
            raise AttributeError(name)

        def unknown(*args: object) -> None:
            log.warning("unknown file watch notice %s: rechecking every watch", name)
            self._hand(self._overflow)

        return unknown
