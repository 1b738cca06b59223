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

from .entries import entry_kind
from .names import inbox_dir, inbox_removed_dir
from .walk import open_directory

__all__ = [
    "MAX_SETTLE_WAIT",
    "SETTLE_TIME",
    "WRITE_FLAGS",
    "InboxDirs",
    "being_written",
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


def open_dir(path: str, *, dir_fd: int | None = None, shown: str | None = None) -> int:
    """Open the directory ``path`` without following a symlink in its last component.

    With ``dir_fd``, ``path`` is a name in that directory; ``shown`` is the
    path to report. Raises ``OSError``; something other than a directory
    fails with ``ENOTDIR`` (or ``ELOOP``), and says what it is.
    """
    try:
        return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        try:
            kind = entry_kind(os.lstat(path, dir_fd=dir_fd).st_mode)
        except OSError:
            raise exc from None
        where = shown or path
        if kind == "a symbolic link":
            raise OSError(exc.errno, "is a symbolic link, not followed", where) from None
        raise OSError(
            exc.errno, f"is not a directory but {kind or 'a regular file'}", where
        ) from None


class InboxDirs:
    """The inbox (open) and removed directory (opened at the first claim) of one pickup.

    Built with :meth:`of` from a save file: both are reached through the chat
    directory's descriptor, walked without an untrusted symlink
    (:mod:`scoutd.inbox.walk`), never by their paths.
    """

    def __init__(self, inbox_path: str, removed: str, *, chat_fd: int) -> None:
        """``chat_fd``: the chat directory, walked (:meth:`of`); this object closes it."""
        self.inbox = inbox_path
        self.removed = removed
        self._chat_fd = chat_fd
        self.ifd = open_dir(os.path.basename(inbox_path), dir_fd=chat_fd, shown=inbox_path)
        self._rfd: int | None = None

    @classmethod
    def of(cls, save_file: str | os.PathLike[str], *, exact: bool = False) -> InboxDirs | None:
        """The inbox of ``save_file``, open and searchable; None when it does not exist.

        ``exact``: ``save_file`` is a path the daemon resolved itself, where any
        symlink, root's too, was swapped in after its check and is refused
        (:func:`~scoutd.inbox.walk.open_directory`).

        The one definition of a usable inbox (docs/RELIABILITY.md, "An abort
        fails closed"): "does not exist" is a missing inbox or chat directory
        (``ENOENT``, a path component that is not a directory, an inbox name
        longer than any file system allows); anything
        else that keeps it from being opened and searched raises ``OSError``:
        a symlink or another kind of entry in its place, a symlink on the way
        that neither root nor this process's user made, a symlink loop, no
        permission (on the inbox, the chat directory or above). Such an inbox
        may hold an abort that nobody can see, so callers fail closed.

        Raises:
            ValueError: ``save_file`` has no file name.
            OSError: the inbox exists, or may, but cannot be used.
        """
        inbox_path, removed = inbox_dir(save_file), inbox_removed_dir(save_file)
        try:
            chat = open_directory(os.path.dirname(inbox_path) or ".", exact=exact)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG):
                return None
            raise
        try:
            inbox_path = os.path.join(chat.path, os.path.basename(inbox_path))
            removed = os.path.join(chat.path, os.path.basename(removed))
            dirs = cls(inbox_path, removed, chat_fd=chat.fd)
        except OSError as exc:
            os.close(chat.fd)
            if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):  # too long a name to exist
                return None
            raise
        except BaseException:
            os.close(chat.fd)
            raise
        try:
            os.stat(".", dir_fd=dirs.ifd)  # searchable: every entry can be examined
        except BaseException:
            dirs.close()
            raise
        return dirs

    def removed_fd(self) -> int:
        """The removed directory, created now if missing (lazily: a file is about to move)."""
        if self._rfd is None:
            name = os.path.basename(self.removed)
            with contextlib.suppress(FileExistsError):
                if os.geteuid() == 0 and os.fstat(self.ifd).st_uid != 0:
                    self._make_removed_for_owner(name)
                else:
                    os.mkdir(name, dir_fd=self._chat_fd)
            self._rfd = open_dir(name, dir_fd=self._chat_fd, shown=self.removed)
        return self._rfd

    def _make_removed_for_owner(self, name: str) -> None:
        """Root makes the removed directory of another user's inbox: it is that user's.

        With the inbox's owner, group and mode, and it appears whole (made under
        a hidden name, then renamed without replacing): a root-owned one, made
        by the daemon's first claim, refused every later claim of the agent's
        own process (the library), so its notices were never delivered again.
        Raises ``FileExistsError`` when one exists (made meanwhile).
        """
        temp = f".inbox_removed-{os.getpid()}-{os.urandom(8).hex()}"
        os.mkdir(temp, 0o700, dir_fd=self._chat_fd)
        try:
            tfd = open_dir(temp, dir_fd=self._chat_fd)
            try:
                inbox = os.fstat(self.ifd)
                os.chown(tfd, inbox.st_uid, inbox.st_gid)  # the descriptor: never followed
                os.chmod(tfd, stat.S_IMODE(inbox.st_mode))
            finally:
                os.close(tfd)
            place(temp, "", [name], dir_fd=self._chat_fd, by_rename=True)
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(temp, dir_fd=self._chat_fd)

    def close(self) -> None:
        os.close(self.ifd)
        if self._rfd is not None:
            os.close(self._rfd)
        os.close(self._chat_fd)


