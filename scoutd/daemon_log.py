"""Logging set-up of the daemon: stderr, with timestamps unless journald adds its own."""

from __future__ import annotations

import logging
import sys

__all__ = ["LEVELS", "configure_logging", "set_level"]

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _DaemonHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure_logging` adds: found again on the logger, not in a global."""


def configure_logging(level: str, *, journal: bool) -> None:
    """Send the ``scoutd`` loggers to stderr at ``level`` (idempotent).

    Under journald (``$JOURNAL_STREAM``) lines carry no timestamp: the journal
    records its own, and a second one only makes lines longer.
    """
    logger = logging.getLogger("scoutd")
    for old in [h for h in logger.handlers if isinstance(h, _DaemonHandler)]:
        logger.removeHandler(old)
    handler = _DaemonHandler(sys.stderr)
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not journal:
        fmt = "%(asctime)s " + fmt
    handler.setFormatter(logging.Formatter(fmt))
    logger.addHandler(handler)
    logger.propagate = False
    set_level(level)


def set_level(level: str) -> None:
    """Change the level of the ``scoutd`` loggers (on reload)."""
    logging.getLogger("scoutd").setLevel(LEVELS.get(level, logging.INFO))
