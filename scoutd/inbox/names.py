"""Where a chat's inbox lies and what its entries are called: pure name rules.

* The inbox of save file ``D/a.b.chat`` is ``D/a.b.inbox``; delivered entries
  are recorded in ``D/a.b.inbox_removed`` (docs/STRATEGIES.md, "inbox").
* Delivery order is the byte order of the names (:func:`delivery_order`).
* A notice dropped under a name already pending gets a *sequence name* that
  sorts after every pending notice of that name (``note.txt``, then
  ``note~00001.txt``, ``note~00002.txt``, ...), so same-named notices are
  delivered in the order they arrived (:func:`notice_names`).
* A record never overwrites an earlier one: ``note.txt``, ``note.1.txt``, ...
  (:func:`numbered`); records are a log, their order does not matter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

__all__ = [
    "ABORT_NAME",
    "MAX_NAMES",
    "MAX_NOTICE_NAME",
    "NAME_MAX",
    "check_notice_name",
    "delivery_order",
    "inbox_dir",
    "inbox_removed_dir",
    "notice_names",
    "numbered",
]

ABORT_NAME = "abort"

# Names tried for one record or notice: far beyond any real inbox, but bounded so
# that a misbehaving filesystem cannot keep a caller looping.
MAX_NAMES = 100_000

# Sequence numbers are zero-padded to this width so that they sort as numbers;
# MAX_NAMES bounds them below 10**_SEQUENCE_DIGITS.
_SEQUENCE_DIGITS = 5
_SEQUENCE = re.compile(rf"~(\d{{{_SEQUENCE_DIGITS}}})")


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


def delivery_order(name: str) -> bytes:
    """Sort key of an inbox entry: its name's bytes, as the file system holds them.

    Bytes, not code points: a name that is not valid UTF-8 (held as surrogate
    escapes) sorts where ``ls`` in the C locale shows it.
    """
    return os.fsencode(name)


# The longest file name (bytes) of Linux file systems.
NAME_MAX = 255


def numbered(name: str, n: int) -> str:
    """The ``n``-th record name: ``note.txt`` -> ``note.1.txt``, ``abort`` -> ``abort.1``.

    Never longer than :data:`NAME_MAX` bytes when ``name`` is not: the end
    of the root is cut first (the number and extension kept), then, for a
    name that is nearly all extension, the end of the extension too.
    """
    if n == 0:
        return name
    root, ext = (os.fsencode(part) for part in os.path.splitext(name))
    number = f".{n}".encode()
    over = len(root) + len(number) + len(ext) - NAME_MAX
    if over > 0:
        cut = min(over, len(root))
        root, over = root[: len(root) - cut], over - cut
        ext = ext[: len(ext) - over] if over > 0 else ext
    return os.fsdecode(root + number + ext)


# The longest name a notice may be given: room for the ``~NNNNN`` that a second
# notice of the name gets while the first is pending (:func:`notice_names`).
MAX_NOTICE_NAME = NAME_MAX - 1 - _SEQUENCE_DIGITS


def check_notice_name(name: str) -> None:
    """Refuse a name no notice may be given: empty, hidden (a leading dot, which the
    writers' temporaries use), a path, ``abort``, or too long for its sequence names.

    Raises:
        ValueError: ``invalid notice name ...`` and why.
    """
    if not name or name.startswith(".") or "/" in name or "\0" in name or name == ABORT_NAME:
        raise ValueError(f"invalid notice name {name!r}: a plain file name, not hidden nor 'abort'")
    try:
        size = len(os.fsencode(name))
    except UnicodeEncodeError:  # a lone surrogate: no file system name holds it
        raise ValueError(f"invalid notice name {name!r}: not a file name's bytes") from None
    if size > MAX_NOTICE_NAME:
        raise ValueError(
            f"invalid notice name {name[:16]!r}...: {size} bytes, at most {MAX_NOTICE_NAME}"
            " (a second notice of the name, while the first is pending, gets ~00001 added)"
        )


def _sequenced(name: str, n: int) -> str:
    root, ext = os.path.splitext(name)
    return f"{root}~{n:0{_SEQUENCE_DIGITS}d}{ext}"


def _sequence_of(entry: str, name: str) -> int | None:
    """Which of ``name``'s arrival names ``entry`` is (0: ``name`` itself); None: none."""
    if entry == name:
        return 0
    root, ext = os.path.splitext(name)
    if not (entry.startswith(root) and entry.endswith(ext)):
        return None
    middle = entry[len(root) : len(entry) - len(ext)]
    found = _SEQUENCE.fullmatch(middle)
    return None if found is None else int(found.group(1))


def notice_names(name: str, pending: Iterable[str]) -> Iterator[str]:
    """Names for a notice called ``name``, to try in turn, given the ``pending`` entries.

    ``name`` itself when no notice of that name is pending; otherwise sequence
    names after the highest one pending (``note~00001.txt``, ...), so that the
    new notice sorts after every pending one of that name. Bounded by
    :data:`MAX_NAMES`.
    """
    taken = [n for n in (_sequence_of(entry, name) for entry in pending) if n is not None]
    first = max(taken) + 1 if taken else 0
    for n in range(first, MAX_NAMES):
        yield name if n == 0 else _sequenced(name, n)
