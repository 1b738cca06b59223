"""``inbox`` (SPEC section 7): operator notices, delivered at most once.

Operators drop files into ``<stem>.inbox`` beside a chat's save file. Each
regular file is moved into ``<stem>.inbox_removed``, only then read, and
appended to the prompt as a ``user`` message; a file named ``abort`` raises
:class:`~scoutd.errors.Aborted` instead. Claiming one file (:func:`_take`):

1. *Check in place*: open with ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``. A
   symlink fails (``ELOOP``), a FIFO swapped in after the listing opens without
   waiting for a writer; what is not a readable regular file stays put.
2. *Claim*: ``rename`` it to a private ``.claim-<pid>-<random>`` name in the
   removed directory. Of N racing consumers exactly one rename succeeds; the
   others get ``ENOENT`` and skip. The claimed entry is checked again by its
   private name, in case another entry took the name after step 1.
3. *Read* at most ``inbox_max_bytes``.
4. *Record*: ``link`` the private name to ``note.txt``, else ``note.1.txt``, ...
   (link fails with ``EEXIST`` where rename would replace, so no record is
   overwritten, even by a consumer recording the same name at the same
   instant), then unlink the private name. The inode, hence the mtime, is kept.
5. *Put back* an entry that failed step 2's check or step 3: link it to its
   inbox name again (never over a newer file) and unlink the private name.

Only the consumer whose rename succeeded delivers, after its claim: delivery
is at most once. A crash between claim and record leaves a ``.claim-*``
dotfile in the removed directory: consumed, never delivered.

Both directories are opened once per pickup with ``O_NOFOLLOW | O_DIRECTORY``
and every step names entries relative to those descriptors (``*at`` calls). An
inbox or removed directory that is a symlink is refused (logged), and one
swapped for a symlink after that check cannot redirect a move: otherwise a
client allowed to write beside its save file could make the daemon empty, or
fill, a directory outside ``allowed_roots`` (SPEC section 10). Writers refuse a
symlinked inbox the same way.

Resource handling: each descriptor is closed by the function that opened it.
Readers never create the inbox; they create the removed directory just before
the first claim. Writers create the inbox, write and fsync a dotfile there
(readers ignore dotfiles) and link it to its final name: no partial notice is
ever visible.

Error handling: no ``OSError`` escapes :func:`inbox` or :func:`claim_abort`.
Each file stands alone: a failure is logged (logger ``scoutd.inbox``, warning)
and the next file is tried; a file another consumer took first is skipped
(debug). Without hard links (FAT, some FUSE mounts) an existence check and
rename replace link: no overwrite except by two parties racing for one name.
An entry swapped for a device node (root only) may be opened once, never
read. The writers raise ``OSError`` to their caller.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import logging
import os
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..config import PromptConfig
from ..errors import Aborted
from .report import StrategyReport, content_chars

__all__ = [
    "ABORT_NAME",
    "claim_abort",
    "inbox",
    "inbox_dir",
    "inbox_removed_dir",
    "write_abort",
    "write_notice",
]

ABORT_NAME = "abort"

log = logging.getLogger("scoutd.inbox")

# O_NONBLOCK: a FIFO swapped in after the listing opens at once, never waiting for
# a writer (regular files ignore the flag). O_NOFOLLOW: a symlink is never followed.
# O_NOCTTY: a terminal never becomes the process's controlling terminal.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# The inbox and removed directories themselves: a symlink there is refused, never followed.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# Names tried for one record or notice: far beyond any real inbox, but bounded so
# that a misbehaving filesystem cannot keep a caller looping.
_MAX_NAMES = 100_000

# link() errors that mean "no hard links here" (FAT, some FUSE and network mounts).
_NO_LINK = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS})


def _stem_path(save_file: str | os.PathLike[str], suffix: str) -> str:
    directory, base = os.path.split(os.fspath(save_file))
    stem = os.path.splitext(base)[0]  # a leading dot is not an extension: ".chat"
    if not stem:
        raise ValueError(f"save file {os.fspath(save_file)!r} has no file name")
    return os.path.join(directory, stem + suffix)


def inbox_dir(save_file: str | os.PathLike[str]) -> str:
    """The inbox beside ``save_file``: ``D/a.b.chat`` -> ``D/a.b.inbox``."""
    return _stem_path(save_file, ".inbox")


def inbox_removed_dir(save_file: str | os.PathLike[str]) -> str:
    """Where delivered notices are kept: ``D/a.b.chat`` -> ``D/a.b.inbox_removed``."""
    return _stem_path(save_file, ".inbox_removed")


def _numbered(name: str, n: int) -> str:
    """The ``n``-th collision name: ``note.txt`` -> ``note.1.txt``, ``abort`` -> ``abort.1``."""
    if n == 0:
        return name
    root, ext = os.path.splitext(name)
    return f"{root}.{n}{ext}"


def _open_dir(path: str) -> int:
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


class _Dirs:
    """The inbox (open) and removed directory (opened at the first claim) of one pickup."""

    def __init__(self, inbox_path: str, removed: str) -> None:
        self.inbox = inbox_path
        self.removed = removed
        self.ifd = _open_dir(inbox_path)
        self._rfd: int | None = None

    def removed_fd(self) -> int:
        """The removed directory, created now if missing (lazily: a file is about to move)."""
        if self._rfd is None:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.removed)
            self._rfd = _open_dir(self.removed)
        return self._rfd

    def close(self) -> None:
        os.close(self.ifd)
        if self._rfd is not None:
            os.close(self._rfd)


def _open_regular(name: str, dir_fd: int) -> tuple[int, os.stat_result]:
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


def _lexists(name: str, dir_fd: int | None) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def _read(fd: int, size: int, max_bytes: int) -> str:
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


def _place(
    source: str,
    directory: str,
    names: Iterable[str],
    *,
    keep: bool = False,
    dir_fd: int | None = None,
) -> str:
    """Give ``source`` the first free name of ``names`` in ``directory``, never replacing one.

    With ``dir_fd`` (the directory, open), ``source`` and the names are relative to
    it; otherwise ``source`` is a path. With ``keep``, an existing entry of the
    first name is the answer instead. ``source`` is gone on success; returns the
    path of the new name; raises ``OSError`` otherwise.
    """
    for name in names:
        target = name if dir_fd is not None else os.path.join(directory, name)
        try:
            os.link(source, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno != errno.EEXIST and exc.errno not in _NO_LINK:
                raise
            if exc.errno == errno.EEXIST or _lexists(target, dir_fd):
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


def _put_back(dirs: _Dirs, claim: str, name: str) -> None:
    """Return a claimed but undelivered entry to the inbox, never over a newer file."""
    rfd = dirs.removed_fd()
    try:
        os.link(claim, name, src_dir_fd=rfd, dst_dir_fd=dirs.ifd, follow_symlinks=False)
        os.unlink(claim, dir_fd=rfd)
        return
    except FileExistsError:
        pass
    except OSError:  # a directory, or no hard links: rename unless the name is taken
        with contextlib.suppress(OSError):
            if not _lexists(name, dirs.ifd):
                os.rename(claim, name, src_dir_fd=rfd, dst_dir_fd=dirs.ifd)
                return
    log.warning(
        "could not return %r to %r; it stays in the removed directory",
        os.path.join(dirs.removed, claim),
        os.path.join(dirs.inbox, name),
    )


def _take(dirs: _Dirs, name: str, max_bytes: int) -> tuple[str, str] | None:
    """Claim, read and record one inbox file (module docstring, steps 1-5).

    Returns ``(record_path, text)``, or None when the file stays in (or went
    back to) the inbox or another consumer took it. Raises ``OSError`` for a
    failure before the claim; the file is then still in the inbox.
    """
    source = os.path.join(dirs.inbox, name)
    try:
        fd, _ = _open_regular(name, dirs.ifd)
    except FileNotFoundError:
        log.debug("inbox file %r was taken by another consumer", source)
        return None
    os.close(fd)
    rfd = dirs.removed_fd()
    claim = f".claim-{os.getpid()}-{os.urandom(8).hex()}"
    try:
        os.rename(name, claim, src_dir_fd=dirs.ifd, dst_dir_fd=rfd)
    except FileNotFoundError:
        log.debug("inbox file %r was taken by another consumer", source)
        return None
    try:
        fd, st = _open_regular(claim, rfd)
        try:
            text = _read(fd, st.st_size, max_bytes)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("inbox file %r not delivered: %s", source, exc)
        _put_back(dirs, claim, name)
        return None
    names = (_numbered(name, n) for n in range(_MAX_NAMES))
    try:
        record = _place(claim, dirs.removed, names, dir_fd=rfd)
    except OSError as exc:
        record = os.path.join(dirs.removed, claim)
        log.warning("inbox file %r delivered, recorded as %r: %s", source, record, exc)
    return record, text


def _abort_reason(text: str, record: str) -> str:
    return text.strip() or f"aborted by operator (abort file {record})"


def inbox(
    messages: Sequence[Any], config: PromptConfig, *, save_file: str | None = None
) -> tuple[list[Any], StrategyReport]:
    """Append each pending notice of ``save_file``'s inbox as a ``user`` message.

    Returns a new list (``messages`` is not modified) and the report. Without a
    ``save_file`` or an inbox directory, nothing is touched or created.

    Raises:
        Aborted: the inbox held an ``abort`` file (now consumed); files sorted
            before it were consumed, those after it stay for the next run.
    """
    out = list(messages)
    delivered = 0
    budget = config.inbox_max_total_bytes  # for all notices of this call; aborts always pass
    dirs = _open_inbox(save_file) if save_file is not None else None
    if dirs is not None:
        try:
            for name in _pending(dirs):
                if budget <= 0 and name != ABORT_NAME:
                    continue  # stays for the next call
                try:
                    limit = config.inbox_max_bytes
                    taken = _take(dirs, name, limit if name == ABORT_NAME else min(limit, budget))
                except OSError as exc:
                    path = os.path.join(dirs.inbox, name)
                    log.warning("inbox file %r left in place: %s", path, exc)
                    continue
                if taken is None:
                    continue
                record, text = taken
                if name == ABORT_NAME:
                    raise Aborted(_abort_reason(text, record))
                out.append({"role": "user", "content": text})
                delivered += 1
                budget -= len(text.encode("utf-8"))
        finally:
            dirs.close()
    return out, StrategyReport(
        strategy="inbox",
        inbox_delivered=delivered,
        chars_before=content_chars(messages),
        chars_after=content_chars(out),
    )


def _open_inbox(save_file: str | os.PathLike[str]) -> _Dirs | None:
    """The inbox of ``save_file``, open; None (logged unless simply absent) otherwise."""
    if not os.fspath(save_file).strip():
        return None
    try:
        return _Dirs(inbox_dir(save_file), inbox_removed_dir(save_file))
    except ValueError as exc:
        log.warning("no inbox: %s", exc)
    except FileNotFoundError:  # the common case: nothing was ever dropped
        pass
    except OSError as exc:
        log.warning("cannot list inbox %r: %s", inbox_dir(save_file), exc)
    return None


def _pending(dirs: _Dirs) -> list[str]:
    """Sorted names of the regular, non-dot files of an open inbox."""
    try:
        with os.scandir(dirs.ifd) as entries:
            names = [
                entry.name
                for entry in entries
                if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)
            ]
    except OSError as exc:
        log.warning("cannot list inbox %r: %s", dirs.inbox, exc)
        return []
    return sorted(names)


def claim_abort(save_file: str, *, max_bytes: int = 1 << 20) -> str | None:
    """Consume only the ``abort`` file of ``save_file``'s inbox; return its reason.

    None when there is no abort file, it is not a readable regular file, or
    another party consumed it first. Never raises ``OSError``.
    """
    dirs = _open_inbox(save_file)
    if dirs is None:
        return None
    try:
        taken = _take(dirs, ABORT_NAME, max_bytes)
    except OSError as exc:
        log.warning("abort file of %r left in place: %s", save_file, exc)
        return None
    finally:
        dirs.close()
    return None if taken is None else _abort_reason(taken[1], taken[0])


def _drop(save_file: str, text: str, names: Iterable[str], *, keep: bool = False) -> str:
    """Write ``text`` to a dotfile in the inbox, fsync it, then give it a final name."""
    directory = inbox_dir(save_file)
    os.makedirs(directory, exist_ok=True)
    dfd = _open_dir(directory)
    try:
        temp = f".tmp-{os.getpid()}-{os.urandom(8).hex()}"
        fd = os.open(temp, _WRITE_FLAGS, 0o666, dir_fd=dfd)
        try:
            try:
                data = memoryview(text.encode("utf-8"))
                while data:
                    data = data[os.write(fd, data) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            final = _place(temp, directory, names, keep=keep, dir_fd=dfd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dfd)
        with contextlib.suppress(OSError):  # make the new entry durable (best effort)
            os.fsync(dfd)
    finally:
        os.close(dfd)
    return final


def _fresh_names() -> Iterator[str]:
    """Names that sort in drop order: nanoseconds, strictly increasing, then the pid."""
    last = 0
    for _ in range(_MAX_NAMES):
        last = max(time.time_ns(), last + 1)
        yield f"{last:020d}-{os.getpid()}.txt"


def write_notice(save_file: str, text: str, *, name: str | None = None) -> str:
    """Drop ``text`` into ``save_file``'s inbox atomically; return the final path.

    ``name`` defaults to a unique name that sorts in drop order; an existing
    file is never replaced (``note.txt`` becomes ``note.1.txt``, ...).

    Raises:
        ValueError: ``name`` is not a plain, visible file name, or is ``abort``.
        OSError: the inbox cannot be created or written.
    """
    if name is None:
        return _drop(save_file, text, _fresh_names())
    if not name or name.startswith(".") or "/" in name or "\0" in name or name == ABORT_NAME:
        raise ValueError(f"invalid notice name {name!r}: a plain file name, not hidden nor 'abort'")
    return _drop(save_file, text, (_numbered(name, n) for n in range(_MAX_NAMES)))


def write_abort(save_file: str, reason: str = "") -> str:
    """Drop an ``abort`` file into ``save_file``'s inbox; an abort already waiting is kept.

    Returns the path of the ``abort`` file. Raises ``OSError`` as :func:`write_notice`.
    """
    return _drop(save_file, reason, [ABORT_NAME], keep=True)
