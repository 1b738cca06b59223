"""File delivery of operator notices: an inbox beside each chat, read at most once.

Operators drop files into ``<stem>.inbox`` beside a chat's save file. Each
regular file is moved into ``<stem>.inbox_removed``, only then read, and
appended to the prompt as a ``user`` message; a file named ``abort`` raises
:class:`~scoutd.errors.Aborted` instead. Claiming one file
(:func:`scoutd.inbox.claim.take`):

1. *Check in place*: open with ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``. A
   symlink fails (``ELOOP``), a FIFO swapped in after the listing opens without
   waiting for a writer; a notice that is not a readable regular file stays
   put (an ``abort`` of any type is claimed, see below). A file some process
   holds open for writing is not taken (a read lease tells; where it cannot,
   a file unchanged for a short settle time, or renamed in, is complete);
   nothing waits for it: a notice is left for the next pickup.
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

An abort fails closed: when step 2 fails (the removed directory is a regular
file or a dangling symlink, lies on another file system, refuses the rename),
the abort is claimed under a hidden ``.abort-<ns>-<pid>`` name in the inbox
itself, or, if even that fails, read in place and left there. It aborts all
the same, and the failure is logged at error level. An entry named ``abort``
that is not a regular file (directory, symlink, FIFO, socket, device: the
agent can make one in its own chat directory) aborts too, at once, with a
generic reason naming its kind; it is moved like any abort (a rename moves the
entry itself, never a target) and never opened, followed or read.

The chat directory is reached one component at a time, following a symlink
only when root or the acting user made it (:mod:`scoutd.inbox.walk`); the
inbox and removed directories are opened relative to it with ``O_NOFOLLOW |
O_DIRECTORY``, once per pickup, and every step names entries relative to
those descriptors (``*at`` calls). An inbox or removed directory that is a
symlink is refused, and one swapped for a symlink after that check cannot
redirect a move: otherwise a client allowed to write beside its save file
could make the daemon empty, or fill, a directory outside ``allowed_roots``
(docs/OPERATIONS.md). Writers refuse a symlinked inbox the same way.

An abort fails closed (docs/RELIABILITY.md): an inbox that does not exist
holds nothing, but one that exists and cannot be opened, searched or listed
(:meth:`InboxDirs.of <scoutd.inbox.files.InboxDirs.of>`, the one definition)
raises :class:`~scoutd.errors.InboxUnusable`, an ``Aborted``, from every
pickup until an operator repairs it.

Resource handling: each descriptor is closed by the function that opened it.
Readers never create the inbox; they create the removed directory just before
the first claim. Writers create the inbox, write and fsync a dotfile there
(readers ignore dotfiles) and rename it to its final name without replacing
one (``renameat2``; a hard link where that is missing): no partial notice is
ever visible, and the daemon's watcher sees it arrive complete.

Error handling: no ``OSError`` escapes :func:`pick_up` or :func:`claim_abort`
(an unusable inbox is :class:`~scoutd.errors.InboxUnusable`).
Each file stands alone: a failure is logged (logger ``scoutd.inbox``, warning)
and the next file is tried; a file another consumer took first is skipped
(debug). Without hard links (FAT, some FUSE mounts) an existence check and
rename replace link: no overwrite except by two parties racing for one name.
An entry swapped for a device node (root only) may be opened once, never
read. The writers raise ``OSError`` to their caller.

Which entries a pickup takes, and in what order (:mod:`scoutd.inbox.pickup`,
:mod:`scoutd.inbox.names`): notices in the byte order of their names; a
pickup that finds an ``abort`` takes it alone and leaves every notice
pending. The writers name notices so that this order is the order they
arrived in.

Modules: ``names`` (paths and name rules, pure), ``entries`` (what an entry
is, ``lstat`` only), ``walk`` (reaching the chat directory), ``files``
(descriptors, reads, renames, whether a file is being written), ``claim``
(steps 1-5), ``pickup`` (one pickup, the abort rule), ``writers``
(``write_notice``, ``write_abort``), ``listing`` (what is pending, read-only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

# Where each name lives, imported on first use (PEP 562): ``scoutd notify`` loads
# the writers, not the claim's listing and pickup (docs/ARCHITECTURE.md, "Layers").
_LAZY = {
    "NotSettled": ".claim",
    "Taken": ".claim",
    "take": ".claim",
    "entry_kind": ".entries",
    "removed_dir_problem": ".entries",
    "MAX_SETTLE_WAIT": ".files",
    "SETTLE_TIME": ".files",
    "InboxEntry": ".listing",
    "InboxListing": ".listing",
    "list_inbox": ".listing",
    "listing_lines": ".listing",
    "listing_record": ".listing",
    "ABORT_NAME": ".names",
    "delivery_order": ".names",
    "inbox_dir": ".names",
    "inbox_removed_dir": ".names",
    "notice_names": ".names",
    "Pickup": ".pickup",
    "claim_abort": ".pickup",
    "pick_up": ".pickup",
    "record_problem": ".pickup",
    "AbortNotWritten": ".writers",
    "write_abort": ".writers",
    "write_notice": ".writers",
}

if TYPE_CHECKING:
    from .claim import NotSettled, Taken, take
    from .entries import entry_kind, removed_dir_problem
    from .files import MAX_SETTLE_WAIT, SETTLE_TIME
    from .listing import InboxEntry, InboxListing, list_inbox, listing_lines, listing_record
    from .names import ABORT_NAME, delivery_order, inbox_dir, inbox_removed_dir, notice_names
    from .pickup import Pickup, claim_abort, pick_up, record_problem
    from .writers import AbortNotWritten, write_abort, write_notice

__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "ABORT_NAME",
    "MAX_SETTLE_WAIT",
    "SETTLE_TIME",
    "AbortNotWritten",
    "InboxEntry",
    "InboxListing",
    "NotSettled",
    "Pickup",
    "Taken",
    "claim_abort",
    "delivery_order",
    "entry_kind",
    "inbox_dir",
    "inbox_removed_dir",
    "list_inbox",
    "listing_lines",
    "listing_record",
    "notice_names",
    "pick_up",
    "record_problem",
    "removed_dir_problem",
    "take",
    "write_abort",
    "write_notice",
]
