"""What a writer leaves in the inbox: the file's bits, owner, group and date, the
name it takes when another writer or consumer moves first, and nothing else.

Races are made real by running the other party's step, on the real directory,
at the moment the writer's own step (``place``) runs.
"""

from __future__ import annotations

import os
import pathlib
import queue
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from scoutd.inbox import inbox_dir, write_abort, write_notice, writers
from scoutd.inbox.files import SETTLE_TIME
from scoutd.inbox.files import place as real_place
from scoutd.inbox.names import notice_names
from scoutd.inbox.writers import place_abort
from tests.reliability.harness import GROUP, NOBODY, notice_as_nobody
from tests.support.umask import umask

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another uid)")

Place = Callable[..., str]


def test_a_notice_gets_its_inboxs_read_bits_whatever_the_umask(tmp_path: pathlib.Path) -> None:
    """A shared group must read it under umask 077; nobody gets more than the inbox's
    read bits, nor an execute bit."""
    save_file = str(tmp_path / "run.chat")
    os.mkdir(inbox_dir(save_file))
    os.chmod(inbox_dir(save_file), 0o750)
    with umask(0o077):
        strict = write_notice(save_file, "x", name="a.txt")
    with umask(0o022):
        usual = write_notice(save_file, "x", name="b.txt")
    os.chmod(inbox_dir(save_file), 0o755)
    with umask(0o077):
        wide = write_notice(save_file, "x", name="c.txt")
    modes = [stat.S_IMODE(os.stat(path).st_mode) for path in (strict, usual, wide)]
    assert modes == [0o640, 0o644, 0o644]


@root_only
@pytest.mark.parametrize("owner", [(0, GROUP), (NOBODY, 0), (1, 0), (NOBODY, NOBODY)])
def test_root_writes_files_the_inbox_owner_and_group_own(
    tmp_path: pathlib.Path, owner: tuple[int, int]
) -> None:
    save_file = str(tmp_path / "run.chat")
    os.mkdir(inbox_dir(save_file))
    os.chown(inbox_dir(save_file), *owner)
    for path in (write_notice(save_file, "x"), write_abort(save_file, "stop")):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == owner


@root_only
def test_another_uid_writing_into_a_group_inbox_gives_the_group_it_may_give(
    reachable: pathlib.Path,
) -> None:
    """A member of the inbox's group gives a file that group (never the inbox's
    owner); a writer outside it cannot, and its notice is written all the same."""
    save_file = str(reachable / "run.chat")
    os.mkdir(inbox_dir(save_file))
    os.chown(inbox_dir(save_file), 0, GROUP)
    os.chmod(inbox_dir(save_file), 0o777)
    member = os.stat(notice_as_nobody(save_file, group=GROUP))
    outsider = os.stat(notice_as_nobody(save_file))
    assert (member.st_uid, member.st_gid) == (NOBODY, GROUP)
    assert (outsider.st_uid, outsider.st_gid) == (NOBODY, NOBODY)
    assert stat.S_IMODE(outsider.st_mode) & 0o044 == 0o044


def racing(monkeypatch: pytest.MonkeyPatch, step: Callable[[str, str, list[str]], None]) -> None:
    """Run ``step(directory, source, names)`` just before each ``place`` of the writers."""
    real: Place = real_place

    def place(source: str, directory: str, names: Iterable[str], **kwargs: Any) -> str:
        listed = list(names)
        step(directory, source, listed)
        return real(source, directory, listed, **kwargs)

    monkeypatch.setattr(writers, "place", place)


