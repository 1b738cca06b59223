"""Noticing that the configuration file changed, however it was replaced.

Editors write in place or rename a new file over the old one; a directory
may be deleted and re-created (the watcher re-arms it); deployments swap a
symlink (Kubernetes mounts a ConfigMap as ``scoutd.toml -> ..data/scoutd.toml``
and replaces ``..data``, a symlink to a fresh directory). So the watch covers
the directory of the path as given *and* the directory it resolves to, follows
the resolution when it changes, and a batch concerns the configuration when the
file's identity (resolved path, inode, size, times) differs from the last one
seen, not when an event names the file.
"""

from __future__ import annotations

import os

import anyio

from .watcher import Batch, FsWatcher

__all__ = ["ConfigFileWatch"]

_Identity = tuple[str, int, int, int, int, int] | None


def _identity(path: str) -> _Identity:
    """What changes when the file's content may have: None if it cannot be read."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _directories(path: str) -> set[str]:
    """The directory of ``path`` as given and the one it resolves to."""
    return {os.path.dirname(os.path.abspath(path)), os.path.dirname(os.path.realpath(path))}


class ConfigFileWatch:
    """The watches that cover one configuration file (none without a file).

    Resource handling: :meth:`start` takes references on the watcher; they
    live as long as the watcher (the daemon). Filesystem calls run in worker
    threads.
    """

    def __init__(self, watcher: FsWatcher, config_file: str | None) -> None:
        self._watcher = watcher
        self._path = config_file
        self._watched: set[str] = set()
        self._seen: _Identity = None

    async def start(self) -> None:
        """Watch the file's directories and remember what the file is now."""
        if self._path is not None:
            self._seen = await anyio.to_thread.run_sync(_identity, self._path)
            await self._follow()

    async def concerns(self, batch: Batch) -> bool:
        """Whether ``batch`` may have changed the configuration file (then: reload)."""
        if self._path is None:
            return False
        touched = batch.overflow or any(
            path in self._watched or os.path.dirname(path) in self._watched for path in batch.paths
        )
        if not touched:
            return False
        now = await anyio.to_thread.run_sync(_identity, self._path)
        await self._follow()
        if now == self._seen:
            return False
        self._seen = now
        return True

    async def _follow(self) -> None:
        """Move the watches to where the path resolves now (a swapped symlink)."""
        assert self._path is not None
        wanted = await anyio.to_thread.run_sync(_directories, self._path)
        for directory in sorted(wanted - self._watched):
            await self._watcher.add(directory)
        for directory in sorted(self._watched - wanted):
            await self._watcher.remove(directory)
        self._watched = wanted
