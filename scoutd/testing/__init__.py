"""Run the real daemon for tests, scripts and programs that embed scoutd.

Two harnesses with one surface (``dir``, ``socket_path``, ``config_path``,
``connect()``, ``status()``, ``log()``, ``write_config()``, ``stop()``):

- :class:`Daemon`: ``python -m scoutd serve`` as a subprocess, for what needs a
  process of its own (signals, restarts, systemd, crashes, memory figures);
- :class:`InProcessDaemon`: the same daemon on an event loop in a thread of
  this process (:func:`scoutd.server.serve`): no interpreter start, no
  imports, so a test's daemon is up in milliseconds.

Usage::

    with Daemon(daemon={"read_timeout": 1.0}) as d:      # starts, waits until it answers
        with d.connect() as c:                            # a raw JSON-lines client
            assert c.call("status")["result"]["config"]["generation"] == 1
    # leaving the block sends SIGTERM and waits (SIGKILL after the timeout)

Every daemon lives in its own short temp dir under /tmp (``d.dir``; socket
paths must stay under 108 bytes) holding the socket ``d.socket_path``, the
config file ``d.config_path`` (``allowed_roots`` = the temp dir, fast rescans)
and the daemon's log ``d.log_path``. Every wait is bounded.

Also here, shared by the test suite and ``scripts/``: :func:`percentile` (the
one nearest-rank percentile, ``q`` in 0..1), :func:`conversation` (the one
synthetic tool-heavy conversation) and the ``/proc`` figures of a process.
"""

from __future__ import annotations

from .daemon import ROOT, START_TIMEOUT, STOP_TIMEOUT, Daemon, InProcessDaemon
from .figures import (
    conversation,
    cpu_seconds,
    inotify_usage,
    open_fds,
    percentile,
    proc_status,
    summary_ms,
)
from .wire import LineClient, toml_text, wait_for

__all__ = [
    "ROOT",
    "START_TIMEOUT",
    "STOP_TIMEOUT",
    "Daemon",
    "InProcessDaemon",
    "LineClient",
    "conversation",
    "cpu_seconds",
    "inotify_usage",
    "open_fds",
    "percentile",
    "proc_status",
    "summary_ms",
    "toml_text",
    "wait_for",
]
