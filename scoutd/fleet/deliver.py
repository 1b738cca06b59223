"""Delivering one command into this host's inboxes, at most once (blocking: a worker thread).

A command goes through the same inbox path as a file notice or abort
(:func:`scoutd.inbox.write_notice`, :func:`scoutd.inbox.write_abort`), so the
pickup's at-most-once delivery and the durable abort marker apply unchanged.
Redis delivers a command at least once (a host that dies before its XACK
reads it again); two records make the delivery at most once:

* the *journal*, a file in ``state_dir`` listing, one line each, the
  commands fully delivered (appended and fsynced before the XACK);
* the notice's *name*, derived from the command id: a chat whose inbox, or
  whose record of delivered notices, already holds that name got it before
  (a host that died after writing a notice and before its journal line).

An abort needs neither: a second ``write_abort`` keeps the abort waiting,
and a chat already aborted (its marker) is not written to again.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
from collections.abc import Iterator, Sequence

from ..inbox import inbox_dir, inbox_removed_dir, write_abort, write_notice
from ..inbox.aborted import held
from ..paths import printable
from .select import check_pattern, within
from .wire import Command, Receipt

__all__ = ["Journal", "deliver", "find_chats", "notice_name"]

log = logging.getLogger("scoutd.fleet")

# Journal lines kept after a compaction: commands older than the stream's
# retention are never read again, so their lines can go.
_COMPACT_EVERY = 10_000


def notice_name(command: Command) -> str:
    """The inbox name of a fleet notice: sorts in issue order, and names its command."""
    return f"{int(command.issued * 1e9):020d}-fleet-{command.id}.txt"


class Journal:
    """The commands this host delivered: ``<id> <issued>`` lines, appended and fsynced.

    Resource handling: the file is opened for each append and closed (a
    crash loses at most the line being written, whose command is then read
    again and found by its notice's name).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.done: dict[str, float] = {}

    def load(self) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        try:
            with open(self.path, encoding="ascii", errors="replace") as handle:
                for line in handle:
                    ident, _, issued = line.strip().partition(" ")
                    with contextlib.suppress(ValueError):
                        self.done[ident] = float(issued)
        except FileNotFoundError:
            pass

    def add(self, command: Command) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{command.id} {command.issued!r}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        self.done[command.id] = command.issued

    def compact(self, older_than: float) -> None:
        """Drop the lines of commands issued before ``older_than`` (rewrite, rename over)."""
        if len(self.done) < _COMPACT_EVERY:
            return
        self.done = {i: t for i, t in self.done.items() if t >= older_than}
        temp = f"{self.path}.new"
        with open(temp, "w", encoding="ascii") as handle:
            handle.writelines(f"{i} {t!r}\n" for i, t in self.done.items())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self.path)


def find_chats(pattern: str, roots: Sequence[str], limit: int) -> list[str]:
    """Files matching the glob ``pattern``, resolved, inside ``roots``; ``limit`` at most."""
    check_pattern(pattern)
    found: list[str] = []
    for path in glob.iglob(pattern):
        real = os.path.realpath(path)
        if within(real, roots) and os.path.isfile(real):
            found.append(real)
            if len(found) >= limit:
                break
    return found


def _names_there(save_file: str, name: str) -> Iterator[str]:
    yield os.path.join(inbox_dir(save_file), name)
    yield os.path.join(inbox_removed_dir(save_file), name)


def _deliver_one(command: Command, chat: str) -> bool:
    """Write the command into one chat's inbox; False when the chat had it already."""
    if command.kind == "abort":
        if held(chat) is not None:
            return False  # aborted already: the marker stands
        write_abort(chat, command.text)
        return True
    name = notice_name(command)
    if any(os.path.lexists(path) for path in _names_there(chat, name)):
        return False
    write_notice(chat, command.text, name=name)
    return True


def deliver(
    command: Command, chats: Sequence[str], journal: Journal, host: str, now: float
) -> Receipt:
    """Deliver ``command`` to ``chats`` unless the journal has it; record it; say what happened."""
    if command.id in journal.done:
        return Receipt(command=command.id, host=host, at=now, already=list(chats))
    written: list[str] = []
    already: list[str] = []
    refused: list[str] = []
    for chat in chats:
        try:
            (written if _deliver_one(command, chat) else already).append(chat)
        except (OSError, ValueError) as exc:
            log.error(
                "fleet %s %s not delivered to %s: %s",
                command.kind,
                command.id,
                printable(chat),
                exc,
            )
            refused.append(f"{chat}: {exc}")
    if written:  # nothing written: nothing a redelivery could duplicate
        journal.add(command)
    return Receipt(
        command=command.id, host=host, at=now, chats=written, already=already, refused=refused
    )
