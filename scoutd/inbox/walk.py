"""Reaching a chat's directory without following a symlink someone else made.

The kernel follows every symlink in a path. An agent writes in its own chat
directory (and often in the one above it), so it can swap a directory of the
path for a symlink to another agent's: an operator's abort would land in the
wrong inbox, or the daemon would claim another agent's abort. Every party that
reaches an inbox (the writers, the library's pickup, the daemon) therefore
opens the path one component at a time, each relative to the descriptor of the
one before, and follows a symlink only when root or the user acting owns it:
the system's links and the caller's own, never one another account (the
agent) made. The kernel's ``fs.protected_symlinks`` applies the same idea to
sticky directories; here it applies everywhere on the way to an inbox.

The daemon works on paths it resolved itself (``allowed_roots`` check), which
hold no symlink at all (but a loop it could not resolve): one found there later
was swapped in after the check, whoever owns it (root's own links lie in
agents' trees too). The daemon's callers say so (``exact=True``): any symlink
on the way is then refused, root's included, and the chat counts as unusable
(an abort fails closed). The library and the CLI writers, given a user's own
path, follow root's links and their own.

Nothing here reads an entry; the directories are opened ``O_PATH``, which
needs search permission on the way, like the kernel's own resolution.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from typing import Any, NamedTuple

__all__ = ["MAX_LINKS", "Walked", "open_directory", "trusted_link"]

# As the kernel's own limit on the symlinks followed in one resolution.
MAX_LINKS = 40
# Swaps seen between the look at a component and its open, before giving up.
_RETRIES = 8

_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC

# openat2(2) (Linux 5.6): the whole path in one call, failing with ELOOP at any symlink.
_SYS_OPENAT2 = 437  # the same number on every architecture that has it
_RESOLVE_NO_SYMLINKS = 0x04
_AT_FDCWD = -100


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _syscall() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None


_syscall_function = _syscall()
# Known at import. A kernel or seccomp filter that refuses openat2 is not remembered
# either: its refusal costs one failed system call per open, a memo would be
# process-wide mutable state (docs/ARCHITECTURE.md)
_OPENAT2_ABSENT = _syscall_function is None or os.uname().sysname != "Linux"


def _open_without_symlinks(path: str) -> int | None:
    """``path`` opened in one call if no component is a symlink; None: look step by step.

    None when a symlink is on the way (``ELOOP``) or ``openat2`` is missing;
    raises ``OSError`` for anything else (``ENOENT``, ``EACCES``...).
    """
    if _OPENAT2_ABSENT:
        return None
    how = _OpenHow(flags=_PATH_FLAGS & ~os.O_NOFOLLOW, mode=0, resolve=_RESOLVE_NO_SYMLINKS)
    fd = _syscall_function(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(_AT_FDCWD),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG, errno.EINVAL):  # not here (seccomp...)
        return None
    if err in (errno.ELOOP, errno.EXDEV, errno.EAGAIN):
        return None  # a symlink on the way: each is judged step by step
    raise OSError(err, os.strerror(err), path)


class Walked(NamedTuple):
    """A directory reached without an untrusted symlink: its descriptor (``O_PATH``,
    usable as ``dir_fd``) and its real path, symlinks resolved."""

    fd: int
    path: str


def trusted_link(st: os.stat_result) -> bool:
    """Whether a symlink with ``lstat`` result ``st`` may be followed: root's or ours."""
    return st.st_uid in (0, os.geteuid())


def _refused(where: str, st: os.stat_result, why: str) -> OSError:
    """The error for the symlink at ``where`` that is not followed, and why."""
    return OSError(errno.ELOOP, f"is a symbolic link owned by uid {st.st_uid}{why}", where)


def _swapped_in(where: str, st: os.stat_result) -> OSError:
    why = (
        " on a path the daemon resolved itself, where it follows no symbolic links"
        " (swapped in after its check, or a loop)"
    )
    return _refused(where, st, why)


def _untrusted(where: str, st: os.stat_result) -> OSError:
    return _refused(where, st, f" (neither root nor uid {os.geteuid()}), not followed")


def _read_link(name: str, dir_fd: int, where: str) -> str | None:
    """The target of the trusted symlink ``name``; None when it is no longer a symlink.

    The link is opened itself (``O_PATH | O_NOFOLLOW``) and checked and read
    through that descriptor, so a link swapped after the check is never read.
    """
    fd = os.open(name, _LINK_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISLNK(st.st_mode):
            return None
        if not trusted_link(st):
            raise _untrusted(where, st)
        return os.readlink("", dir_fd=fd)
    finally:
        os.close(fd)


def _make(name: str, dir_fd: int) -> None:
    with contextlib.suppress(FileExistsError):  # made meanwhile: fine
        os.mkdir(name, 0o777, dir_fd=dir_fd)


def open_directory(path: str, *, create: bool = False, exact: bool = False) -> Walked:
    """Open the directory ``path`` one component at a time (see the module's rule).

    A relative ``path`` starts at the working directory; ``..`` goes to the
    real parent, as in the kernel. ``create``: make missing directories (mode
    ``0o777`` less the umask, as ``mkdir -p``). ``exact``: ``path`` is one the
    daemon resolved itself, so no symlink on it is followed, whoever owns it
    (the module's rule). Raises ``OSError``: ``ENOENT``
    or ``ENOTDIR`` when a component is missing or not a directory, ``ELOOP``
    for a symlink not followed (its owner named) or too many links, and what
    the kernel raises otherwise (``EACCES``...); ``filename`` says where.
    """
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    try:
        direct = _open_without_symlinks(path)
    except (FileNotFoundError, NotADirectoryError):
        if not create:
            raise
        direct = None  # made step by step below
    if direct is not None:  # no symlink on the way: the path is its own real path
        return Walked(direct, os.path.normpath(path))
    parts = [part for part in reversed(path.split("/")) if part not in ("", ".")]
    fd = os.open("/", _PATH_FLAGS)
    real: list[str] = []
    links = 0
    try:
        while parts:
            name = parts.pop()
            if name == "..":
                if real:
                    parent = os.open("..", _PATH_FLAGS, dir_fd=fd)
                    os.close(fd)
                    fd = parent
                    real.pop()
                continue
            where = "/" + "/".join([*real, name])
            for _ in range(_RETRIES):
                try:
                    st = os.lstat(name, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise FileNotFoundError(errno.ENOENT, "no such directory", where) from None
                    _make(name, fd)
                    continue
                if stat.S_ISLNK(st.st_mode):
                    if exact:
                        raise _swapped_in(where, st)
                    if not trusted_link(st):
                        raise _untrusted(where, st)
                    target = _read_link(name, fd, where)
                    if target is None:
                        continue  # replaced meanwhile: look again
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, "too many levels of symbolic links", where)
                    parts.extend(
                        part for part in reversed(target.split("/")) if part not in ("", ".")
                    )
                    if target.startswith("/"):
                        top = os.open("/", _PATH_FLAGS)
                        os.close(fd)
                        fd = top
                        real.clear()
                    break
                if not stat.S_ISDIR(st.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", where)
                try:
                    child = os.open(name, _PATH_FLAGS, dir_fd=fd)
                except (NotADirectoryError, FileNotFoundError):
                    continue  # swapped for a symlink or a file meanwhile: look again
                os.close(fd)
                fd = child
                real.append(name)
                break
            else:
                raise OSError(errno.ELOOP, "kept changing while it was opened", where)
        return Walked(fd, "/" + "/".join(real))
    except BaseException:
        os.close(fd)
        raise
