"""``abort_signal``: the signal an aborted session's process gets (docs/OPERATIONS.md).

The daemon signals only the pid a session registered, and only while that
process belongs to the uid that registered it: a client cannot make the
daemon signal someone else's process.
"""

from __future__ import annotations

import logging
import os
import signal

from ..security import process_owned_by

__all__ = ["parse_signal", "send_abort_signal"]

log = logging.getLogger("scoutd.sessions")


def parse_signal(name: str | None) -> signal.Signals | None:
    """``"TERM"``, ``"SIGTERM"`` or ``"15"`` -> ``SIGTERM``; None stays None.

    Raises ValueError for a name that is not a signal.
    """
    if name is None or not name.strip():
        return None
    text = name.strip().upper()
    try:
        return (
            signal.Signals(int(text))
            if text.isdigit()
            else signal.Signals[text if text.startswith("SIG") else "SIG" + text]
        )
    except (KeyError, ValueError):
        raise ValueError(f"abort_signal {name!r} is not a signal name") from None


def send_abort_signal(pid: int, uid: int, signum: signal.Signals, session_id: str) -> None:
    """Send ``signum`` to ``pid`` if it is a process of ``uid`` (logged either way)."""
    if not process_owned_by(pid, uid):
        log.warning(
            "not signalling pid %d of session %s: not a process of uid %d", pid, session_id, uid
        )
        return
    try:
        os.kill(pid, signum)
        log.info("sent %s to pid %d (session %s)", signum.name, pid, session_id)
    except OSError as exc:
        log.warning("cannot signal pid %d: %s", pid, exc)
