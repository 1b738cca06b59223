"""Logging set-up of the daemon: stderr, with timestamps unless journald adds its own.

Every record is one line: its message is escaped (:func:`~scoutd.paths.printable`),
so that a value a client or a file chose (a save file named ``x\\nINFO ...``, an
escape sequence) cannot forge a line or drive the terminal of whoever reads the
log, whatever the call site did with it (docs/OPERATIONS.md, "Logs").
"""

from __future__ import annotations

import logging
import sys

from .paths import printable

__all__ = ["LEVELS", "configure_logging", "set_level"]

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _DaemonHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure_logging` adds: found again on the logger, not in a global."""


class _OneLineFormatter(logging.Formatter):
    """A formatter writing each record's message as one line of printable text.

    A traceback (``log.exception``) still follows on its own lines, as Python
    writes it.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)


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
    handler.setFormatter(_OneLineFormatter(fmt))
    logger.addHandler(handler)
    logger.propagate = False
    set_level(level)


def set_level(level: str) -> None:
    """Change the level of the ``scoutd`` loggers (on reload)."""
    logging.getLogger("scoutd").setLevel(LEVELS.get(level, logging.INFO))
