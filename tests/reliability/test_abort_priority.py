"""Aborts never wait behind prepare calls or sleeps.

The watcher's abort claims used to share the daemon's worker pool with the
prepare calls, and a prepare call slept up to 2 s for each notice still being
written: 20 such notices and 4 calls in flight delayed another user's abort
by 38 s. Claims now run on threads of their own, and nothing in a prepare
call sleeps. Each test keeps the pool busy, then expects another chat's
abort pushed while it still is (every wait bounded; none measured).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from scoutd.strategies.inbox import inbox_dir, write_abort
from tests.reliability.harness import FaultDaemon
from tests.support.daemon import Daemon, LineClient, wait_for

PUSH = 10.0  # bounded waits only: the old code took tens of seconds here, or forever
SLOW_RESCAN = 60.0  # never reached: pushes must come from file events
HELLO = [{"role": "user", "content": "hello"}]

# Every prepare call without a session blocks in its worker thread while the toggle
# file exists (at most a minute), after leaving a mark that it is in.
BLOCKING_PREPARES = """
import os, threading, time, uuid
import scoutd.server.workers as workers

_real = workers.run_prepare
_here = os.path.dirname(os.path.abspath(__file__))

def run_prepare(*args, **kwargs):
    open(os.path.join(_here, "in-" + uuid.uuid4().hex), "w").close()
    deadline = time.monotonic() + 60
    while os.path.exists(os.path.join(_here, "faults.on")) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _real(*args, **kwargs)

workers.run_prepare = run_prepare
"""


def pool_size() -> int:
    """The daemon's prepare pool (scoutd.server.server: max(4, CPUs))."""
    return max(4, os.cpu_count() or 1)


def open_session(c: LineClient, save_file: str) -> str:
    session: str = c.call("session.open", {"save_file": save_file})["result"]["session"]
    return session


def test_a_claim_never_waits_for_the_prepare_pool() -> None:
    """Every worker of the pool busy with a prepare call: another chat's abort is pushed."""
    faults = FaultDaemon(BLOCKING_PREPARES, daemon={"rescan_interval": SLOW_RESCAN})
    with faults as d, d.connect() as watcher, ExitStack() as stack:
        victim = os.path.join(d.dir, "other-user.chat")
        session = open_session(watcher, victim)
        busy = [stack.enter_context(d.connect()) for _ in range(4)]
        d.fault(True)
        ids = []
        # with a save file, so that the call runs in the pool (not inline on the loop)
        params = {"messages": HELLO, "save_file": os.path.join(d.dir, "busy.chat")}
        for n in range(16):  # four per connection: each computes at most four at once
            c = busy[n % 4]
            ids.append((c, c.request("prepare_prompt", params)))

        def inside() -> int:
            return sum(1 for name in os.listdir(d.dir) if name.startswith("in-"))

        # as many calls in the pool as the daemon lets in (all of it for one uid, unless
        # the daemon caps a uid's share): wait until five looks in a row see the same count
        seen: list[int] = []

        def filled() -> bool:
            seen.append(inside())
            return seen[-1] > 0 and seen[-5:] == [seen[-1]] * 5

        wait_for(filled, PUSH, "the pool to fill", interval=0.1)
        assert seen[-1] <= min(pool_size(), 16)
        try:
            write_abort(victim, "stop, whatever else runs")
            note = watcher.notification("session.aborted", PUSH)
            assert note["params"] == {
                "session": session,
                "save_file": victim,
                "reason": "stop, whatever else runs",
            }
            assert inside() == seen[-1] and os.path.exists(d.toggle)  # all still blocked
        finally:
            d.fault(False)
        for c, request_id in ids:
            assert "result" in c.response(request_id, PUSH)


@contextmanager
def notices_being_written(inbox: str, count: int) -> Iterator[list[str]]:
    """``count`` notices held open and appended to every 20 ms until the block ends."""
    os.makedirs(inbox, exist_ok=True)
    handles = [open(os.path.join(inbox, f"note-{n:02d}.txt"), "w") for n in range(count)]  # noqa: SIM115
    stop = threading.Event()

    def write() -> None:
        for _ in range(3000):  # bounded: a minute at most
            if stop.wait(0.02):
                return
            for handle in handles:
                handle.write("x")
                handle.flush()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        yield [h.name for h in handles]
    finally:
        stop.set()
        thread.join(10)
        for handle in handles:
            handle.close()


def test_notices_being_written_never_hold_a_worker_or_an_abort() -> None:
    """The reported case: 20 notices still changing, 4 calls on them, another user's abort."""
    with Daemon(daemon={"rescan_interval": SLOW_RESCAN}) as d, d.connect() as watcher:
        victim = os.path.join(d.dir, "other-user.chat")
        session = open_session(watcher, victim)
        busy_chat = os.path.join(d.dir, "busy.chat")
        with notices_being_written(inbox_dir(busy_chat), 20), ExitStack() as stack:
            busy = [stack.enter_context(d.connect()) for _ in range(4)]
            params = {"messages": HELLO, "save_file": busy_chat, "strategies": "inbox"}
            ids = [(c, c.request("prepare_prompt", params)) for c in busy]
            write_abort(victim, "stop now")
            note = watcher.notification("session.aborted", PUSH)
            assert note["params"]["session"] == session
            assert note["params"]["reason"] == "stop now"
            for c, request_id in ids:  # answered without a notice still being written
                assert c.response(request_id, PUSH)["result"]["messages"] == HELLO
            assert len(os.listdir(inbox_dir(busy_chat))) == 20  # all still there, whole later
