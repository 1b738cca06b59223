"""What an inbox entry is, and whether records can be written: checks without side effects.

Used by the claim (:mod:`scoutd.inbox.claim`) and by the writers'
callers (``scoutd abort``) to tell an operator what stands in the way. Nothing
here opens, follows or reads an entry: ``lstat`` and ``access`` only.
"""

from __future__ import annotations

import os
import stat

from ..paths import file_kind


def entry_kind(mode: int) -> str | None:
    """What an entry of ``st_mode`` ``mode`` is, in words; None for a regular file."""
    return None if stat.S_ISREG(mode) else file_kind(mode)


def removed_dir_problem(inbox_path: str, removed: str) -> str | None:
    """Why records cannot be written to ``removed`` (None: they can, as far as seen).

    Checks what makes every claim fail: something other than a real directory
    in its place, another file system than the inbox, no write permission.
    """
    try:
        inbox_dev = os.stat(inbox_path).st_dev
    except OSError as exc:
        return f"the inbox cannot be examined: {exc.strerror or exc}"
    try:
        st = os.lstat(removed)
    except FileNotFoundError:
        parent = os.path.dirname(removed) or "."
        try:
            if os.stat(parent).st_dev != inbox_dev:
                return "it would lie on another file system than the inbox"
        except OSError as exc:
            return f"its directory cannot be examined: {exc.strerror or exc}"
        return None if os.access(parent, os.W_OK | os.X_OK) else "it cannot be created"
    except OSError as exc:
        return f"it cannot be examined: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_dev != inbox_dev:
        return "it lies on another file system than the inbox"
    if not os.access(removed, os.W_OK | os.X_OK):
        return "it is not writable"
    return None
