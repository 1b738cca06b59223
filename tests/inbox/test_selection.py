"""The pickup and the listing select the same entries: one rule, seen from both sides.

:func:`scoutd.inbox.pickup.selected` decides what counts as a notice or the
abort; :func:`scoutd.inbox.pickup.pending_names` (what a pickup would take) and
:func:`scoutd.inbox.list_inbox` (what ``scoutd inbox`` shows) must agree on an
inbox holding every kind of entry. Nothing here opens, moves or takes anything.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from scoutd.inbox import inbox_dir, inbox_removed_dir, list_inbox
from scoutd.inbox.files import InboxDirs
from scoutd.inbox.names import delivery_order
from scoutd.inbox.pickup import pending_names

NOT_UTF8 = os.fsdecode(b"caf\xe9.txt")  # a name that is not UTF-8: a notice all the same


def _file(directory: str, name: str | bytes, text: str = "x") -> None:
    with open(os.path.join(os.fsencode(directory), os.fsencode(name)), "w") as handle:
        handle.write(text)


def _populate(directory: str, abort_kind: str | None) -> None:
    """Every kind of entry; ``abort`` as a regular file, a FIFO, a directory, or absent."""
    os.makedirs(directory)
    _file(directory, "note.txt")
    _file(directory, "B-upper")  # byte order: before lower case
    _file(directory, b"caf\xe9.txt")
    _file(directory, "abortive")  # only the exact name is the abort
    _file(directory, ".hidden")
    _file(directory, ".tmp-123-0123456789abcdef")  # a writer's temporary
    os.mkdir(os.path.join(directory, "subdir"))
    _file(os.path.join(directory, "subdir"), "inside")
    os.symlink(os.path.join(directory, "note.txt"), os.path.join(directory, "link"))
    os.symlink("/nonexistent/target", os.path.join(directory, "dangling"))
    os.mkfifo(os.path.join(directory, "pipe"))
    path = os.path.join(directory, "abort")
    if abort_kind == "file":
        _file(directory, "abort", "stop")
    elif abort_kind == "fifo":
        os.mkfifo(path)
    elif abort_kind == "dir":
        os.mkdir(path)


NOTICES = sorted(["note.txt", "B-upper", NOT_UTF8, "abortive"], key=delivery_order)
IGNORED = sorted(
    [".hidden", ".tmp-123-0123456789abcdef", "subdir", "link", "dangling", "pipe"],
    key=delivery_order,
)


@pytest.mark.parametrize("abort_kind", [None, "file", "fifo", "dir"])
def test_pickup_and_listing_select_the_same_entries(
    tmp_path: pathlib.Path, abort_kind: str | None
) -> None:
    save_file = str(tmp_path / "agent.chat")
    directory = inbox_dir(save_file)
    _populate(directory, abort_kind)
    before = sorted(os.listdir(os.fsencode(directory)))

    dirs = InboxDirs.of(save_file)
    assert dirs is not None
    try:
        taken = pending_names(dirs)
    finally:
        dirs.close()
    listing = list_inbox(save_file)

    expected = sorted([*NOTICES, *(["abort"] if abort_kind else [])], key=delivery_order)
    assert taken == expected
    shown = [entry.name for entry in listing.notices]
    assert shown == NOTICES
    assert (listing.abort.name if listing.abort else None) == ("abort" if abort_kind else None)
    assert (
        sorted([*shown, *([listing.abort.name] if listing.abort else [])], key=delivery_order)
        == taken
    )
    assert [entry.name for entry in listing.ignored] == IGNORED
    # both only looked: every entry is where it was, no record directory made
    assert sorted(os.listdir(os.fsencode(directory))) == before
    assert not os.path.lexists(inbox_removed_dir(save_file))
