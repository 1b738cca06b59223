"""Which prepares run on the event loop and which in a worker thread.

Small session-less requests with built-in strategies and no save file run on
the event loop (cheaper than a hand-off); everything else runs in a worker,
so that one big or slow request never holds up the other clients.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.server import handlers, workers

from ..support.daemon import Daemon, InProcessDaemon, conversation, wait_for
from ..test_server import gated_daemon, release


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name of the thread each ``run_prepare`` ran on, in order."""
    names: list[str] = []
    run_prepare = workers.run_prepare

    def recording(*args: Any) -> Any:
        names.append(threading.current_thread().name)
        return run_prepare(*args)

    monkeypatch.setattr(workers, "run_prepare", recording)
    yield names


def _on_loop(name: str) -> bool:
    return not name.startswith("AnyIO worker thread")


def test_only_small_builtin_file_less_requests_run_on_the_loop(threads: list[str]) -> None:
    small = conversation(5)
    large = conversation(200, output_size=2000)  # past INLINE_BYTES
    assert len(str(large)) > handlers.INLINE_BYTES
    with InProcessDaemon() as d, d.connect() as c:
        save_file = os.path.join(d.dir, "agent.chat")
        for params in (
            {"messages": small},
            {"messages": large},
            {"messages": small, "save_file": save_file},
            {"messages": small, "strategies": "shorten_tools,inbox"},
        ):
            assert "result" in c.call("prepare_prompt", params, timeout=30)
    assert [_on_loop(name) for name in threads] == [True, False, False, True]


def test_a_small_request_with_a_plugin_does_not_stall_other_clients() -> None:
    """An operator's plugin may take any time: it never runs on the event loop."""
    d: Daemon = gated_daemon()
    with d, d.connect() as a, d.connect() as b:
        held = a.request("prepare_prompt", {"messages": conversation(2), "strategies": "gate"})
        wait_for(lambda: os.path.exists(os.path.join(d.dir, "gate.started")), 10, "the gate")
        reply = b.call("prepare_prompt", {"messages": conversation(3)}, timeout=10)
        assert "result" in reply
        release(d)
        assert "result" in a.response(held, timeout=30)
