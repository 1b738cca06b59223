"""``removed_dir_problem``: what stands in the way of an inbox's records, each answer
on real directories, and on real mounts as root (another file system, a read-only one).

The sentence is what an operator reads (``scoutd notify`` and ``scoutd abort`` print it,
a pickup logs it), so each case checks it word for word.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from scoutd.inbox.entries import entry_kind, removed_dir_problem
from scoutd.inbox.names import inbox_dir, inbox_removed_dir

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a mount)")


def chat(directory: pathlib.Path) -> tuple[str, str]:
    """The inbox (made) and the records' directory (not made) of a chat in ``directory``."""
    save_file = str(directory / "run.chat")
    os.mkdir(inbox_dir(save_file))
    return inbox_dir(save_file), inbox_removed_dir(save_file)


@pytest.fixture
def mounted(tmp_path: pathlib.Path) -> Iterator[list[str]]:
    """Mount a fresh tmpfs on each path appended to the list; all unmounted after the test."""
    points: list[str] = []
    yield points
    for point in reversed(points):
        subprocess.run(["umount", point], check=True, timeout=30)


def mount(points: list[str], path: str, *, read_only: bool = False) -> None:
    options = "size=64k,mode=0755" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", path], check=True, timeout=30)
    points.append(path)


def test_nothing_stands_in_the_way_of_records_not_made_yet_or_made(tmp_path: pathlib.Path) -> None:
    inbox, removed = chat(tmp_path)
    assert removed_dir_problem(inbox, removed) is None
    os.mkdir(removed)
    assert removed_dir_problem(inbox, removed) is None


def test_a_relative_path_is_looked_at_from_the_working_directory(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, removed = chat(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert removed_dir_problem(os.path.basename(inbox), os.path.basename(removed)) is None


def test_a_missing_inbox_is_named_with_the_systems_words(tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "gone.inbox")
    problem = removed_dir_problem(missing, str(tmp_path / "gone.inbox_removed"))
    assert problem == "the inbox cannot be examined: No such file or directory"


def test_a_symlink_in_its_place_is_refused_even_to_a_real_directory(
    tmp_path: pathlib.Path,
) -> None:
    inbox, removed = chat(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", removed)
    assert removed_dir_problem(inbox, removed) == "it is a symbolic link"


def test_a_file_or_a_fifo_in_its_place_is_not_a_directory(tmp_path: pathlib.Path) -> None:
    inbox, removed = chat(tmp_path)
    pathlib.Path(removed).write_text("not a directory")
    assert removed_dir_problem(inbox, removed) == "it is not a directory"
    os.unlink(removed)
    os.mkfifo(removed)
    assert removed_dir_problem(inbox, removed) == "it is not a directory"


def test_a_path_through_a_file_cannot_be_examined(tmp_path: pathlib.Path) -> None:
    inbox, _ = chat(tmp_path)
    (tmp_path / "plain").write_text("")
    problem = removed_dir_problem(inbox, str(tmp_path / "plain" / "run.inbox_removed"))
    assert problem == "it cannot be examined: Not a directory"


def test_a_missing_directory_above_it_cannot_be_examined(tmp_path: pathlib.Path) -> None:
    inbox, _ = chat(tmp_path)
    problem = removed_dir_problem(inbox, str(tmp_path / "no" / "such" / "run.inbox_removed"))
    assert problem == "its directory cannot be examined: No such file or directory"


@root_only
def test_an_inbox_mounted_apart_would_put_its_records_on_another_file_system(
    tmp_path: pathlib.Path, mounted: list[str]
) -> None:
    inbox, removed = chat(tmp_path)
    mount(mounted, inbox)
    assert removed_dir_problem(inbox, removed) == (
        "it would lie on another file system than the inbox"
    )
    os.mkdir(removed)  # beside the inbox, on the chat directory's file system
    assert removed_dir_problem(inbox, removed) == "it lies on another file system than the inbox"
    subprocess.run(["umount", inbox], check=True, timeout=30)
    mounted.remove(inbox)
    assert removed_dir_problem(inbox, removed) is None
    mount(mounted, removed)  # now the records' directory alone apart
    assert removed_dir_problem(inbox, removed) == "it lies on another file system than the inbox"


@root_only
def test_a_read_only_file_system_holds_no_records_even_for_root(
    tmp_path: pathlib.Path, mounted: list[str]
) -> None:
    """``access`` answers for the file system too: root is refused a read-only one."""
    chat_dir = tmp_path / "chat"
    chat_dir.mkdir()
    mount(mounted, str(chat_dir))
    inbox, removed = chat(chat_dir)
    subprocess.run(["mount", "-o", "remount,ro", str(chat_dir)], check=True, timeout=30)
    assert removed_dir_problem(inbox, removed) == "it cannot be created"
    subprocess.run(["mount", "-o", "remount,rw", str(chat_dir)], check=True, timeout=30)
    os.mkdir(removed)
    subprocess.run(["mount", "-o", "remount,ro", str(chat_dir)], check=True, timeout=30)
    assert removed_dir_problem(inbox, removed) == "it is not writable"


def test_entry_kind_names_every_kind_but_a_regular_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    os.symlink("file", tmp_path / "link")
    kinds = {name: entry_kind(os.lstat(tmp_path / name).st_mode) for name in os.listdir(tmp_path)}
    assert kinds == {
        "file": None,
        "dir": "a directory",
        "fifo": "a FIFO",
        "link": "a symbolic link",
    }
