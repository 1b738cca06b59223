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


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading without following, blocking or opening non-files."""
    fd = os.open(path, _READ_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read(fd: int, size: int, max_bytes: int) -> str:
    """At most ``max_bytes`` as text, with a visible note when there was more."""
    data = b""
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


def _place(source: str, directory: str, names: Iterable[str], *, keep: bool = False) -> str:
    """Give ``source`` the first free name of ``names`` in ``directory``, never replacing one.

    With ``keep``, an existing entry of the first name is the answer instead.
    ``source`` is gone on success; raises ``OSError`` otherwise.
    """
    for name in names:
        target = os.path.join(directory, name)
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError as exc:
            if exc.errno != errno.EEXIST and exc.errno not in _NO_LINK:
                raise
            if exc.errno == errno.EEXIST or os.path.lexists(target):
                if keep:
                    os.unlink(source)
                    return target
                continue
            os.rename(source, target)  # no hard links here: best effort, see above
            return target
        with contextlib.suppress(OSError):  # at worst a stray dotfile remains
            os.unlink(source)
        return target
    raise FileExistsError(errno.EEXIST, "no free name", directory)


def _put_back(claim: str, source: str) -> None:
    """Return a claimed but undelivered entry to the inbox, never over a newer file."""
    try:
        os.link(claim, source, follow_symlinks=False)
        os.unlink(claim)
        return
    except FileExistsError:
        pass
    except OSError:  # a directory, or no hard links: rename unless the name is taken
        with contextlib.suppress(OSError):
            if not os.path.lexists(source):
                os.rename(claim, source)
                return
    log.warning("could not return %s to %s; it stays in the removed directory", claim, source)


def _take(inbox_path: str, removed: str, name: str, max_bytes: int) -> tuple[str, str] | None:
    """Claim, read and record one inbox file (module docstring, steps 1-5).

    Returns ``(record_path, text)``, or None when the file stays in (or went
    back to) the inbox or another consumer took it. Raises ``OSError`` for a
    failure before the claim; the file is then still in the inbox.
    """
    source = os.path.join(inbox_path, name)
    try:
        fd, _ = _open_regular(source)
    except FileNotFoundError:
        log.debug("inbox file %s was taken by another consumer", source)
        return None
    os.close(fd)
    os.makedirs(removed, exist_ok=True)  # lazily: a file is about to move in
    claim = os.path.join(removed, f".claim-{os.getpid()}-{os.urandom(8).hex()}")
    try:
        os.rename(source, claim)
    except FileNotFoundError:
        log.debug("inbox file %s was taken by another consumer", source)
        return None
    try:
        fd, st = _open_regular(claim)
        try:
            text = _read(fd, st.st_size, max_bytes)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("inbox file %s not delivered: %s", source, exc)
        _put_back(claim, source)
        return None
    try:
        record = _place(claim, removed, (_numbered(name, n) for n in range(_MAX_NAMES)))
    except OSError as exc:
        log.warning("inbox file %s delivered, recorded as %s: %s", source, claim, exc)
        record = claim
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
    if save_file is not None and os.fspath(save_file).strip():
        try:
            directory, removed = inbox_dir(save_file), inbox_removed_dir(save_file)
        except ValueError as exc:
            log.warning("no inbox: %s", exc)
            directory = removed = ""
        for name in _pending(directory) if directory else ():
            try:
                taken = _take(directory, removed, name, config.inbox_max_bytes)
            except OSError as exc:
                log.warning("inbox file %s left in place: %s", os.path.join(directory, name), exc)
                continue
            if taken is None:
                continue
            record, text = taken
            if name == ABORT_NAME:
                raise Aborted(_abort_reason(text, record))
            out.append({"role": "user", "content": text})
            delivered += 1
    return out, StrategyReport(
        strategy="inbox",
        inbox_delivered=delivered,
        chars_before=content_chars(messages),
        chars_after=content_chars(out),
    )


def _pending(directory: str) -> list[str]:
    """Sorted names of the regular, non-dot files of an inbox; [] if there is none."""
    try:
        with os.scandir(directory) as entries:
            names = [
                entry.name
                for entry in entries
                if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)
            ]
    except FileNotFoundError:  # the common case: nothing was ever dropped
        return []
    except OSError as exc:
        log.warning("cannot list inbox %s: %s", directory, exc)
        return []
    return sorted(names)


def claim_abort(save_file: str, *, max_bytes: int = 1 << 20) -> str | None:
    """Consume only the ``abort`` file of ``save_file``'s inbox; return its reason.

    None when there is no abort file, it is not a readable regular file, or
    another party consumed it first. Never raises ``OSError``.
    """
    try:
        directory, removed = inbox_dir(save_file), inbox_removed_dir(save_file)
        taken = _take(directory, removed, ABORT_NAME, max_bytes)
    except (OSError, ValueError) as exc:
        log.warning("abort file of %s left in place: %s", save_file, exc)
        return None
    return None if taken is None else _abort_reason(taken[1], taken[0])


def _sync_dir(directory: str) -> None:
    """Make a new directory entry durable (best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _drop(save_file: str, text: str, names: Iterable[str], *, keep: bool = False) -> str:
    """Write ``text`` to a dotfile in the inbox, fsync it, then give it a final name."""
    directory = inbox_dir(save_file)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".tmp-{os.getpid()}-{os.urandom(8).hex()}")
    fd = os.open(temp, _WRITE_FLAGS, 0o666)
    try:
        try:
            data = memoryview(text.encode("utf-8"))
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        final = _place(temp, directory, names, keep=keep)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    _sync_dir(directory)
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
