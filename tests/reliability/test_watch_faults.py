"""Watch faults (docs/OPERATIONS.md): missed file events never lose an abort.

The inbox deleted and re-created under an open session, a flood of thousands
of files, a hand-off queue that overflows, an exception in the watchdog handler
thread, and the polling observer: each abort still reaches its session, at
once or at the latest after one periodic rescan (``rescan_interval``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from scoutd.strategies.inbox import inbox_dir, inbox_removed_dir, write_abort
from tests.reliability.harness import FaultDaemon
from tests.support.daemon import Daemon, LineClient, wait_for

# Seconds an abort may take beyond the rescan interval: the rescan's own work, a
# busy CI machine. "At once" pushes measure in milliseconds (docs/RELIABILITY.md).
SLACK = 2.5
AT_ONCE = 1.0


def open_session(c: LineClient, save_file: str) -> str:
    reply = c.call("session.open", {"save_file": save_file})
    assert "result" in reply, reply
    return str(reply["result"]["session"])


def push(c: LineClient, save_file: str, reason: str, timeout: float) -> None:
    """Drop an abort and wait for its ``session.aborted`` (fail after ``timeout``)."""
    write_abort(save_file, reason)
    note = c.notification("session.aborted", timeout)
    assert note["params"]["reason"] == reason


def rescans(c: LineClient) -> int:
    """Periodic rescans the daemon completed so far (``status``)."""
    return int(c.call("status")["result"]["counts"]["rescans"])


def pushed_by_an_event(c: LineClient, save_file: str, reason: str) -> bool:
    """Push an abort; True when provably no periodic rescan found it.

    A rescan counts itself before the claims it starts can push anything, so
    an unchanged count across the push rules it out; a count that moved (a
    rescan that happened to end meanwhile) proves nothing either way.
    """
    before = rescans(c)
    push(c, save_file, reason, AT_ONCE + SLACK)
    return rescans(c) == before


def push_until_one_came_by_an_event(c: LineClient, save_file: str, label: str) -> int:
    """Push aborts until one provably came by its file event; return how many were pushed."""
    for n in range(1, 6):
        if pushed_by_an_event(c, save_file, f"{label} {n}"):
            return n
    raise AssertionError(f"{label}: a periodic rescan ended during each of 5 pushes")


def abort_records(save_file: str) -> list[str]:
    removed = inbox_removed_dir(save_file)
    return sorted(n for n in os.listdir(removed) if n.startswith("abort"))


@pytest.fixture(params=["native", "poll"])
def daemon(request: pytest.FixtureRequest) -> Iterator[Daemon]:
    with Daemon(daemon={"watch_mode": request.param, "rescan_interval": 0.5}) as d:
        yield d


def test_inbox_deleted_and_recreated_while_a_session_is_open(daemon: Daemon) -> None:
    """Removed with rmtree, or renamed away and replaced by another directory: 6 rounds."""
    save_file = os.path.join(daemon.dir, "agent.chat")
    inbox = inbox_dir(save_file)
    os.makedirs(inbox)
    with daemon.connect() as c:
        open_session(c, save_file)
        for round_number in range(6):
            if round_number % 2:
                aside = os.path.join(daemon.dir, f"aside-{round_number}")
                fresh = os.path.join(daemon.dir, f"fresh-{round_number}")
                os.makedirs(fresh)
                os.rename(inbox, aside)
                os.rename(fresh, inbox)
            else:
                shutil.rmtree(inbox)
                os.makedirs(inbox)
            push(c, save_file, f"round {round_number}", 0.5 + SLACK)
        assert len(abort_records(save_file)) == 6
        assert not os.path.exists(os.path.join(inbox, "abort"))


def test_a_flood_of_files_loses_no_abort() -> None:
    """30,000 files at once overflow the kernel queue or the hand-off; the abort still comes."""
    with Daemon(daemon={"rescan_interval": 1.0}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "flood.chat")
        inbox = inbox_dir(save_file)
        os.makedirs(inbox)
        open_session(c, save_file)
        for n in range(30_000):
            os.close(os.open(os.path.join(inbox, f"n{n:05d}"), os.O_CREAT | os.O_WRONLY, 0o644))
        push(c, save_file, "after the flood", 1.0 + SLACK + 5)
        assert len(os.listdir(inbox)) == 30_000  # the notices are left for the strategy
        assert "result" in c.call("status")


OVERFLOW_FAULTS = """
import scoutd.watcher
scoutd.watcher.MAX_PENDING_PATHS = 0  # every hand-off overflows: all paths are dropped
"""


def test_an_overflowing_hand_off_rechecks_every_inbox() -> None:
    with FaultDaemon(OVERFLOW_FAULTS, daemon={"rescan_interval": 30.0}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "over.chat")
        inbox = inbox_dir(save_file)
        os.makedirs(inbox)
        open_session(c, save_file)
        for n in range(500):
            os.close(os.open(os.path.join(inbox, f"n{n:03d}"), os.O_CREAT | os.O_WRONLY, 0o644))
        # no path reaches the registry, and no periodic rescan runs: only the recheck
        # that an overflow triggers can find the abort
        for n in range(3):
            push(c, save_file, f"overflowed {n}", 10)
        assert rescans(c) == 0
        assert "file events were lost" in d.log()


HANDLER_FAULTS = """
import os
import scoutd.watcher

TOGGLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults.on")


class FlakyLoop:
    # the handler thread hands every path over through this call: make it fail
    def __init__(self, loop):
        self._loop = loop

    def call_soon_threadsafe(self, *args):
        if os.path.exists(TOGGLE):
            raise ValueError("injected fault in the watch handler")
        return self._loop.call_soon_threadsafe(*args)


_enter = scoutd.watcher.FsWatcher.__aenter__


async def __aenter__(self):
    result = await _enter(self)
    self._loop = FlakyLoop(self._loop)
    return result


scoutd.watcher.FsWatcher.__aenter__ = __aenter__
"""


def test_an_exception_in_the_handler_thread_loses_no_abort_and_watching_goes_on() -> None:
    rescan = 2.0
    d = FaultDaemon(HANDLER_FAULTS, daemon={"rescan_interval": rescan})
    with d, d.connect() as c:
        save_file = os.path.join(d.dir, "flaky.chat")
        os.makedirs(inbox_dir(save_file))
        open_session(c, save_file)
        pushes = push_until_one_came_by_an_event(c, save_file, "before")
        d.fault(True)
        for n in range(3):  # every event fails: only the periodic rescan can find them
            push(c, save_file, f"during {n}", rescan + SLACK)
        assert "could not be handed to the event loop" in d.log()
        d.fault(False)
        # the observer thread survived: its events push again, without a rescan
        pushes += 3 + push_until_one_came_by_an_event(c, save_file, "after")
        assert len(abort_records(save_file)) == pushes


DISPATCH_FAULTS = """
import os
import scoutd.watch_reader

TOGGLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults.on")
_on_event = scoutd.watch_reader.Handoff.on_event


def on_event(self, event):
    # a bug that escapes the handler ends watchdog's inotify reader thread
    if os.path.exists(TOGGLE):
        raise ValueError("injected fault escaping the watch handler")
    _on_event(self, event)


scoutd.watch_reader.Handoff.on_event = on_event
"""


def test_even_a_dead_observer_thread_loses_no_abort() -> None:
    rescan = 1.0
    d = FaultDaemon(DISPATCH_FAULTS, daemon={"rescan_interval": rescan})
    with d, d.connect() as c:
        save_file = os.path.join(d.dir, "dead.chat")
        os.makedirs(inbox_dir(save_file))
        open_session(c, save_file)
        d.fault(True)
        push(c, save_file, "observer killed", rescan + SLACK)
        # A rescan may push that abort before the reader thread reads its event: the
        # fault stays on until the thread has met it (the event comes all the same),
        # else it could read the event after the switch and live on.
        fault = "injected fault escaping the watch handler"
        try:
            wait_for(lambda: fault in d.log(), rescan + SLACK, "the reader to meet the fault")
        except TimeoutError:
            pytest.fail(f"the reader thread never met the fault; the daemon's log:\n{d.log()}")
        d.fault(False)
        for n in range(2):
            push(c, save_file, f"afterwards {n}", rescan + SLACK)
        assert "the file watch thread ended: restarting it" in d.log()
        assert "result" in c.call("status")
