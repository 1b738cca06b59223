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
and a chat already aborted (its marker) is not written to again. So an
abort the journal holds is tried again on every chat (fail closed): a chat
refused the first time is reached, never answered as reached before.

The chats are paths this host found itself (a walk beneath its roots, or a
session's resolved save file): each is used exactly, no symlink on it followed,
root's neither (``exact=True``, :mod:`scoutd.inbox.walk`). One found there now
was swapped in since (an agent renaming a link into its chat directory's
place): that chat is refused, never written through the link.

The journal keeps a digest of each command too: a command under an id
delivered before with other content (a raw publisher, a replayed id) is
not "already" there. A notice is refused, with an error receipt; an abort
is written all the same, its receipt saying why it is not clean.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import stat
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import NamedTuple

from ..inbox import inbox_dir, inbox_removed_dir, write_abort, write_notice
from ..inbox.aborted import held
from ..inbox.files import open_dir
from ..inbox.walk import open_directory
from ..paths import display_path, printable
from .select import check_pattern, normal_pattern
from .wire import Command, Receipt, encode

__all__ = [
    "MAX_LOOKED_AT",
    "Found",
    "Journal",
    "canonical_pattern",
    "deliver",
    "find_chats",
    "notice_name",
]

log = logging.getLogger("scoutd.fleet")

# Journal lines kept after a compaction: commands older than the stream's
# retention are never read again, so their lines can go.
_COMPACT_EVERY = 10_000
# The most directory entries one chat glob looks at on a host: the search is bounded
# work in a worker thread, whatever the pattern and the tree (docs/OPERATIONS.md).
MAX_LOOKED_AT = 500_000
# The most directories a glob's receipt names as not looked into.
MAX_UNLISTED = 100
# A glob component's special characters (fnmatch's): one without them is a name.
_MAGIC = re.compile(r"[*?[]")


def notice_name(command: Command) -> str:
    """The inbox name of a fleet notice: sorts in issue order, and names its command."""
    return f"{int(command.issued * 1e9):020d}-fleet-{command.id}.txt"


def digest(command: Command) -> str:
    """What tells two commands under one id apart (hex, no space)."""
    return hashlib.sha256(encode(command)).hexdigest()[:32]


class Journal:
    """The commands this host delivered: ``<id> <issued> <digest>`` lines, appended and
    fsynced (a line of the older form, without the digest, still reads).

    Resource handling: the file is opened for each append and closed (a
    crash loses at most the line being written, whose command is then read
    again and found by its notice's name).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.done: dict[str, float] = {}
        self.digests: dict[str, str] = {}  # "" or absent: a line of the older form

    def load(self) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        try:
            with open(self.path, encoding="ascii", errors="replace") as handle:
                for line in handle:
                    ident, _, rest = line.strip().partition(" ")
                    issued, _, known = rest.partition(" ")
                    with contextlib.suppress(ValueError):
                        self.done[ident] = float(issued)
                        self.digests[ident] = known
        except FileNotFoundError:
            pass

    def same(self, command: Command) -> bool:
        """The command delivered under ``command.id`` was this one (unknown: assumed so)."""
        known = self.digests.get(command.id, "")
        return not known or known == digest(command)

    def add(self, command: Command) -> None:
        line = f"{command.id} {command.issued!r} {digest(command)}\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        self.done[command.id] = command.issued
        self.digests[command.id] = digest(command)

    def compact(self, older_than: float) -> None:
        """Drop the lines of commands issued before ``older_than`` (rewrite, rename over)."""
        if len(self.done) < _COMPACT_EVERY:
            return
        self.done = {i: t for i, t in self.done.items() if t >= older_than}
        self.digests = {i: d for i, d in self.digests.items() if i in self.done}
        temp = f"{self.path}.new"
        with open(temp, "w", encoding="ascii") as handle:
            handle.writelines(
                f"{i} {t!r} {self.digests.get(i, '')}".rstrip() + "\n" for i, t in self.done.items()
            )
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self.path)


class Found(NamedTuple):
    """The chats a glob found on disk, why the search stopped short (None: it did not),
    and the directories it could not look into, each with why (at most
    :data:`MAX_UNLISTED`: a chat in them may match, so each is said)."""

    chats: list[str]
    cut: str | None = None
    unlisted: tuple[str, ...] = ()


def canonical_pattern(pattern: str) -> str:
    """``pattern`` spelt as the paths of this host's chats are (docs/OPERATIONS.md, "A
    fleet"): empty and ``.`` components dropped, and its leading directories without
    glob characters resolved (a root reached through a symbolic link matches), the
    file name as it is, as a session's save file keeps it."""
    check_pattern(pattern)
    parts = normal_pattern(pattern).split("/")[1:]
    literal = 0
    while literal < len(parts) - 1 and not _MAGIC.search(parts[literal]):
        literal += 1
    if literal == 0:
        return "/" + "/".join(parts)
    head = os.path.realpath("/" + "/".join(parts[:literal]))
    return "/".join([head.rstrip("/"), *parts[literal:]])


def find_chats(pattern: str, roots: Sequence[str], limit: int) -> Found:
    """Files matching the canonical glob ``pattern`` beneath ``roots``: at most ``limit``,
    after looking at :data:`MAX_LOOKED_AT` directory entries at most.

    Walks down from each root only, never through a symbolic link to a directory
    (a link loop or a link out of the roots is not followed), and matches each
    component as a session's path is matched (:func:`.select.glob_matches`: ``*``
    stops at ``/`` and matches a leading dot), so that a chat is reached alike
    with or without an open session.
    """
    check_pattern(pattern)
    parts = pattern.split("/")[1:]
    found: set[str] = set()
    unlisted: list[str] = []
    looked = 0
    for root in roots:
        under = [] if root == "/" else root.split("/")[1:]
        if len(under) >= len(parts) or not all(map(fnmatchcase, under, parts)):
            continue  # no file beneath this root has the pattern's depth and start
        level = [root]
        for depth, part in enumerate(parts[len(under) :], len(under) + 1):
            last = depth == len(parts)
            deeper: list[str] = []
            for directory in level:
                listed, paths = _entries(directory, part, unlisted)
                looked += listed
                if looked > MAX_LOOKED_AT:
                    return Found(
                        sorted(found)[:limit],
                        f"the pattern's search stopped after {MAX_LOOKED_AT} directory"
                        " entries: chats past them were not looked for; narrow the pattern",
                        tuple(unlisted),
                    )
                for path in paths:
                    if not last:
                        if _is_directory(path):
                            deeper.append(path)
                    elif os.path.isfile(path):
                        found.add(path)
                        if len(found) > limit:
                            return Found(sorted(found)[:limit], over_limit(limit), tuple(unlisted))
            level = deeper
    return Found(sorted(found), None, tuple(unlisted))


def over_limit(limit: int) -> str:
    """Why a command reached only ``limit`` of the chats it matched, for its receipt."""
    return (
        f"more than {limit} chats matched ([fleet] max_chats): the others were not reached;"
        " narrow the target or raise max_chats"
    )


def _entries(directory: str, part: str, unlisted: list[str]) -> tuple[int, list[str]]:
    """How many entries of ``directory`` were looked at, and the paths of those whose
    names match the component ``part`` (a literal component is looked up, not listed).

    A directory that cannot be looked into (its permissions, an I/O error: an
    agent may chmod its own) is added to ``unlisted`` with why; one that is gone
    is not (nothing in it can be a chat).
    """
    if not _MAGIC.search(part):
        path = os.path.join(directory, part)
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return 1, []
        except OSError as exc:
            _unlisted(unlisted, directory, exc)
            return 1, []
        return 1, [path]
    try:
        with os.scandir(directory) as listing:
            names = [entry.name for entry in listing]
    except (FileNotFoundError, NotADirectoryError):
        return 1, []
    except OSError as exc:
        _unlisted(unlisted, directory, exc)
        return 1, []
    # in name order: which chats a search stopped at its limit reaches must not depend
    # on the order the file system lists a directory in
    matching = sorted(n for n in names if fnmatchcase(n, part))
    return len(names), [os.path.join(directory, n) for n in matching]


def _unlisted(unlisted: list[str], directory: str, exc: OSError) -> None:
    if len(unlisted) < MAX_UNLISTED:
        why = (exc.strerror or str(exc)).lower()
        unlisted.append(
            f"{display_path(directory)}: cannot be looked into ({why}):"
            " its chats were not looked for"
        )


def _is_directory(path: str) -> bool:
    """A directory, not a symbolic link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _had(save_file: str, name: str) -> bool:
    """Whether ``save_file``'s inbox or record of delivered notices holds ``name``.

    Looked at through the chat directory reached exactly (no symlink on the
    way followed) and those two directories opened without following: a
    symlink swapped in on the way raises ``OSError`` (``ELOOP``), never
    answers for another chat. An inbox that cannot be opened raises too (the
    writer would refuse it); a record directory that cannot be is no record.
    """
    try:
        chat = open_directory(os.path.dirname(save_file) or ".", exact=True)
    except (FileNotFoundError, NotADirectoryError):
        return False  # made by the writer
    try:
        for directory in (inbox_dir(save_file), inbox_removed_dir(save_file)):
            try:
                dfd = open_dir(os.path.basename(directory), dir_fd=chat.fd, shown=directory)
            except FileNotFoundError:
                continue
            except OSError:
                if directory == inbox_dir(save_file):
                    raise
                continue
            try:
                os.lstat(name, dir_fd=dfd)
            except OSError:  # absent, or not to be looked at: not there
                continue
            finally:
                os.close(dfd)
            return True
        return False
    finally:
        os.close(chat.fd)


def _reached_exactly(save_file: str) -> None:
    """Raise ``OSError`` (``ELOOP``) when a symlink stands on ``save_file``'s directory:
    before "aborted already" is answered from a marker seen through it."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # made by the writer
        os.close(open_directory(os.path.dirname(save_file) or ".", exact=True).fd)


def _deliver_one(command: Command, chat: str) -> bool:
    """Write the command into one chat's inbox; False when the chat had it already.

    Raises ``OSError`` for a chat that cannot be reached exactly (the module's rule)."""
    if command.kind == "abort":
        _reached_exactly(chat)
        if held(chat, exact=True) is not None:
            return False  # aborted already: the marker stands
        write_abort(chat, command.text, exact=True)
        return True
    name = notice_name(command)
    if _had(chat, name):
        return False
    write_notice(chat, command.text, name=name, exact=True)
    return True


def deliver(
    command: Command, chats: Sequence[str], journal: Journal, host: str, now: float
) -> Receipt:
    """Deliver ``command`` to ``chats`` unless the journal has it; record it; say what happened.

    A notice the journal has is answered "already"; an abort is tried again on
    every chat (its marker keeps it single); another command under a used id is
    refused, an abort written all the same (the module's docstring)."""
    refused: list[str] = []
    if command.id in journal.done:
        if not journal.same(command):
            reused = (
                f"command id {command.id} was used before on this host by another command;"
                " publish it again (a new id)"
            )
            log.error("fleet: %s %s: %s", command.kind, command.id, reused)
            if command.kind == "notice":
                return Receipt(command=command.id, host=host, at=now, error=reused)
            refused.append(reused)
        elif command.kind == "notice":
            return Receipt(command=command.id, host=host, at=now, already=list(chats))
    written: list[str] = []
    already: list[str] = []
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
    if written and command.id not in journal.done:  # nothing written: nothing to duplicate
        journal.add(command)
    return Receipt(
        command=command.id, host=host, at=now, chats=written, already=already, refused=refused
    )
