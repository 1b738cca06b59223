"""The simulator's input files, read as the CLI reads a FILE (docs/OPERATIONS.md).

A chat file (``--chat``) and each line of a runs file (``--runs``, gzip when
its name ends in ``.gz``) are read up to :data:`MAX_INPUT_BYTES`: ``/dev/zero``,
a runaway producer or a gzip bomb ends in one error line instead of taking all
memory. A file is opened without blocking, so that a FIFO nobody writes to is
an error, not a wait (one with a writer, such as ``<(zcat runs.jsonl.gz)``, is
read), and a directory is refused by name.
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from ..paths import MAX_INPUT_BYTES, open_input

__all__ = ["MAX_INPUT_BYTES", "ChatError", "is_regular", "read_bounded", "read_lines"]

_CHUNK = 1024 * 1024


class ChatError(ValueError):
    """A recorded chat or runs file that cannot be replayed."""


def _mib(limit: int) -> str:
    return f"{limit / (1024 * 1024):g} MiB"


def _open(path: str, what: str) -> tuple[BinaryIO, bool]:
    """``path`` open for reading, and whether it is a FIFO; a directory is refused.

    Opened without blocking (a FIFO without a writer would wait in ``open``),
    then set blocking again, so that a writer that is there is waited for.
    """
    try:
        fd, mode = open_input(path)
    except OSError as exc:
        raise ChatError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    return os.fdopen(fd, "rb"), stat.S_ISFIFO(mode)


def _no_writer(path: str, what: str) -> ChatError:
    return ChatError(f"cannot read {what} {path}: a FIFO with no writer (nothing to read)")


def _bounded(handle: BinaryIO, path: str, what: str, limit: int) -> bytes:
    data = bytearray()
    while chunk := handle.read(_CHUNK):
        data += chunk
        if len(data) > limit:
            raise ChatError(f"{what} {path} is larger than {_mib(limit)}: refused")
    return bytes(data)


def read_bounded(path: str, what: str = "chat", limit: int | None = None) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``limit`` (default
    :data:`MAX_INPUT_BYTES`).

    Raises:
        ChatError: it cannot be read, is a directory, a FIFO with no writer,
            or holds more than ``limit`` bytes.
    """
    limit = MAX_INPUT_BYTES if limit is None else limit
    if path == "-":
        if sys.stdin is None:  # started with fd 0 closed
            raise ChatError(f"cannot read {what} from stdin: standard input is closed")
        try:
            return _bounded(sys.stdin.buffer, "stdin", what, limit)
        except OSError as exc:
            raise ChatError(f"cannot read {what} from stdin: {exc.strerror or exc}") from exc
    handle, fifo = _open(path, what)
    try:
        with handle:
            data = _bounded(handle, path, what, limit)
    except OSError as exc:
        raise ChatError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    if not data and fifo:
        raise _no_writer(path, what)
    return data


def read_lines(path: str, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of every line of ``path`` (``.gz``: gzip), each at most
    ``limit`` bytes (default :data:`MAX_INPUT_BYTES`).

    Only one line is held at a time, and never more than ``limit`` bytes of it.

    Raises:
        ChatError: the file cannot be read (a corrupt or truncated gzip stream
            too), is a directory or a FIFO with no writer, or a line is longer
            than ``limit``.
    """
    what = "runs"
    limit = MAX_INPUT_BYTES if limit is None else limit
    handle, fifo = _open(path, what)
    number = 0
    try:
        with handle:
            reader: BinaryIO = (
                gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[assignment]
                if path.endswith(".gz")
                else handle
            )
            with reader:
                while line := reader.readline(limit + 1):
                    number += 1
                    if len(line) > limit:
                        raise ChatError(f"{path}:{number}: a line longer than {_mib(limit)}")
                    yield number, line
    except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt gzip stream
        raise ChatError(f"cannot read {what} {path}: {exc}") from exc
    if number == 0 and fifo:
        raise _no_writer(path, what)


def is_regular(path: str) -> bool:
    """Whether ``path`` is a regular file, which can be read twice (a pipe cannot)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
