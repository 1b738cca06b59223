"""The inotify reader's descriptors end when the watcher stops (docs/RELIABILITY.md, rule 22).

watchdog's ``InotifyFD`` leaves its inotify descriptor and wake-up pipe to its
own thread to close. A thread that had not read yet when the reader was
stopped (on a loaded machine, a daemon stopped just after it started) never
closed them: three descriptors each time. The thread is held back here until
the stop, which a loaded machine does by chance.

The reader thread hands each notice to the event loop (:class:`Handoff`): every
notice with what it says, a notice a later watchdog adds as lost events, and
never an exception, which would end the thread and every watch with it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
from watchdog.observers.inotify_c import Mask, WatchDescriptor

import scoutd.watcher
from scoutd.watch_reader import Handoff, InotifyEvent, Reader
from scoutd.watcher import FsWatcher

pytestmark = pytest.mark.skipif(Reader is None, reason="no inotify on this system")


def _open() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


class HeldBack(Reader):
    """A reader whose thread first reads once the reader is stopped."""

    def run(self) -> None:
        self.stopped_event.wait(10)
        super().run()


def test_a_reader_stopped_before_reading_closes_its_descriptors() -> None:
    before = _open()
    reader = HeldBack()
    reader.daemon = True
    reader.start()
    assert len(_open() - before) == 3  # the inotify instance and its wake-up pipe
    reader.stop()
    reader.join(timeout=10)
    assert not reader.is_alive()
    reader.release()
    assert _open() <= before
    reader.release()  # once only: a second call closes nothing again


def test_a_reader_never_started_closes_its_descriptors() -> None:
    before = _open()
    reader = Reader()
    reader.close()
    reader.release()
    assert _open() <= before


@pytest.mark.anyio
async def test_a_watcher_stopped_at_once_leaves_nothing_open(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setattr(scoutd.watcher, "Reader", HeldBack)
    before = _open()
    for _ in range(5):
        async with FsWatcher("native") as watcher:
            await watcher.add(str(tmp_path))
    assert _open() <= before


# --- the hand-off from the reader thread to the event loop ---------------------------


def _handed(call: Callable[[Handoff], object]) -> list[tuple[Any, ...]]:
    """What ``call`` hands to a real event loop, run there from another thread."""
    got: list[tuple[Any, ...]] = []
    loop = asyncio.new_event_loop()
    try:
        handoff = Handoff(
            lambda: loop,
            lambda wd, mask, name: got.append(("event", wd, mask, name)),
            lambda wd: got.append(("gone", wd)),
            lambda: got.append(("overflow",)),
        )
        reader = threading.Thread(target=call, args=(handoff,))
        reader.start()
        reader.join(timeout=10)
        assert not reader.is_alive()
        loop.run_until_complete(asyncio.sleep(0))  # runs what was handed
    finally:
        loop.close()
    return got


def test_each_notice_reaches_the_loop_with_what_it_says(caplog: pytest.LogCaptureFixture) -> None:
    assert _handed(
        lambda h: h.on_event(InotifyEvent(WatchDescriptor(7), Mask(256), 0, b"a.txt"))
    ) == [("event", 7, 256, b"a.txt")]
    assert _handed(lambda h: h.on_watch_deleted(9)) == [("gone", 9)]
    assert _handed(lambda h: h.on_queue_overflow()) == [("overflow",)]
    assert _handed(lambda h: h.on_events_lost()) == [("overflow",)]
    # a notice a later watchdog adds: every watch rechecked, and said once by name
    with caplog.at_level(logging.WARNING, logger="scoutd.watcher"):
        assert _handed(lambda h: h.on_moved_somewhere(1, b"x")) == [("overflow",)]
    assert "unknown file watch notice on_moved_somewhere: rechecking every watch" in caplog.text


def test_what_is_no_notice_is_no_attribute() -> None:
    handoff = Handoff(asyncio.new_event_loop, print, print, print)
    with pytest.raises(AttributeError, match=r"^read_events$"):
        handoff.read_events  # noqa: B018
    assert not hasattr(handoff, "__len__")


def test_the_reader_thread_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    """A closed loop (the daemon stopping) is quiet; anything else is logged."""
    closed = asyncio.new_event_loop()
    closed.close()
    Handoff(lambda: closed, print, print, print).on_queue_overflow()

    def broken() -> asyncio.AbstractEventLoop:
        raise ValueError("no loop")

    with caplog.at_level(logging.ERROR, logger="scoutd.watcher"):
        Handoff(broken, print, print, print).on_watch_deleted(3)
    assert "a watch event could not be handed to the event loop" in caplog.text
    assert "ValueError: no loop" in caplog.text
