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

_handler: logging.Handler | None = None


def configure_logging(level: str, *, journal: bool) -> None:
    """Send the ``scoutd`` loggers to stderr at ``level`` (idempotent).

    Under journald (``$JOURNAL_STREAM``) lines carry no timestamp: the journal
    records its own, and a second one only makes lines longer.
    """
    global _handler
    logger = logging.getLogger("scoutd")
    if _handler is not None:
        logger.removeHandler(_handler)
    _handler = logging.StreamHandler(sys.stderr)
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not journal:
        fmt = "%(asctime)s " + fmt
    _handler.setFormatter(logging.Formatter(fmt))
    logger.addHandler(_handler)
    logger.propagate = False
    set_level(level)


def set_level(level: str) -> None:
    """Change the level of the ``scoutd`` loggers (on reload)."""
    logging.getLogger("scoutd").setLevel(LEVELS.get(level, logging.INFO))
