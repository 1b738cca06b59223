"""The inotify reader's descriptors end when the watcher stops (docs/RELIABILITY.md, rule 22).

watchdog's ``InotifyFD`` leaves its inotify descriptor and wake-up pipe to its
own thread to close. A thread that had not read yet when the reader was
stopped (on a loaded machine, a daemon stopped just after it started) never
closed them: three descriptors each time. The thread is held back here until
the stop, which a loaded machine does by chance.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import scoutd.watcher
from scoutd.watch_reader import Reader
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