def test_an_inbox_another_writer_makes_meanwhile_is_used_and_no_temporary_stays(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = str(tmp_path / "run.chat")

    def made_first(directory: str, source: str, names: list[str]) -> None:
        if source.startswith(".inbox-") and not os.path.lexists(inbox_dir(save_file)):
            os.mkdir(inbox_dir(save_file))
            pathlib.Path(inbox_dir(save_file), "theirs.txt").write_text("theirs")

    racing(monkeypatch, made_first)
    path = write_notice(save_file, "ours", name="ours.txt")
    assert path == os.path.join(inbox_dir(save_file), "ours.txt")
    assert sorted(os.listdir(inbox_dir(save_file))) == ["ours.txt", "theirs.txt"]
    assert os.listdir(tmp_path) == ["run.inbox"]  # the writer's own directory is gone


def test_a_symlink_swapped_in_meanwhile_is_refused_by_its_full_path(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = str(tmp_path / "run.chat")
    (tmp_path / "elsewhere").mkdir()

    def swapped(directory: str, source: str, names: list[str]) -> None:
        if source.startswith(".inbox-") and not os.path.lexists(inbox_dir(save_file)):
            os.symlink(tmp_path / "elsewhere", inbox_dir(save_file))

    racing(monkeypatch, swapped)
    with pytest.raises(OSError) as raised:
        write_notice(save_file, "x")
    assert (raised.value.filename, raised.value.strerror) == (
        inbox_dir(save_file),
        "is a symbolic link, not followed",
    )
    assert sorted(os.listdir(tmp_path)) == ["elsewhere", "run.inbox"]
    assert os.listdir(tmp_path / "elsewhere") == []


def test_a_name_taken_meanwhile_is_passed_over_never_replaced_nor_kept(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers of one name list the inbox at once: the second's first name is
    taken when it places its file, so it takes the next one."""
    save_file = str(tmp_path / "run.chat")
    write_notice(save_file, "first", name="n.txt")
    monkeypatch.setattr(writers, "notice_names", lambda name, pending: notice_names(name, []))
    second = write_notice(save_file, "second", name="n.txt")
    inbox = pathlib.Path(inbox_dir(save_file))
    assert second == str(inbox / "n~00001.txt")
    assert [(inbox / n).read_text() for n in ("n.txt", "n~00001.txt")] == ["first", "second"]


def test_a_notice_that_finds_no_free_name_fails_and_leaves_no_temporary(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = str(tmp_path / "run.chat")
    write_notice(save_file, "first", name="n.txt")
    monkeypatch.setattr(writers, "notice_names", lambda name, pending: [name])  # none free
    with pytest.raises(FileExistsError):
        write_notice(save_file, "second", name="n.txt")
    assert os.listdir(inbox_dir(save_file)) == ["n.txt"]
    assert pathlib.Path(inbox_dir(save_file), "n.txt").read_text() == "first"


def test_an_abort_consumed_before_it_is_looked_at_again_was_written(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = str(tmp_path / "run.chat")
    real: Place = real_place

    def consumed(source: str, directory: str, names: Iterable[str], **kwargs: Any) -> str:
        listed = list(names)
        path = real(source, directory, listed, **kwargs)
        if listed == ["abort"]:
            os.unlink(path)  # the daemon's watcher takes it at once
        return path

    monkeypatch.setattr(writers, "place", consumed)
    placed = place_abort(save_file, "stop")
    assert placed.written and placed.path == os.path.join(inbox_dir(save_file), "abort")


def test_a_kept_abort_leaves_no_temporary(tmp_path: pathlib.Path) -> None:
    save_file = str(tmp_path / "run.chat")
    place_abort(save_file, "first")
    assert not place_abort(save_file, "second").written
    assert os.listdir(inbox_dir(save_file)) == ["abort"]


def test_missing_directories_of_the_chat_are_made_and_a_relative_path_is_the_working_ones(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = str(tmp_path / "a" / "b" / "run.chat")
    assert write_notice(deep, "x", name="n.txt") == str(tmp_path / "a/b/run.inbox/n.txt")
    monkeypatch.chdir(tmp_path)
    assert write_abort("here.chat") == str(tmp_path / "here.inbox" / "abort")


def test_a_notice_is_dated_back_past_the_settle_time(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that finds it by a scan sees it settled at once (its mtime is old)."""
    now = 1_800_000_000 * 10**9
    monkeypatch.setattr(time, "time_ns", lambda: now)
    path = write_notice(str(tmp_path / "run.chat"), "x")
    assert os.stat(path).st_mtime_ns == now - 2 * int(SETTLE_TIME * 1e9)


def test_a_lone_surrogate_that_stands_for_no_byte_is_written_escaped(
    tmp_path: pathlib.Path,
) -> None:
    """Only a library caller can pass one; the notice is written, not refused."""
    save_file = str(tmp_path / "run.chat")
    assert pathlib.Path(write_notice(save_file, "a\ud800b")).read_bytes() == b"a\\ud800b"
    undecodable = os.fsdecode(b"a\xffb")  # a byte of the command line: written as it came
    assert pathlib.Path(write_notice(save_file, undecodable)).read_bytes() == b"a\xffb"


class _Events(FileSystemEventHandler):
    def __init__(self) -> None:
        self.seen: queue.Queue[FileSystemEvent] = queue.Queue()

    def on_any_event(self, event: FileSystemEvent) -> None:
        self.seen.put(event)


@pytest.fixture
def watched(tmp_path: pathlib.Path) -> Iterator[tuple[str, _Events]]:
    """A chat whose inbox the real watchdog observer watches."""
    save_file = str(tmp_path / "run.chat")
    os.mkdir(inbox_dir(save_file))
    events = _Events()
    observer = Observer()
    observer.schedule(events, inbox_dir(save_file))
    observer.start()
    try:
        yield save_file, events
    finally:
        observer.stop()
        observer.join(timeout=10)


def test_a_watcher_sees_a_notice_arrive_whole_by_a_move(watched: tuple[str, _Events]) -> None:
    """Renamed into place: the final name's one event is a move, never a creation
    (a created file may still be being written)."""
    save_file, events = watched
    final = write_notice(save_file, "x", name="n.txt")
    deadline = time.monotonic() + 10
    moved: list[FileSystemEvent] = []
    while not moved and time.monotonic() < deadline:
        try:
            event = events.seen.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if event.event_type == "created":
            assert event.src_path != final, event
        if event.event_type == "moved" and getattr(event, "dest_path", None) == final:
            moved.append(event)
    assert moved, "no move into the final name was seen"