class _Reader:
    """A user whose rights a read stands for; its groups looked up once, when needed."""

    __slots__ = ("_groups", "gid", "uid")

    def __init__(self, uid: int, gid: int) -> None:
        self.uid, self.gid = uid, gid
        self._groups: frozenset[int] | None = None

    def may_read(self, st: os.stat_result) -> bool:
        """Whether the mode bits let this user read (owner, else group, else other)."""
        if self.uid == 0:
            return True
        if st.st_uid == self.uid:
            return bool(st.st_mode & stat.S_IRUSR)
        if self._groups is None:
            self._groups = _groups(self.uid, self.gid)
        if st.st_gid in self._groups:
            return bool(st.st_mode & stat.S_IRGRP)
        return bool(st.st_mode & stat.S_IROTH)


def _groups(uid: int, gid: int) -> frozenset[int]:
    """``uid``'s groups; the directory's ``gid`` alone for a user the database lacks."""
    import pwd

    try:
        user = pwd.getpwuid(uid)
        return frozenset((user.pw_gid, *os.getgrouplist(user.pw_name, user.pw_gid)))
    except (KeyError, OSError):
        return frozenset((gid,))


def _reader_of(st: os.stat_result) -> _Reader | None:
    """The owner of directory ``st``; None when it is this process's user."""
    return None if st.st_uid == os.geteuid() else _Reader(st.st_uid, st.st_gid)


def open_regular(
    name: str, dir_fd: int, *, rights_of: int | None = None
) -> tuple[int, os.stat_result]:
    """Open ``name`` in ``dir_fd`` for reading without following, blocking or opening non-files.

    The ``lstat`` comes first so that a FIFO or device is never opened at all (an
    open, even non-blocking, releases a writer waiting on a FIFO and may have side
    effects on a device); ``fstat`` then checks what was actually opened, in case
    the entry was swapped in between.

    A file that the owner of directory ``rights_of`` (default ``dir_fd``: the
    inbox, for a file moved on into the removed directory) could not read by
    its mode bits raises ``PermissionError``, checked on what was opened, when
    that owner is not this process's user: the agent can rename into its own
    inbox (or beside its chat) a file it may not read, one of root's in a
    directory it owns, and a reader of another uid (the daemon, usually root)
    never reads it for the agent. Mode bits as the kernel applies them (no
    ACLs), the groups from the user database.
    """
    if not stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", name)
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        reader = _reader_of(os.fstat(dir_fd if rights_of is None else rights_of))
        if reader is not None and not reader.may_read(st):
            words = f"uid {reader.uid}, whose directory it is in, may not read it"
            raise PermissionError(errno.EACCES, words, name)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


# A file written in place is complete once it has not changed for this long
# (scoutd.inbox.claim). Short, because an abort's push waits for it; long enough
# for a writer between two writes. Here, with the file primitives, so that the
# writers (which date their files back past it) load no claim code.
SETTLE_TIME = 0.05
# A file still changing after this long: a notice waits for the next pickup, an
# abort is taken as it is (an agent rewriting it must not delay its own abort).
MAX_SETTLE_WAIT = 2.0


def being_written(fd: int) -> bool | None:
    """Whether any process holds the regular file ``fd`` open for writing.

    Asked with a read lease (``F_SETLEASE``), which the kernel grants only
    while nobody has the file open for writing, and which is dropped again at
    once. None when this system cannot tell: no leases on this file system or
    platform, or a file this user does not own without ``CAP_LEASE``.
    """
    # Imported here: the writers, which a light verb loads, never ask.
    try:
        import fcntl
    except ImportError:  # not POSIX: no leases, the settle rule decides
        return None
    from signal import SIGURG

    if not hasattr(fcntl, "F_SETLEASE"):
        return None
    try:
        # SIGURG is sent by the kernel if a writer opens the file while the lease is
        # held; its default action is to ignore it (SIGIO's, the default, ends the process).
        fcntl.fcntl(fd, fcntl.F_SETSIG, SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        return True if exc.errno == errno.EAGAIN else None
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    return False


def lexists(name: str, dir_fd: int | None) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def read_text(fd: int, size: int, max_bytes: int) -> str:
    """At most ``max_bytes`` as text, with a visible note when there was more.

    The limit counts the bytes delivered (the text's UTF-8), not only those
    read: each byte that is not UTF-8 becomes U+FFFD, three bytes, so a file
    of such bytes would otherwise deliver three times its limit.
    """
    data = bytearray()  # grows in place: linear in what is read
    while len(data) <= max_bytes:
        chunk = os.read(fd, min(max_bytes + 1 - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    cut = len(data) > max_bytes
    # final=False holds back a character cut in half by the limit instead of
    # turning it into a replacement character.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data[:max_bytes], final=not cut)
    encoded = text.encode("utf-8")
    if len(encoded) > max_bytes:  # replacement characters: cut on a character boundary
        text, cut = encoded[:max_bytes].decode("utf-8", "ignore"), True
    if not cut:
        return text
    total = max(size, len(data))
    return f"{text}\n[scoutd: notice truncated at {max_bytes} of {total} bytes]"


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
