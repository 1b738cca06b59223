"""What a chat's inbox holds right now, without consuming anything (``scoutd inbox``).

Only ``lstat`` for every entry; the one file opened is a regular ``abort``,
read (never moved) to show its reason. Entries are shown as the next pickup
would see them: notices in delivery order, the abort, and what is ignored.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .entries import entry_kind
from .files import InboxDirs, open_regular, read_text
from .names import ABORT_NAME, delivery_order, inbox_dir, inbox_removed_dir

__all__ = ["InboxEntry", "InboxListing", "list_inbox"]

# Bytes of a pending abort's text shown as its reason.
REASON_BYTES = 4096


class InboxEntry(NamedTuple):
    """One entry of an inbox: its name, kind (None: a regular file), size and mtime."""

    name: str
    kind: str | None
    size: int
    mtime_ns: int


class InboxListing(NamedTuple):
    """An inbox as the next pickup would find it.

    ``notices``: what would be delivered, in delivery order (after the abort
    has been consumed, when one is pending: an abort leaves them pending).
    ``abort``: the pending abort entry, of any kind, with ``abort_reason``,
    the reason it would give (None when not a readable regular file).
    ``ignored``: entries never delivered (dotfiles, directories, FIFOs, ...).
    """

    inbox: str
    exists: bool
    notices: list[InboxEntry]
    abort: InboxEntry | None = None
    abort_reason: str | None = None
    ignored: tuple[InboxEntry, ...] = ()


def list_inbox(save_file: str) -> InboxListing:
    """List ``save_file``'s inbox without consuming, moving or creating anything.

    Raises:
        ValueError: ``save_file`` has no file name.
        OSError: the inbox exists but cannot be listed (a symlink, no permission).
    """
    path = inbox_dir(save_file)
    try:
        dirs = InboxDirs(path, inbox_removed_dir(save_file))
    except FileNotFoundError:
        return InboxListing(path, False, [])
    try:
        entries = _entries(dirs.ifd)
        notices: list[InboxEntry] = []
        ignored: list[InboxEntry] = []
        abort = None
        for entry in entries:
            if entry.name == ABORT_NAME:
                abort = entry
            elif entry.kind is None and not entry.name.startswith("."):
                notices.append(entry)
            else:
                ignored.append(entry)
        reason = _reason(dirs.ifd) if abort is not None and abort.kind is None else None
        return InboxListing(path, True, notices, abort, reason, tuple(ignored))
    finally:
        dirs.close()


def _entries(dir_fd: int) -> list[InboxEntry]:
    found: list[InboxEntry] = []
    with os.scandir(dir_fd) as listing:
        for item in listing:
            try:
                st = item.stat(follow_symlinks=False)
            except FileNotFoundError:  # taken meanwhile
                continue
            found.append(InboxEntry(item.name, entry_kind(st.st_mode), st.st_size, st.st_mtime_ns))
    return sorted(found, key=lambda entry: delivery_order(entry.name))


def _reason(dir_fd: int) -> str | None:
    """The text a pending regular abort gives as its reason; None if it cannot be read."""
    try:
        fd, st = open_regular(ABORT_NAME, dir_fd)
    except OSError:
        return None
    try:
        return read_text(fd, st.st_size, REASON_BYTES).strip()
    except OSError:
        return None
    finally:
        os.close(fd)
