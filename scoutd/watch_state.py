"""What the directory watcher keeps and computes, apart from inotify itself.

The bookkeeping of :mod:`scoutd.watcher` (which path is watched for which
directory, and which missing directory waits on which ancestor), the checks
a rescan makes, and the listings ``watch_mode = "poll"`` compares. Plain
data and filesystem look-ups: no thread, no event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = [
    "GONE",
    "Registration",
    "Watch",
    "inode_of",
    "listing",
    "nearest_existing",
    "next_step",
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
