"""Logging set-up of the daemon: stderr, with timestamps unless journald adds its own.

Every record is one line: its message is escaped (:func:`~scoutd.paths.printable`),
so that a value a client or a file chose (a save file named ``x\\nINFO ...``, an
escape sequence) cannot forge a line or drive the terminal of whoever reads the
log, whatever the call site did with it (docs/OPERATIONS.md, "Logs").

A ``scoutd`` command other than ``serve`` (:func:`command_logging`) shows the
library's warnings the way it shows its own: ``scoutd: warning: ...``, one
escaped line, each once.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

from .paths import printable

__all__ = ["LEVELS", "command_logging", "configure_logging", "set_level"]

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

    A traceback (``log.exception``) still follows on its own lines, each
    indented and escaped: an exception's message may hold text a client chose
    (a plugin's ``ValueError`` quoting a message), and a line of it must not
    read as a record of its own.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))


def _indented(text: str) -> str:
    """Each line of a traceback escaped and indented: no record starts with a space."""
    return "\n".join("  " + printable(line) for line in text.splitlines())


def configure_logging(level: str, *, journal: bool) -> None:
    """Send the ``scoutd`` loggers to stderr at ``level`` (idempotent).

    Under journald (``$JOURNAL_STREAM``) lines carry no timestamp: the journal
    records its own, and a second one only makes lines longer.
    """
    logger = logging.getLogger("scoutd")
    for old in [h for h in logger.handlers if isinstance(h, (_DaemonHandler, _CommandHandler))]:
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


# A command repeating one message more often than this is past telling apart.
_MAX_REMEMBERED = 1000


class _CommandHandler(logging.Handler):
    """A command's handler: a warning or an error of the library as the command's
    own line on stderr, each distinct line once (two passes over one broken
    inbox entry say the same thing twice)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._written: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = "error" if record.levelno >= logging.ERROR else "warning"
            line = f"scoutd: {level}: {printable(record.getMessage())}"
            if line in self._written:
                return
            if len(self._written) < _MAX_REMEMBERED:
                self._written.add(line)
            # stderr as it is now: the command may have replaced a closed one
            print(line, file=sys.stderr, flush=True)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def command_logging() -> Iterator[None]:
    """While a command runs, the ``scoutd`` loggers' warnings as its own lines.

    Without it Python's last-resort handler wrote them bare (no ``scoutd:``,
    not escaped), and once per pass. ``scoutd serve`` replaces it with the
    daemon's format (:func:`configure_logging`).
    """
    logger = logging.getLogger("scoutd")
    handler = _CommandHandler()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
