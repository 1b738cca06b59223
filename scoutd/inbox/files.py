"""The file operations of an inbox: directories opened without following, safe reads, renames.

Every function works relative to directory descriptors opened with
``O_NOFOLLOW``, so a symlink swapped in cannot redirect a move (the claim steps
are in :mod:`scoutd.inbox`). Nothing here decides what to deliver.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Iterable
from typing import Any

__all__ = [
    "WRITE_FLAGS",
    "InboxDirs",
    "lexists",
    "open_dir",
    "open_regular",
    "place",
    "read_text",
]

# O_NONBLOCK: a FIFO swapped in after the listing opens at once, never waiting for
# a writer (regular files ignore the flag). O_NOFOLLOW: a symlink is never followed.
# O_NOCTTY: a terminal never becomes the process's controlling terminal.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# The inbox and removed directories themselves: a symlink there is refused, never followed.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# link() errors that mean "no hard links here" (FAT, some FUSE and network mounts).
_NO_LINK = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS})


def open_dir(path: str) -> int:
    """Open the directory ``path`` without following a symlink in its last component.

    Raises ``OSError``; a symlink fails with ``ENOTDIR`` (or ``ELOOP``), reported
    as such.
    """
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.islink(path):
            raise OSError(exc.errno, "is a symbolic link, not followed", path) from None
        raise


class InboxDirs:
    """The inbox (open) and removed directory (opened at the first claim) of one pickup."""

    def __init__(self, inbox_path: str, removed: str) -> None:
        self.inbox = inbox_path
        self.removed = removed
        self.ifd = open_dir(inbox_path)
        self._rfd: int | None = None

    def removed_fd(self) -> int:
        """The removed directory, created now if missing (lazily: a file is about to move)."""
        if self._rfd is None:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.removed)
            self._rfd = open_dir(self.removed)
        return self._rfd

    def close(self) -> None:
        os.close(self.ifd)
        if self._rfd is not None:
            os.close(self._rfd)


def open_regular(name: str, dir_fd: int) -> tuple[int, os.stat_result]:
    """Open ``name`` in ``dir_fd`` for reading without following, blocking or opening non-files.

    The ``lstat`` comes first so that a FIFO or device is never opened at all (an
    open, even non-blocking, releases a writer waiting on a FIFO and may have side
    effects on a device); ``fstat`` then checks what was actually opened, in case
    the entry was swapped in between.
    """
    if not stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", name)
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def lexists(name: str, dir_fd: int | None) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def read_text(fd: int, size: int, max_bytes: int) -> str:
    """At most ``max_bytes`` as text, with a visible note when there was more."""
    data = bytearray()  # grows in place: linear in what is read
    while len(data) <= max_bytes:
        chunk = os.read(fd, min(max_bytes + 1 - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    if len(data) <= max_bytes:
        return data.decode("utf-8", "replace")
    # final=False holds back a character cut in half by the limit instead of
    # turning it into a replacement character.
    head = codecs.getincrementaldecoder("utf-8")("replace").decode(data[:max_bytes], final=False)
    total = max(size, len(data))
    return f"{head}\n[scoutd: notice truncated at {max_bytes} of {total} bytes]"


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _renameat2_function() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28, not Linux
        return None


_renameat2 = _renameat2_function()


def _rename_noreplace(source: str, target: str, dir_fd: int | None) -> bool:
    """Rename ``source`` to ``target`` unless ``target`` exists: False when unsupported here.

    Raises ``FileExistsError`` when ``target`` exists, ``OSError`` otherwise.
    """
    if _renameat2 is None:
        return False
    fd = _AT_FDCWD if dir_fd is None else dir_fd
    result = _renameat2(
        fd, os.fsencode(source), fd, os.fsencode(target), ctypes.c_uint(_RENAME_NOREPLACE)
    )
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # this kernel or file system cannot: link below
    raise OSError(err, os.strerror(err), target)


def place(
    source: str,
    directory: str,
    names: Iterable[str],
    *,
    keep: bool = False,
    dir_fd: int | None = None,
    by_rename: bool = False,
) -> str:
    """Give ``source`` the first free name of ``names`` in ``directory``, never replacing one.

    With ``dir_fd`` (the directory, open), ``source`` and the names are relative to
    it; otherwise ``source`` is a path. With ``keep``, an existing entry of the
    first name is the answer instead. ``by_rename``: move with a rename that
    never replaces (``renameat2``) where the system has one, so that a watcher
    sees the file arrive whole (inotify ``IN_MOVED_TO``), not created; link
    otherwise. ``source`` is gone on success; returns the path of the new name;
    raises ``OSError`` otherwise.
    """
    for name in names:
        target = name if dir_fd is not None else os.path.join(directory, name)
        if by_rename:
            try:
                if _rename_noreplace(source, target, dir_fd):
                    return os.path.join(directory, name)
                by_rename = False  # unsupported: link from now on
            except FileExistsError:
                if keep:
                    os.unlink(source, dir_fd=dir_fd)
                    return os.path.join(directory, name)
                continue
        try:
            os.link(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno != errno.EEXIST and exc.errno not in _NO_LINK:
                raise
            if exc.errno == errno.EEXIST or lexists(target, dir_fd):
                if keep:
                    os.unlink(source, dir_fd=dir_fd)
                    return os.path.join(directory, name)
                continue
            # no hard links here: best effort, see above
            os.rename(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return os.path.join(directory, name)
        with contextlib.suppress(OSError):  # at worst a stray dotfile remains
            os.unlink(source, dir_fd=dir_fd)
        return os.path.join(directory, name)
    raise FileExistsError(errno.EEXIST, "no free name", directory)
