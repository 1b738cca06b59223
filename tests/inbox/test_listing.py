"""``scoutd inbox`` and :func:`scoutd.inbox.list_inbox`: what is pending, nothing taken.

Real files in real inboxes, hostile ones included: names that are not UTF-8,
FIFOs, directories and symlinks, also under the name ``abort``.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from scoutd.inbox import (
    inbox_dir,
    inbox_removed_dir,
    list_inbox,
    listing_lines,
    write_abort,
    write_notice,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


def snapshot(save_file: str) -> dict[str, Any]:
    """Every entry of the inbox with its inode and mtime, and whether a record exists."""
    directory = inbox_dir(save_file)
    entries = {}
    for name in os.listdir(directory):
        st = os.lstat(os.path.join(directory, name))
        entries[name] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return {"entries": entries, "removed": os.path.lexists(inbox_removed_dir(save_file))}


def cli(*args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "scoutd", "inbox", *args],
        capture_output=True,
        timeout=30,
        cwd=ROOT,
    )


def test_no_inbox_lists_nothing_and_creates_nothing(save_file: str) -> None:
    listing = list_inbox(save_file)
    assert not listing.exists and listing.notices == [] and listing.abort is None
    assert not os.path.lexists(inbox_dir(save_file))
    done = cli(save_file)
    assert done.returncode == 0 and b"nothing pending" in done.stdout
    assert not os.path.lexists(inbox_dir(save_file))


def test_notices_in_delivery_order_and_the_abort_with_its_reason(save_file: str) -> None:
    write_notice(save_file, "first", name="N.txt")
    write_notice(save_file, "second", name="N.txt")
    write_notice(save_file, "early", name="A.txt")
    write_abort(save_file, "  budget exhausted \n")
    before = snapshot(save_file)
    listing = list_inbox(save_file)
    assert [e.name for e in listing.notices] == ["A.txt", "N.txt", "N~00001.txt"]
    assert [e.size for e in listing.notices] == [5, 5, 6]
    assert listing.abort is not None and listing.abort.kind is None
    assert listing.abort_reason == "budget exhausted"
    assert snapshot(save_file) == before  # nothing moved, nothing recorded
    lines = listing_lines(listing)
    assert "abort pending ('budget exhausted')" in lines[1]
    assert lines[2] == "3 notices pending, in delivery order"
    assert [line.split()[0] for line in lines[3:6]] == ["A.txt", "N.txt", "N~00001.txt"]


def test_hostile_entries_are_listed_never_opened_followed_or_taken(
    save_file: str, tmp_path: pathlib.Path
) -> None:
    write_notice(save_file, "plain", name="ok.txt")
    directory = inbox_dir(save_file)
    raw = os.fsencode(directory)
    with open(raw + b"/bad\xff.txt", "wb") as handle:
        handle.write(b"bytes")
    os.mkfifo(os.path.join(directory, "pipe"))
    os.mkdir(os.path.join(directory, "folder"))
    secret = tmp_path / "secret"
    secret.write_text("never shown")
    os.symlink(secret, os.path.join(directory, "link.txt"))
    write_notice(save_file, "hidden")  # a notice, and a dotfile beside it:
    with open(os.path.join(directory, ".tmp-writer"), "w") as handle:
        handle.write("half")
    before = snapshot(save_file)
    listing = list_inbox(save_file)
    names = [e.name for e in listing.notices]
    assert names[-2:] == [os.fsdecode(b"bad\xff.txt"), "ok.txt"]
    assert len(names) == 3  # and the timestamped notice, first
    ignored = {e.name: e.kind for e in listing.ignored}
    assert ignored == {
        ".tmp-writer": None,
        "folder": "a directory",
        "link.txt": "a symbolic link",
        "pipe": "a FIFO",
    }
    assert snapshot(save_file) == before
    record = json.loads(cli(save_file, "--json").stdout)
    assert [n["name"] for n in record["notices"]][-2:] == ["bad\\xff.txt", "ok.txt"]
    assert "never shown" not in json.dumps(record)
    assert snapshot(save_file) == before


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_an_abort_of_any_kind_is_listed_unread(
    save_file: str, tmp_path: pathlib.Path, kind: str
) -> None:
    write_notice(save_file, "waits", name="a.txt")
    path = os.path.join(inbox_dir(save_file), "abort")
    if kind == "directory":
        os.mkdir(path)
        os.mkdir(os.path.join(path, "abort"))  # a directory named abort inside, too
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        target = tmp_path / "target"
        target.write_text("a reason that must not be read")
        os.symlink(target, path)
    before = snapshot(save_file)
    listing = list_inbox(save_file)
    assert listing.abort is not None and listing.abort.kind is not None
    assert listing.abort_reason is None
    assert [e.name for e in listing.notices] == ["a.txt"]
    done = cli(save_file)
    assert done.returncode == 0
    assert f"it is {listing.abort.kind}, never read".encode() in done.stdout
    assert b"must not be read" not in done.stdout
    assert snapshot(save_file) == before


def test_a_save_file_path_that_is_not_utf8(tmp_path: pathlib.Path) -> None:
    folder = os.path.join(os.fsencode(tmp_path), b"dir\xfe")
    os.mkdir(folder)
    save_file = os.fsdecode(folder + b"/agent.chat")
    write_notice(save_file, "hello", name="n.txt")
    done = cli(os.fsencode(save_file), "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["inbox"].endswith("dir\\xfe/agent.inbox")
    assert [n["name"] for n in record["notices"]] == ["n.txt"]


def test_a_symlinked_inbox_is_refused(save_file: str, tmp_path: pathlib.Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.txt").write_text("outside")
    os.symlink(elsewhere, inbox_dir(save_file))
    with pytest.raises(OSError, match="symbolic link"):
        list_inbox(save_file)
    done = cli(save_file)
    assert done.returncode == 1 and b"symbolic link" in done.stderr
    assert os.listdir(elsewhere) == ["x.txt"]
