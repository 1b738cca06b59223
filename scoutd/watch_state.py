"""What the directory watcher keeps and computes, apart from inotify itself.

The bookkeeping of :mod:`scoutd.watcher` (which path is watched for which
directory, and which missing directory waits on which ancestor), the checks
a rescan makes, and the listings ``watch_mode = "poll"`` compares. Plain
data and filesystem look-ups: no thread, no event loop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "GONE",
    "Pinned",
    "Registration",
    "Watch",
    "beneath",
    "inode_of",
    "listing",
    "nearest_existing",
    "next_step",
    "pinned",
    "poll",
    "stale",
]


@dataclass(slots=True)
class Registration:
    """One path added to the inotify instance (``wd``, callback ``cid``), shared.

    Its users: the directory ``path`` itself when it is watched (``direct``),
    and the missing directories anchored here, indexed by the next path step
    towards them (``waiting``), so that an event in a directory anchoring
    thousands costs a dictionary lookup, not a scan.
    """

    path: str
    wd: int
    cid: int
    inode: tuple[int, int] | None
    direct: bool = False
    waiting: dict[str, set[str]] = field(default_factory=dict)
    dead: bool = False  # the kernel dropped the watch (IN_IGNORED)

    def used(self) -> bool:
        return self.direct or bool(self.waiting)


@dataclass(slots=True)
class Watch:
    refs: int
    reg: Registration | None = None  # the directory itself, or its anchor
    anchored: bool = False  # reg watches an ancestor: the directory is missing

    @property
    def armed(self) -> bool:
        return self.reg is not None and not self.reg.dead and not self.anchored


def inode_of(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def beneath(tops: set[str], directories: Iterable[str]) -> list[str]:
    """The directories of ``directories`` inside one of ``tops``, at any depth.

    One pass, a set look-up per ancestor: cheap for many watches at once.
    """
    found = []
    if tops:
        for directory in directories:
            parent = os.path.dirname(directory)
            if parent == directory:
                continue  # the root lies inside nothing
            while parent not in tops and (up := os.path.dirname(parent)) != parent:
                parent = up
            if parent in tops:
                found.append(directory)
    return found


def stale(watches: list[tuple[str, Watch]]) -> list[str]:
    """The directories whose watch needs arming again.

    Unarmed (a failure to retry), armed on an inode that is no longer the
    directory's, or anchored while the directory exists (its appearance was
    missed) or on an ancestor that was replaced. A directory still missing
    under a sound anchor is not stale: re-anchoring it at every rescan cost
    a thread round trip per missing inbox.
    """
    stale = []
    for directory, watch in watches:
        reg = watch.reg
        if reg is None:
            stale.append(directory)
        elif watch.anchored:
            if os.path.isdir(directory) or inode_of(reg.path) != reg.inode:
                stale.append(directory)
        elif inode_of(directory) != reg.inode:
            stale.append(directory)
    return stale


GONE = object()  # the path vanished between the look and the watch: look again

# Where a process's open descriptors have names that lead to exactly what they opened.
FD_NAMES = "/proc/self/fd"


class Pinned(NamedTuple):
    """A directory held open while its watch is added.

    ``name``: the path to add the watch on; ``inode``: the directory's
    (None: it could not be opened, so it is unknown); ``exact``: ``name`` is
    its descriptor's name, which leads to that very directory whatever its
    path names meanwhile.
    """

    name: str
    inode: tuple[int, int] | None
    exact: bool


@contextlib.contextmanager
def pinned(path: str) -> Iterator[Pinned]:
    """Hold the directory ``path`` names open (a symlink followed, as a watch follows it).

    A watch added by path lands on whatever the path names at that instant,
    and a look at its inode just after may already see a directory swapped
    in: the watch then sat on the old one while its record said the new one,
    so neither an event's re-arm nor a rescan found anything to repair.
    Added through the descriptor's name, the watch is on the directory whose
    inode is recorded. Without ``/proc`` the caller checks the path still
    names it after adding. Raises FileNotFoundError or NotADirectoryError
    when ``path`` is no directory now; any other failure to open it yields
    the bare path (adding the watch will report what is wrong).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError:
        fd = -1
    if fd < 0:
        yield Pinned(path, None, exact=False)
        return
    try:
        st = os.fstat(fd)
        name = os.path.join(FD_NAMES, str(fd))
        exact = os.path.isdir(name)
        yield Pinned(name if exact else path, (st.st_dev, st.st_ino), exact)
    finally:
        os.close(fd)


def nearest_existing(directory: str) -> str | None:
    """``directory`` if it is one, else its nearest ancestor that is (None: none is)."""
    path = directory
    while not os.path.isdir(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return path


def next_step(ancestor: str, directory: str) -> str:
    """The child of ``ancestor`` on the way to ``directory``: ``/a``, ``/a/b/c`` -> ``/a/b``."""
    rest = os.path.relpath(directory, ancestor)
    return os.path.join(ancestor, rest.split(os.sep, 1)[0])


def listing(directory: str) -> dict[str, tuple[int, int, int]] | None:
    """``name -> (inode, size, mtime)`` of ``directory``; None when it cannot be listed."""
    try:
        with os.scandir(directory) as entries:
            out: dict[str, tuple[int, int, int]] = {}
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                out[entry.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
            return out
    except OSError:
        return None


def poll(
    before: dict[str, dict[str, tuple[int, int, int]] | None],
) -> tuple[dict[str, dict[str, tuple[int, int, int]] | None], list[str]]:
    """List every directory once; return the new listings and the changed paths."""
    after: dict[str, dict[str, tuple[int, int, int]] | None] = {}
    changed: list[str] = []
    for directory, old in before.items():
        new = after[directory] = listing(directory)
        if (old is None) != (new is None):
            changed.append(directory)
        old, new = old or {}, new or {}
        changed.extend(
            os.path.join(directory, name)
            for name in old.keys() | new.keys()
            if old.get(name) != new.get(name)
        )
    return after, changed
