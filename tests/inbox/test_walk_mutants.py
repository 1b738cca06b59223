"""What mutation testing of ``scoutd/inbox/walk.py`` showed no test had tried
(docs/TESTING.md, "The thirteenth round"): a path without a symlink is opened in
one ``openat2`` call where the kernel has it, and every other answer of that
call (a symlink on the way, a missing or unusable path) is what the walk expects.
"""

from __future__ import annotations

import errno
import os
import pathlib
from typing import Any

import pytest

from scoutd.inbox import walk

from ..support.ids import AS_ROOT, NOBODY

pytestmark = pytest.mark.skipif(walk._OPENAT2_ABSENT, reason="no openat2 on this system")


def test_a_path_without_symlinks_opens_in_one_call(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d").mkdir()
    fd = walk._open_without_symlinks(str(tmp_path / "d"))
    assert fd is not None, "openat2 refused a path without symlinks"
    try:
        opened, there = os.fstat(fd), os.stat(tmp_path / "d")
        assert (opened.st_dev, opened.st_ino) == (there.st_dev, there.st_ino)
    finally:
        os.close(fd)


def test_a_symlink_on_the_way_is_left_to_the_walk(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "d", tmp_path / "link")
    assert walk._open_without_symlinks(str(tmp_path / "link")) is None
    assert walk._open_without_symlinks(str(tmp_path / "link" / ".")) is None


@pytest.mark.parametrize(
    ("make", "err"),
    [(lambda p: None, errno.ENOENT), (lambda p: p.write_text("x"), errno.ENOTDIR)],
    ids=["missing", "a file on the way"],
)
def test_a_path_it_cannot_open_says_why(tmp_path: pathlib.Path, make: object, err: int) -> None:
    make(tmp_path / "entry")  # type: ignore[operator]
    path = str(tmp_path / "entry" / "d")
    with pytest.raises(OSError) as raised:
        walk._open_without_symlinks(path)
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (err, os.strerror(err), path)


@pytest.fixture
def linked(tmp_path: pathlib.Path) -> pathlib.Path:
    """``tmp_path/link`` -> ``tmp_path/real``: a path through it is walked step by step."""
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    return tmp_path


def test_the_walk_says_which_component_is_missing_or_no_directory(linked: pathlib.Path) -> None:
    real = os.path.realpath(linked / "real")
    (linked / "real" / "file").write_text("x")
    for name, err, words in (
        ("gone", errno.ENOENT, "no such directory"),
        ("file", errno.ENOTDIR, "not a directory"),
    ):
        with pytest.raises(OSError) as raised:
            walk.open_directory(str(linked / "link" / name / "d"))
        error = raised.value
        assert (error.errno, error.strerror, error.filename) == (err, words, f"{real}/{name}")


def test_dots_and_a_relative_path_give_the_real_path(
    linked: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (linked / "real" / "d").mkdir()
    real = os.path.realpath(linked / "real" / "d")
    os.symlink("./real/./d/.", linked / "dotted")
    monkeypatch.chdir(linked)
    for path in ("link/./d/.", str(linked / "link" / "." / "d"), "./link/d", "dotted"):
        opened = walk.open_directory(path)
        os.close(opened.fd)
        assert opened.path == real, path


def test_at_most_forty_links_are_followed(tmp_path: pathlib.Path) -> None:
    (tmp_path / "real").mkdir()
    previous = "real"
    for n in range(walk.MAX_LINKS + 1):  # link0 -> real, link1 -> link0, ...
        os.symlink(previous, tmp_path / f"link{n}")
        previous = f"link{n}"
    last = walk.MAX_LINKS - 1
    opened = walk.open_directory(str(tmp_path / f"link{last}"))  # forty links: followed
    os.close(opened.fd)
    assert opened.path == os.path.realpath(tmp_path / "real")
    with pytest.raises(OSError) as raised:
        walk.open_directory(str(tmp_path / f"link{walk.MAX_LINKS}"))
    error = raised.value
    real_top = os.path.realpath(tmp_path)
    assert (error.errno, error.strerror) == (errno.ELOOP, "too many levels of symbolic links")
    assert error.filename.startswith(real_top + "/link"), error.filename


def test_a_link_replaced_at_every_look_is_given_up(
    linked: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link found, but no longer a link when opened, is looked at again, up to a
    bound: then the walk gives up and says so."""
    reads: list[str] = []

    def replaced(name: str, dir_fd: int, where: str) -> None:
        reads.append(where)

    monkeypatch.setattr(walk, "_read_link", replaced)
    with pytest.raises(OSError) as raised:
        walk.open_directory(str(linked / "link"))
    error = raised.value
    where = f"{os.path.realpath(linked)}/link"
    assert (error.errno, error.strerror, error.filename) == (
        errno.ELOOP,
        "kept changing while it was opened",
        where,
    )
    assert reads == [where] * walk._RETRIES


@AS_ROOT
def test_a_link_of_another_user_is_refused_and_named(tmp_path: pathlib.Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    os.lchown(tmp_path / "link", NOBODY, NOBODY)
    with pytest.raises(OSError) as raised:
        walk.open_directory(str(tmp_path / "link"))
    error = raised.value
    assert (error.errno, error.filename) == (errno.ELOOP, f"{os.path.realpath(tmp_path)}/link")
    assert error.strerror == (
        f"is a symbolic link owned by uid {NOBODY} (neither root nor uid 0), not followed"
    )


def test_a_directory_swapped_between_its_look_and_its_open_is_looked_at_again(
    linked: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (linked / "real" / "d").mkdir()
    real_open = os.open
    refused: list[str] = []

    def swapped_once(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "d" and not refused:
            refused.append(path)
            raise NotADirectoryError(errno.ENOTDIR, "swapped", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapped_once)
    opened = walk.open_directory(str(linked / "link" / "d"))
    monkeypatch.undo()
    os.close(opened.fd)
    assert refused == ["d"]
    assert opened.path == os.path.realpath(linked / "real" / "d")
