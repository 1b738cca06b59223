"""What a chat's inbox holds right now, without consuming anything (``scoutd inbox``).

Only ``lstat`` for every entry; the one file opened is a regular ``abort``,
read (never moved) to show its reason. Entries are classified by the pickup's own
rule (:func:`scoutd.inbox.pickup.selected`), so the listing shows what the
next pickup would see: notices in delivery order, the abort, and what is ignored.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ..paths import display_path, printable, safe_text
from .entries import entry_kind
from .files import InboxDirs, open_regular, read_text
from .names import ABORT_NAME, delivery_order, inbox_dir
from .pickup import selected

__all__ = ["InboxEntry", "InboxListing", "list_inbox", "listing_lines", "listing_record"]

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

    The inbox is reached as every pickup reaches it (:meth:`InboxDirs.of`):
    what is missing is an empty listing, what exists and cannot be used is
    an error. ``inbox`` is its real path.

    Raises:
        ValueError: ``save_file`` has no file name.
        OSError: the inbox exists but cannot be listed (a symlink, no
            permission, a symlink on the way that neither root nor the
            caller made): a pickup fails closed on it.
    """
    dirs = InboxDirs.of(save_file)
    if dirs is None:
        return InboxListing(inbox_dir(save_file), False, [])
    path = dirs.inbox
    try:
        notices: list[InboxEntry] = []
        ignored: list[InboxEntry] = []
        abort = None
        for entry, role in _entries(dirs.ifd):
            if role == "abort":
                abort = entry
            elif role == "notice":
                notices.append(entry)
            else:
                ignored.append(entry)
        reason = _reason(dirs.ifd) if abort is not None and abort.kind is None else None
        return InboxListing(path, True, notices, abort, reason, tuple(ignored))
    finally:
        dirs.close()


def _entries(dir_fd: int) -> list[tuple[InboxEntry, str | None]]:
    """Every entry with its ``lstat`` figures and what a pickup makes of it, in delivery order."""
    found: list[tuple[InboxEntry, str | None]] = []
    with os.scandir(dir_fd) as listing:
        for item in listing:
            try:
                role = selected(item)
                st = item.stat(follow_symlinks=False)
            except FileNotFoundError:  # taken meanwhile
                continue
            entry = InboxEntry(item.name, entry_kind(st.st_mode), st.st_size, st.st_mtime_ns)
            found.append((entry, role))
    return sorted(found, key=lambda pair: delivery_order(pair[0].name))


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


def _when(mtime_ns: int) -> str:
    stamp = datetime.fromtimestamp(mtime_ns / 1e9, UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _entry_record(entry: InboxEntry) -> dict[str, Any]:
    return {
        "name": display_path(entry.name),
        "kind": "a regular file" if entry.kind is None else entry.kind,
        "bytes": entry.size,
        "mtime": _when(entry.mtime_ns),
    }


def listing_record(listing: InboxListing) -> dict[str, Any]:
    """``listing`` as plain JSON values; undecodable bytes in names shown as ``\\xNN``."""
    abort = None
    if listing.abort is not None:
        reason = None if listing.abort_reason is None else safe_text(listing.abort_reason)
        abort = {**_entry_record(listing.abort), "reason": reason}
    return {
        "inbox": display_path(listing.inbox),
        "exists": listing.exists,
        "abort": abort,
        "notices": [_entry_record(entry) for entry in listing.notices],
        "ignored": [_entry_record(entry) for entry in listing.ignored],
    }


def listing_lines(listing: InboxListing) -> list[str]:
    """``listing`` for a person: the abort first, then notices in delivery order.

    Every name and path goes through :func:`~scoutd.paths.printable`: the
    agent names the files in its inbox, and must not be able to move the
    cursor, clear the screen or forge a line of this output.
    """
    inbox = printable(listing.inbox)
    if not listing.exists:
        return [f"no inbox at {inbox}: nothing pending"]
    lines = [f"inbox {inbox}"]
    if listing.abort is not None:
        if listing.abort.kind is not None:
            why = f"it is {listing.abort.kind}, never read: a generic reason"
        elif listing.abort_reason is None:
            why = "unreadable: a generic reason"
        else:
            why = repr(safe_text(listing.abort_reason)) if listing.abort_reason else "no reason"
        lines.append(f"abort pending ({why}): the next pickup aborts; notices stay")
    count = len(listing.notices)
    if count:
        lines.append(f"{count} notice{'' if count == 1 else 's'} pending, in delivery order")
    else:
        lines.append("no notices pending")
    names = [printable(entry.name) for entry in listing.notices]
    width = max((len(name) for name in names), default=0)
    for name, entry in zip(names, listing.notices, strict=True):
        lines.append(f"  {name:<{width}}  {entry.size:>9} bytes  {_when(entry.mtime_ns)}")
    if listing.ignored:
        lines.append("ignored (never delivered):")
        for entry in listing.ignored:
            kind = "hidden" if entry.kind is None else entry.kind
            lines.append(f"  {printable(entry.name)}  ({kind})")
    return lines
