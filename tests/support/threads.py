"""What a call raises on a thread other than the main one: where the daemon runs the
operator's code (its worker threads), which contains an exit or an interrupt."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def raised_in_a_worker(call: Callable[[], Any]) -> BaseException:
    """What ``call`` raises on a new thread (it must raise), within 10 seconds."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and len(raised) == 1
    return raised[0]
