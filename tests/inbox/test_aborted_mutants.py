"""The abort marker and the daemon's inbox gate, case by case: what mutation testing of
``scoutd/inbox/aborted.py`` and ``scoutd/inbox/gate.py`` showed no test read
(docs/TESTING.md, "The twelfth round").

Real files in real directories. A fault the kernel gives only to another user
or a failing disk (a marker that cannot be read, an entry that cannot be
examined, a directory that refuses the marker) is injected at the one call
that meets it.
"""

from __future__ import annotations

import errno
import logging
import os
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.errors import AbortNotTaken, InboxUnusable
from scoutd.inbox import aborted, inbox_dir, write_abort
from scoutd.inbox.aborted import MARKER, check, claim_and_mark, clear, held, mark, marker_paths
from scoutd.inbox.claim import NotSettled
from scoutd.inbox.files import being_written, lexists
from scoutd.inbox.gate import MAX_TAKEN, InboxGate

LONG_REASON = "stop: " + "x" * 60


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


@pytest.fixture
def linked(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    """``(save file, real directory)``: the chat named through the caller's own symlink
    ``link`` to ``data``, which the library follows and the daemon (``exact``) never."""
    real = tmp_path / "data"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    return str(tmp_path / "link" / "agent.chat"), real


def generic(path: str, why: str) -> str:
    """The reason of a marker that exists but cannot be looked at the consumers' way."""
    return f"aborted by operator (the abort marker {path} cannot be read: {why})"


def refused_link() -> str:
    """Why the exact walk stops at the caller's own symlink."""
    return (
        f"is a symbolic link owned by uid {os.geteuid()} on a path the daemon resolved"
        " itself, where it follows no symbolic links (swapped in after its check, or a loop)"
    )


# --- exact: a path the daemon resolved follows no symlink ---------------------------------


def test_a_marker_beside_the_chat_is_read_through_a_link_unless_exact(
    linked: tuple[str, pathlib.Path],
) -> None:
    save_file, real = linked
    (real / "agent.inbox_aborted").write_text("through the link")
    assert held(save_file) == "through the link"
    # the kernel sees the marker; the exact walk refuses the link: aborted, unread
    assert held(save_file, exact=True) == generic(marker_paths(save_file)[0], refused_link())


def test_a_marker_in_the_inbox_is_read_through_a_link_unless_exact(
    linked: tuple[str, pathlib.Path],
) -> None:
    save_file, real = linked
    (real / "agent.inbox").mkdir()
    (real / "agent.inbox" / MARKER).write_text("inside, through the link")
    assert held(save_file) == "inside, through the link"
    assert held(save_file, exact=True) == generic(marker_paths(save_file)[1], refused_link())


def test_mark_writes_through_the_callers_link_but_never_when_exact(
    linked: tuple[str, pathlib.Path],
) -> None:
    save_file, real = linked
    assert mark(save_file, "exact", exact=True) is None  # both places refuse the link
    assert sorted(os.listdir(real)) == []
    assert mark(save_file, "followed") == marker_paths(save_file)[0]
    assert (real / "agent.inbox_aborted").read_text() == "followed"


def test_claim_and_mark_follows_the_callers_link_unless_exact(
    linked: tuple[str, pathlib.Path],
) -> None:
    save_file, real = linked
    write_abort(str(real / "agent.chat"), "through the link")
    with pytest.raises(InboxUnusable):
        claim_and_mark(save_file, exact=True)
    assert os.listdir(real / "agent.inbox") == ["abort"]  # nothing taken, nothing marked
    assert not (real / "agent.inbox_aborted").exists()
    assert claim_and_mark(save_file) == "through the link"  # the library's default
    assert (real / "agent.inbox_aborted").read_text() == "through the link"


def test_a_directory_swapped_for_a_link_during_the_daemons_claim_keeps_its_abort(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's claim (``exact``) marks the chat by the same rule: a link swapped in
    after the claim opened the inbox is refused, so the abort is not taken."""
    real = tmp_path / "data"
    real.mkdir()
    save_file = str(real / "agent.chat")
    write_abort(save_file, "stop")
    marking = aborted.mark

    def swapping(save: str, reason: str, *, exact: bool = False) -> str | None:
        real.rename(tmp_path / "moved")
        real.symlink_to(tmp_path / "moved")
        return marking(save, reason, exact=exact)

    monkeypatch.setattr(aborted, "mark", swapping)
    with pytest.raises(AbortNotTaken):
        claim_and_mark(save_file, exact=True)
    assert os.listdir(tmp_path / "moved" / "agent.inbox") == ["abort"]
    assert not (tmp_path / "moved" / "agent.inbox_aborted").exists()


def test_a_chat_in_the_working_directory_is_marked_and_read_there(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert mark("agent.chat", "beside") == "agent.inbox_aborted"
    assert held("agent.chat") == "beside"
    os.unlink("agent.inbox_aborted")
    os.mkdir("agent.inbox")
    pathlib.Path("agent.inbox", MARKER).write_text("inside")
    assert held("agent.chat") == "inside"


# --- the marker in the inbox: the inbox itself is never followed --------------------------


def refuse_beside(monkeypatch: pytest.MonkeyPatch, save_file: str) -> None:
    """The chat directory refuses the marker beside the chat (a full or read-only disk)."""
    write = aborted._write

    def refusing(path: str, reason: str, *, inbox: bool, exact: bool) -> str:
        if path == marker_paths(save_file)[0]:
            raise OSError(errno.EROFS, "Read-only file system", path)
        return write(path, reason, inbox=inbox, exact=exact)

    monkeypatch.setattr(aborted, "_write", refusing)


def test_the_marker_is_never_written_through_a_link_in_the_inbox_place(
    save_file: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, inbox_dir(save_file))
    refuse_beside(monkeypatch, save_file)
    beside, in_inbox = marker_paths(save_file)
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        assert mark(save_file, "kept out") is None
    assert os.listdir(elsewhere) == []
    assert caplog.messages == [
        f"the chat of {save_file!r} is aborted, but no abort marker could be written"
        f" ({beside}: Read-only file system; {in_inbox}: is a symbolic link, not followed)"
    ]


def test_a_marker_written_in_the_inbox_says_why_in_the_log(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    os.mkdir(inbox_dir(save_file))
    refuse_beside(monkeypatch, save_file)
    beside, in_inbox = marker_paths(save_file)
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        assert mark(save_file, "inside") == in_inbox
    assert caplog.messages == [
        f"abort marker written to {in_inbox!r} instead ({beside}: Read-only file system)"
    ]


def test_a_problem_without_words_is_named_by_the_exception(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refusing(path: str, reason: str, *, inbox: bool, exact: bool) -> str:
        raise OSError("no words")

    monkeypatch.setattr(aborted, "_write", refusing)
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        assert mark(save_file, "lost") is None
    beside, in_inbox = marker_paths(save_file)
    assert caplog.messages[-1].endswith(f"({beside}: no words; {in_inbox}: no words)")


def test_a_clear_never_removes_through_a_link_in_the_inbox_place(
    save_file: str, tmp_path: pathlib.Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "abort").write_text("another chat's")
    (elsewhere / MARKER).write_text("another chat's marker")
    os.symlink(elsewhere, inbox_dir(save_file))
    cleared = clear(save_file)
    assert sorted(os.listdir(elsewhere)) == [MARKER, "abort"]
    assert cleared.removed == []
    # the marker seen through the link still aborts, unread
    assert cleared.still == generic(marker_paths(save_file)[1], "is a symbolic link, not followed")


# --- what a marker that cannot be looked at means ------------------------------------------


def test_a_marker_behind_a_symlink_loop_is_not_seen_and_says_so_in_the_debug_log(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kernel cannot tell either (ELOOP): no marker, and every consumer fails closed on
    the directory itself (test_reaching.py)."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    save_file = str(loop / "agent.chat")
    with caplog.at_level(logging.DEBUG, logger="scoutd.inbox"):
        assert held(save_file) is None
    beside = marker_paths(save_file)[0]
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records[0][0] == logging.DEBUG
    assert records[0][1].startswith(f"abort marker {beside!r} cannot be examined: [Errno 40]")


def test_a_marker_seen_but_not_reached_is_logged_as_an_error(
    save_file: str, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / MARKER).write_text("from outside")
    os.symlink(elsewhere, inbox_dir(save_file))
    in_inbox = marker_paths(save_file)[1]
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        assert held(save_file) == generic(in_inbox, "is a symbolic link, not followed")
    assert caplog.messages == [
        f"abort marker {in_inbox!r} cannot be examined (the chat is aborted):"
        f" [Errno {errno.ENOTDIR}] is a symbolic link, not followed: {inbox_dir(save_file)!r}"
    ]


@pytest.mark.parametrize(
    ("error", "expected"),
    [(errno.EIO, "Input/output error"), (errno.ENOENT, None)],
    ids=["failing", "gone meanwhile"],
)
def test_a_marker_that_cannot_be_examined_aborts_unless_it_is_gone(
    save_file: str, monkeypatch: pytest.MonkeyPatch, error: int, expected: str | None
) -> None:
    """Seen by the kernel, then the look in its directory fails (a failing disk, or a
    clear in between)."""
    beside = marker_paths(save_file)[0]
    pathlib.Path(beside).write_text("unseen reason")
    lstat = os.lstat

    def failing(path: Any, *args: Any, dir_fd: int | None = None, **kwargs: Any) -> Any:
        if dir_fd is not None:
            raise OSError(error, os.strerror(error), path)
        return lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", failing)
    assert held(save_file) == (None if expected is None else generic(beside, expected))


def test_a_marker_that_cannot_be_read_aborts_with_a_generic_reason(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another user's mode-0600 marker: the chat is aborted, the reason unknown."""
    beside = marker_paths(save_file)[0]
    pathlib.Path(beside).write_text("unread reason")

    def refusing(name: str, dir_fd: int) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", name)

    monkeypatch.setattr(aborted, "open_regular", refusing)
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        assert held(save_file) == f"aborted by operator (abort marker {beside})"
    assert caplog.messages == [
        f"abort marker {beside!r} cannot be read (the chat is aborted):"
        f" [Errno 13] Permission denied: 'agent.inbox_aborted'"
    ]


def test_a_forged_long_marker_is_cut_and_says_how_long_it_was(save_file: str) -> None:
    beside = marker_paths(save_file)[0]
    size = (1 << 20) + 10
    pathlib.Path(beside).write_bytes(b"r" * size)
    reason = held(save_file)
    assert reason is not None
    assert reason == "r" * (1 << 20) + f"\n[scoutd: notice truncated at {1 << 20} of {size} bytes]"


# --- writing the marker -------------------------------------------------------------------


def test_a_reason_that_is_not_utf8_is_kept_byte_for_byte(save_file: str) -> None:
    """An abort file's bytes that are not UTF-8 reach the marker as they were."""
    path = mark(save_file, "stop \udcff now")
    assert path is not None
    assert pathlib.Path(path).read_bytes() == b"stop \xff now"


def test_a_marker_another_consumer_places_meanwhile_is_kept(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two consumers mark at once: the one that places second keeps the first's marker
    (its reason), and writes none in the inbox."""
    beside = marker_paths(save_file)[0]

    def first_wins(name: str, dfd: int) -> bool:
        found = lexists(name, dfd)
        pathlib.Path(beside).write_text("the first consumer's")
        return found

    monkeypatch.setattr(aborted, "lexists", first_wins)
    assert mark(save_file, "the second consumer's") == beside
    monkeypatch.undo()
    assert held(save_file) == "the first consumer's"
    assert not os.path.lexists(inbox_dir(save_file))


def test_the_marker_and_its_directory_are_made_durable(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[tuple[int, int]] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    path = mark(save_file, "durable")
    assert path is not None
    marker, directory = os.stat(path), os.stat(os.path.dirname(save_file))
    assert synced == [(marker.st_dev, marker.st_ino), (directory.st_dev, directory.st_ino)]


def test_a_marker_whose_fsync_fails_is_written_all_the_same(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    assert mark(save_file, "best effort") == marker_paths(save_file)[0]
    assert held(save_file) == "best effort"


# --- claim_and_mark and check pass their settings on ----------------------------------------


def test_claim_and_mark_and_check_cut_the_reason_at_max_bytes(save_file: str) -> None:
    write_abort(save_file, LONG_REASON)
    reason = claim_and_mark(save_file, max_bytes=8)
    assert reason is not None and reason.startswith("stop: xx\n[scoutd: notice truncated at 8")
    assert clear(save_file).still is None
    write_abort(save_file, LONG_REASON)
    reason = check(save_file, max_bytes=8)
    assert reason is not None and reason.startswith("stop: xx\n[scoutd: notice truncated at 8")


class Writer:
    """An abort whose writer still holds it open."""

    def __init__(self, save_file: str) -> None:
        write_abort(save_file, "first half")
        self.fd: int | None = os.open(
            os.path.join(inbox_dir(save_file), "abort"), os.O_WRONLY | os.O_APPEND
        )

    def finish(self) -> None:
        """Write the rest and close."""
        if self.fd is not None:
            os.write(self.fd, b", second half")
            os.close(self.fd)
            self.fd = None


@pytest.fixture
def writer(save_file: str) -> Iterator[Writer]:
    """An abort being written (where the kernel can tell; else the test is skipped)."""
    held_open = Writer(save_file)
    try:
        assert held_open.fd is not None
        if being_written(held_open.fd) is None:
            pytest.skip("this file system cannot tell whether a file is being written")
        yield held_open
    finally:
        held_open.finish()


def test_claim_and_mark_can_refuse_to_wait_for_a_writer(save_file: str, writer: Writer) -> None:
    with pytest.raises(NotSettled):
        claim_and_mark(save_file, wait=False)
    assert held(save_file) is None  # nothing marked, nothing taken
    assert claim_and_mark(save_file, complete=True, wait=False) == "first half"


def test_claim_and_mark_waits_for_the_writer_by_default(save_file: str, writer: Writer) -> None:
    timer = threading.Timer(0.2, writer.finish)
    timer.start()
    try:
        assert claim_and_mark(save_file) == "first half, second half"
    finally:
        timer.join(5)


# --- clear -----------------------------------------------------------------------------------


def test_clear_logs_what_it_removed(save_file: str, caplog: pytest.LogCaptureFixture) -> None:
    write_abort(save_file, "waiting")
    abort = os.path.join(inbox_dir(save_file), "abort")
    with caplog.at_level(logging.INFO, logger="scoutd.inbox"):
        clear(save_file)
    assert caplog.messages == [f"abort entry {abort!r} removed by an operator's clear"]


def test_an_abort_clear_cannot_remove_is_still_waiting(save_file: str) -> None:
    abort = os.path.join(inbox_dir(save_file), "abort")
    os.makedirs(os.path.join(abort, "inside"))  # a directory is removed only when empty
    cleared = clear(save_file)
    assert cleared.removed == []
    assert cleared.failed == [(abort, "Directory not empty")]
    assert cleared.still == f"an abort entry is still waiting: {abort}"


def test_a_failure_without_words_is_named_by_the_exception(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(path: str, *, inbox: bool) -> bool:
        raise OSError("no words")

    monkeypatch.setattr(aborted, "_remove", failing)
    assert [why for _, why in clear(save_file).failed] == ["no words"] * 3


# --- the daemon's gate ---------------------------------------------------------------------


def test_the_gate_remembers_the_most_recent_takes_and_forgets_the_oldest() -> None:
    gate = InboxGate()
    before = gate.ticket()
    for number in range(MAX_TAKEN + 1):
        gate.record(f"inbox-{number}", f"reason {number}")
    assert gate.taken_since("inbox-0", before.seq) is None  # the oldest, forgotten
    assert gate.taken_since("inbox-1", before.seq) == "reason 1"  # MAX_TAKEN remembered
    assert gate.taken_since(f"inbox-{MAX_TAKEN}", before.seq) == f"reason {MAX_TAKEN}"
    gate.record("inbox-1", "again")  # a take moves its inbox to the newest
    gate.record("inbox-new", "pushes out inbox-2, not inbox-1")
    assert gate.taken_since("inbox-1", before.seq) == "again"
    assert gate.taken_since("inbox-2", before.seq) is None
