"""Safe rendering of paths and other text that may hold undecodable bytes.

Paths are bytes. Python hands a file name that is not valid UTF-8 to us as a
``str`` holding lone surrogates (``surrogateescape``), and such a string
cannot be encoded as UTF-8: written to a log, an error message or a JSON line
as is, it raises ``UnicodeEncodeError``. Everything that shows a path to a
person or a peer goes through :func:`display_path` (or :func:`safe_text` for a
sentence that embeds one), which escapes what cannot be encoded and leaves
valid text untouched. docs/PROTOCOL.md describes the escapes. A name or path
an agent may have chosen, shown on an operator's terminal, goes through
:func:`printable`, which escapes control characters as well; what a file is,
in words, is :func:`file_kind`. A command's input FILE is opened by
:func:`open_input`.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

__all__ = [
    "MAX_INPUT_BYTES",
    "display_path",
    "file_kind",
    "open_input",
    "printable",
    "safe_text",
    "safe_value",
]

# The most a command reads of an input FILE (or stdin): far above any conversation a
# model takes (the daemon's own default request bound is 64 MiB), so that
# ``/dev/zero`` or a runaway producer ends in one error line, not all memory.
MAX_INPUT_BYTES = 256 * 1024 * 1024

_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words ("a FIFO"), for messages."""
    return next((words for test, words in _KINDS if test(mode)), "an unknown kind of file")


def open_input(path: str) -> tuple[int, int]:
    """``path`` open for reading as a command's input FILE: its descriptor and mode.

    Opened without blocking (a FIFO nobody writes to would hang ``open``), then
    set blocking, so that a writer that is there is waited for.

    Raises:
        IsADirectoryError: it is a directory ("it is a directory, not a file").
        OSError: it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "it is a directory, not a file", path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, mode


_SURROGATES = range(0xD800, 0xE000)
_ESCAPED_BYTES = range(0xDC80, 0xDD00)  # what surrogateescape makes of bytes 0x80-0xff
# Deeper values are cut: far below the interpreter's recursion limit, far above real data.
_MAX_DEPTH = 200


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate escaped, so that it always encodes as UTF-8.

    A surrogate that stands for an undecodable byte becomes ``\\xNN`` (the
    byte), any other lone surrogate ``\\uNNNN``. Valid text is returned as is.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return text
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code in _ESCAPED_BYTES:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code in _SURROGATES:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def _escaped(char: str) -> str:
    code = ord(char)
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    if char.isprintable():
        return char
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """A name or path as one safe line of terminal text, for anything an agent may name.

    Like :func:`display_path` (undecodable bytes as ``\\xNN``), and every
    character that is not printable escaped too: control characters (escape
    sequences, newlines, carriage returns, backspaces), C1 controls, line and
    paragraph separators, bidirectional overrides and other format
    characters, as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``. So an agent
    cannot clear an operator's screen, forge a line of output or reorder what
    is shown with a file name. Printable text comes back unchanged.
    """
    text = os.fsdecode(text) if not isinstance(text, str) else text
    if text.isprintable():
        return text
    return "".join(_escaped(char) for char in text)


def display_path(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """A path as printable, encodable text: undecodable bytes shown as ``\\xNN``."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def safe_value(value: Any, depth: int = 0) -> Any:
    """``value`` (built-in JSON types) with every string made safe by :func:`safe_text`.

    Used when encoding a message failed on an unencodable string: the copy
    always encodes. Nesting deeper than the wire decoder accepts is cut to null.
    """
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(str(k)): safe_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_value(v, depth + 1) for v in value]
    return value
