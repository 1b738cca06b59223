"""Giving a file its name without replacing one: ``renameat2(RENAME_NOREPLACE)`` where the
system has it (a watcher then sees the file arrive whole), a link where it has not
(docs/TESTING.md, "The twelfth round")."""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

import pytest

from scoutd.inbox import files

pytestmark = pytest.mark.skipif(files._renameat2 is None, reason="no renameat2 here")


def test_a_rename_that_never_replaces(placing: Any) -> None:
    path, fd = placing
    with pytest.raises(FileExistsError) as raised:
        files._rename_noreplace("source", "taken", fd)
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (
        errno.EEXIST,
        os.strerror(errno.EEXIST),
        "taken",
    )
    assert (path / "taken").read_text() == "old"
    assert files._rename_noreplace("source", "free", fd) is True
    assert (path / "free").read_text() == "new" and not (path / "source").exists()


def test_without_a_directory_the_names_are_paths(
    placing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = placing
    monkeypatch.chdir(path)
    assert files._rename_noreplace("source", "free", None) is True
    assert (path / "free").read_text() == "new"


@pytest.mark.parametrize("err", [errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP])
def test_a_system_that_cannot_says_so_and_moves_nothing(
    placing: Any, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    path, fd = placing

    def unsupported(*args: Any) -> int:
        ctypes.set_errno(err)
        return -1

    monkeypatch.setattr(files, "_renameat2", unsupported)
    assert files._rename_noreplace("source", "free", fd) is False
    assert (path / "source").exists() and not (path / "free").exists()
    monkeypatch.setattr(files, "_renameat2", None)
    assert files._rename_noreplace("source", "free", fd) is False
