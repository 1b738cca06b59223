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
    "NAME_MAX",
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

    Never longer than :data:`NAME_MAX` bytes when ``name`` is not: the root
    is shortened (the number and extension kept). A record that cannot be
    named stays under its ``.claim-*`` name, which reads as a notice lost.
    """
    if n == 0:
        return name
    root, ext = os.path.splitext(name)
    suffix = f".{n}{ext}"
    raw = os.fsencode(root)
    over = len(raw) + len(os.fsencode(suffix)) - NAME_MAX
    if over > 0:
        root = os.fsdecode(raw[: max(0, len(raw) - over)])
    return f"{root}{suffix}"


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
