"""The watcher's pure helpers against plain oracles."""

from __future__ import annotations

import os
import pathlib
import shutil
from collections import Counter

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scoutd.watch_state import (
    Registration,
    Watch,
    beneath,
    inode_of,
    listing,
    next_step,
    poll,
    stale,
)

# Absolute paths over a few names, so that nesting, siblings sharing a prefix
# ("/a" and "/ab") and the root itself all come up often.
_NAMES = st.sampled_from(["a", "ab", "b", "a.b"])
_PATHS = st.lists(_NAMES, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _inside(directory: str, top: str) -> bool:
    """The oracle: ``directory`` lies strictly inside ``top``, by its text."""
    return directory != top and directory.startswith(top.rstrip("/") + "/")


_REACHED: Counter[str] = Counter()


@settings(max_examples=400, derandomize=True, database=None)
@given(tops=st.sets(_PATHS, max_size=4), directories=st.lists(_PATHS, max_size=8))
def test_beneath_finds_what_lies_inside_a_top_in_order(
    tops: set[str], directories: list[str]
) -> None:
    expected = [d for d in directories if any(_inside(d, top) for top in tops)]
    assert beneath(tops, directories) == expected
    for d in directories:
        if any(_inside(d, top) for top in tops):
            _REACHED["inside" if "/" not in tops else "under the root"] += 1
        elif any(d.startswith(top) and d != top for top in tops):
            _REACHED["a sibling sharing a prefix"] += 1  # "/ab" is not inside "/a"
        elif d in tops:
            _REACHED["a top itself"] += 1
    event(f"{len(expected)} found")


def test_beneath_reaches_every_interesting_case() -> None:
    _REACHED.clear()
    test_beneath_finds_what_lies_inside_a_top_in_order()
    for case in ("inside", "under the root", "a sibling sharing a prefix", "a top itself"):
        assert _REACHED[case] >= 20, (case, dict(_REACHED))


def test_a_registration_is_used_while_it_watches_its_directory_or_anchors_one() -> None:
    reg = Registration("/a", wd=1, cid=1, inode=None)
    assert not reg.used()
    reg.direct = True
    assert reg.used()
    reg.direct = False
    reg.waiting["/a/b"] = {"/a/b/c"}
    assert reg.used()


def test_stale_names_every_watch_to_arm_again_and_no_other(tmp_path: pathlib.Path) -> None:
    """Unarmed; armed on a directory since replaced; anchored while the directory
    appeared, or on an ancestor since replaced. Not: armed on its directory, or
    anchored on a sound ancestor while the directory is still missing."""
    for name in ("armed", "replaced", "anchor", "swapped"):
        (tmp_path / name).mkdir()

    def registration(path: pathlib.Path) -> Registration:
        return Registration(str(path), wd=1, cid=1, inode=inode_of(str(path)))

    armed = Watch(1, registration(tmp_path / "armed"))
    replaced = Watch(1, registration(tmp_path / "replaced"))
    os.rename(tmp_path / "replaced", tmp_path / "old")  # kept: its inode cannot be reused
    (tmp_path / "replaced").mkdir()
    waiting = Watch(1, registration(tmp_path / "anchor"), anchored=True)
    appeared = Watch(1, registration(tmp_path / "anchor"), anchored=True)
    (tmp_path / "anchor" / "appeared").mkdir()
    moved = Watch(1, registration(tmp_path / "swapped"), anchored=True)
    os.rename(tmp_path / "swapped", tmp_path / "old-swapped")
    (tmp_path / "swapped").mkdir()
    watches = [
        (str(tmp_path / "unarmed"), Watch(1)),
        (str(tmp_path / "armed"), armed),
        (str(tmp_path / "replaced"), replaced),
        (str(tmp_path / "anchor" / "missing"), waiting),
        (str(tmp_path / "anchor" / "appeared"), appeared),
        (str(tmp_path / "swapped" / "missing"), moved),
    ]
    assert stale(watches) == [
        str(tmp_path / "unarmed"),
        str(tmp_path / "replaced"),
        str(tmp_path / "anchor" / "appeared"),
        str(tmp_path / "swapped" / "missing"),
    ]


def test_next_step_is_the_child_on_the_way() -> None:
    assert next_step("/a", "/a/b/c/d") == "/a/b"
    assert next_step("/", "/a/b") == "/a"


def test_a_listing_looks_at_links_never_through_them(tmp_path: pathlib.Path) -> None:
    (tmp_path / "file").write_text("12345")
    os.symlink("file", tmp_path / "link")
    os.symlink("nowhere", tmp_path / "dangling")
    listed = listing(str(tmp_path))
    assert listed is not None and sorted(listed) == ["dangling", "file", "link"]
    for name in listed:
        st = os.lstat(tmp_path / name)
        assert listed[name] == (st.st_ino, st.st_size, st.st_mtime_ns)
    assert listing(str(tmp_path / "absent")) is None


def test_a_poll_names_each_directory_and_file_that_changed(tmp_path: pathlib.Path) -> None:
    inbox, later, gone = tmp_path / "inbox", tmp_path / "later", tmp_path / "gone"
    inbox.mkdir()
    gone.mkdir()
    (inbox / "kept.txt").write_text("a")
    (inbox / "grows.txt").write_text("a")
    (gone / "x.txt").write_text("a")
    before, changed = poll({str(inbox): None, str(later): None, str(gone): None})
    assert sorted(changed) == sorted(
        [
            str(inbox),
            str(inbox / "grows.txt"),
            str(inbox / "kept.txt"),
            str(gone),
            str(gone / "x.txt"),
        ]
    )
    assert poll(before)[1] == []  # nothing changed: nothing named
    (inbox / "grows.txt").write_text("abc")
    (inbox / "new.txt").write_text("n")
    later.mkdir()
    shutil.rmtree(gone)
    after, changed = poll(before)
    assert sorted(changed) == sorted(
        [
            str(inbox / "grows.txt"),
            str(inbox / "new.txt"),
            str(later),
            str(gone),
            str(gone / "x.txt"),
        ]
    )
    assert after[str(gone)] is None and after[str(later)] == {}
