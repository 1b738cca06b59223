"""What mutation testing of ``scoutd/inbox/walk.py`` showed no test had tried
(docs/TESTING.md, "The thirteenth round"): a path without a symlink is opened in
one ``openat2`` call where the kernel has it, and every other answer of that
call (a symlink on the way, a missing or unusable path) is what the walk expects.
"""

from __future__ import annotations

import errno
import os
import pathlib

import pytest

from scoutd.inbox import walk

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
    assert (raised.value.errno, raised.value.filename) == (err, path)
