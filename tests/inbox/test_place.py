"""``place``: a file gets the first free name of a list, and no name is ever replaced.

Every record of a claimed notice, every notice put back and every marker is
given its name so. The kernel refuses a link (and ``renameat2(RENAME_NOREPLACE)``)
over a name that exists; a file system without hard links gets a plain rename,
looked before (docs/RELIABILITY.md). What only another process or such a file
system makes (a name taken between two calls, links refused) is injected at the
one call that meets it.
"""

from __future__ import annotations

import errno
import os
import pathlib
from typing import Any

import pytest

from scoutd.inbox import files
from scoutd.inbox.files import place

HAS_RENAMEAT2 = files._renameat2 is not None


def _contents(path: pathlib.Path) -> dict[str, str]:
    return {entry.name: entry.read_text() for entry in sorted(path.iterdir())}


@pytest.mark.parametrize(
    "by_rename",
    [False, pytest.param(True, marks=pytest.mark.skipif(not HAS_RENAMEAT2, reason="no renameat2"))],
    ids=["link", "rename"],
)
def test_the_first_free_name_and_no_other(placing: Any, by_rename: bool) -> None:
    path, fd = placing
    (path / "b").write_text("older")
    placed = place("source", "shown/dir", ["taken", "b", "c", "d"], dir_fd=fd, by_rename=by_rename)
    assert placed == "shown/dir/c"
    assert _contents(path) == {"taken": "old", "b": "older", "c": "new"}


def test_with_paths_instead_of_a_descriptor(placing: Any) -> None:
    path, _ = placing
    placed = place(str(path / "source"), str(path), ["taken", "b"])
    assert placed == str(path / "b")
    assert _contents(path) == {"taken": "old", "b": "new"}


@pytest.mark.parametrize("by_rename", [False, True], ids=["link", "rename"])
def test_every_name_taken_is_an_error_that_says_where(placing: Any, by_rename: bool) -> None:
    path, fd = placing
    with pytest.raises(FileExistsError) as raised:
        place("source", "shown", ["taken"], dir_fd=fd, by_rename=by_rename)
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (errno.EEXIST, "no free name", "shown")
    assert _contents(path) == {"taken": "old", "source": "new"}


@pytest.mark.parametrize("by_rename", [False, True], ids=["link", "rename"])
def test_keep_takes_the_existing_first_name_and_drops_the_source(
    placing: Any, by_rename: bool
) -> None:
    path, fd = placing
    assert place("source", "shown", ["taken", "b"], keep=True, dir_fd=fd, by_rename=by_rename) == (
        "shown/taken"
    )
    assert _contents(path) == {"taken": "old"}


def test_a_symlink_is_placed_as_the_link_never_its_target(placing: Any) -> None:
    path, fd = placing
    os.symlink("taken", path / "link")
    place("link", "shown", ["b"], dir_fd=fd)
    assert os.readlink(path / "b") == "taken"
    assert not (path / "link").exists() and (path / "taken").read_text() == "old"


def test_a_system_without_renameat2_links_from_then_on(
    placing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, fd = placing
    asked: list[str] = []

    def unsupported(source: str, target: str, dir_fd: int | None) -> bool:
        asked.append(target)
        return False

    monkeypatch.setattr(files, "_rename_noreplace", unsupported)
    assert place("source", "shown", ["taken", "b"], dir_fd=fd, by_rename=True) == "shown/b"
    assert asked == ["taken"]
    assert _contents(path) == {"taken": "old", "b": "new"}


def _links_refused(monkeypatch: pytest.MonkeyPatch, err: int, names: set[str]) -> None:
    """``os.link`` fails with ``err`` for the targets ``names``, as another process
    or a file system without hard links makes it."""
    real = os.link

    def link(source: str, target: str, **kwargs: Any) -> None:
        if target in names:
            raise OSError(err, os.strerror(err), target)
        real(source, target, **kwargs)

    monkeypatch.setattr(os, "link", link)


@pytest.mark.parametrize("err", sorted(files._NO_LINK))
def test_without_hard_links_a_name_taken_is_still_never_replaced(
    placing: Any, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    path, fd = placing
    monkeypatch.chdir(path.parent)  # no "taken" here: the look is in the directory
    _links_refused(monkeypatch, err, {"taken", "b"})
    assert place("source", "shown", ["taken", "b"], dir_fd=fd) == "shown/b"
    assert _contents(path) == {"taken": "old", "b": "new"}


def test_a_name_reported_taken_is_skipped_even_if_gone_when_looked_at(
    placing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``EEXIST`` from the kernel is final: the name was taken when it linked."""
    path, fd = placing
    _links_refused(monkeypatch, errno.EEXIST, {"free"})
    assert place("source", "shown", ["free", "c"], dir_fd=fd) == "shown/c"
    assert _contents(path) == {"taken": "old", "c": "new"}


def test_another_error_of_a_link_is_raised(placing: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path, fd = placing
    _links_refused(monkeypatch, errno.EIO, {"b"})
    with pytest.raises(OSError) as raised:
        place("source", "shown", ["b", "c"], dir_fd=fd)
    assert raised.value.errno == errno.EIO
    assert _contents(path) == {"taken": "old", "source": "new"}


def test_a_source_that_cannot_be_unlinked_after_its_link_is_placed_all_the_same(
    placing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, fd = placing

    def refused(name: str, **kwargs: Any) -> None:
        raise PermissionError(errno.EACCES, "refused", name)

    monkeypatch.setattr(os, "unlink", refused)
    assert place("source", "shown", ["b"], dir_fd=fd) == "shown/b"
    assert _contents(path) == {"taken": "old", "b": "new", "source": "new"}
