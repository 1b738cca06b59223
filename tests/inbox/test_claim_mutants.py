"""Claiming one inbox entry, case by case: what mutation testing of ``scoutd/inbox/claim.py``
showed no test read (docs/TESTING.md, "The twelfth round").

Real files in real inboxes. The races and faults a test cannot provoke on its
own (another consumer taking the file between two system calls, a file system
without hard links, a read that fails) are injected at the one call that meets
them.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.inbox import claim, files, inbox_dir, inbox_removed_dir, write_abort, write_notice
from scoutd.inbox.claim import NotSettled, is_complete, settled, take
from scoutd.inbox.files import SETTLE_TIME, InboxDirs
from scoutd.inbox.names import MAX_NAMES, numbered
from tests.support.ids import AS_ROOT, NOBODY

BIG = 1 << 20


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


@pytest.fixture
def dirs(save_file: str) -> Iterator[InboxDirs]:
    os.mkdir(inbox_dir(save_file))
    opened = InboxDirs.of(save_file)
    assert opened is not None
    try:
        yield opened
    finally:
        opened.close()


def records(save_file: str) -> list[str]:
    return sorted(os.listdir(inbox_removed_dir(save_file)))


# --- when a file is complete -------------------------------------------------------------


def stat_of(*, ctime_ns: int, mtime_ns: int) -> os.stat_result:
    return os.stat_result(
        (0,) * 10, {"st_ctime_ns": ctime_ns, "st_mtime_ns": mtime_ns, "st_mtime": mtime_ns / 1e9}
    )


def test_a_file_is_settled_once_renamed_in_or_quiet_for_the_settle_time() -> None:
    now = time.time_ns()
    recent, old = now - 1_000_000, now - int(SETTLE_TIME * 1e9) - 1_000_000_000
    assert settled(stat_of(ctime_ns=recent + 1, mtime_ns=recent))  # renamed in after its write
    assert not settled(stat_of(ctime_ns=recent, mtime_ns=recent))  # written just now, in place
    assert settled(stat_of(ctime_ns=old, mtime_ns=old))  # written in place long ago
    assert not settled(stat_of(ctime_ns=recent - 1, mtime_ns=recent))


def test_a_file_dated_ahead_of_the_clock_is_settled_and_one_just_written_is_not() -> None:
    """Before: a file dated in the future was held until that date (``cp -p``, ``rsync -a``
    or ``tar`` of a file from a machine whose clock runs ahead). No write dates a file
    ahead of the clock, so it is no write in progress; within the settle time either side
    of the clock a file may be one (the clock's grain)."""
    now = time.time_ns()
    settle = int(SETTLE_TIME * 1e9)
    for ahead in (settle + 2_000_000_000, 3600 * 10**9, 10**18):  # 2 s, an hour, 31 years
        assert settled(stat_of(ctime_ns=now, mtime_ns=now + ahead))  # dated by touch -d
        assert settled(stat_of(ctime_ns=now + ahead, mtime_ns=now + ahead))
    for ahead in (0, 1_000_000, settle // 2):  # still inside the grain: maybe being written
        assert not settled(stat_of(ctime_ns=now + ahead, mtime_ns=now + ahead))


def test_where_the_kernel_cannot_tell_the_times_decide(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claim, "being_written", lambda fd: None)
    monkeypatch.setattr(claim, "SETTLE_TIME", 3600.0)  # fresh for an hour, however slow this is
    path = os.path.join(dirs.inbox, "fresh.txt")
    pathlib.Path(path).write_text("just written")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert not is_complete(fd, os.fstat(fd))
    finally:
        os.close(fd)
    assert take(dirs, "fresh.txt", BIG) is None  # left for the next pickup
    abort = os.path.join(dirs.inbox, "abort")
    pathlib.Path(abort).write_text("as it is")  # written in place, not renamed in
    with pytest.raises(NotSettled):
        take(dirs, "abort", BIG)


@pytest.fixture
def fast_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claim, "MAX_SETTLE_WAIT", 0.3)


def test_a_wait_for_an_abort_ends_when_it_is_complete(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch, fast_settle: None
) -> None:
    write_abort(save_file, "stop")
    answers = iter([False, False, True])  # complete at the third look
    looks: list[int] = []

    def complete(dir_fd: int, st: os.stat_result) -> bool:
        looks.append(st.st_ino)
        return next(answers)

    monkeypatch.setattr(claim, "_abort_complete", complete)
    taken = take(dirs, "abort", BIG, wait=True)
    assert taken is not None and taken.text == "stop"
    inode = os.stat(os.path.join(inbox_removed_dir(save_file), "abort")).st_ino
    assert looks == [inode] * 3  # the first before the wait, each later one at a new lstat


def test_a_wait_for_an_abort_gives_up_after_the_longest_wait(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch, fast_settle: None
) -> None:
    write_abort(save_file, "taken as it is")
    looks: list[float] = []

    def never(dir_fd: int, st: os.stat_result) -> bool:
        looks.append(time.monotonic())
        return False

    monkeypatch.setattr(claim, "_abort_complete", never)
    began = time.monotonic()
    taken = take(dirs, "abort", BIG, wait=True)
    assert taken is not None and taken.text == "taken as it is"
    assert 0.3 <= looks[-1] - began < 5  # waited its whole time, then took it
    assert 2 <= len(looks) <= 0.3 / SETTLE_TIME + 2  # the first look, then one a sleep


def test_an_abort_taken_during_the_wait_is_reported_as_taken(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch, fast_settle: None
) -> None:
    write_abort(save_file, "the other consumer's")
    abort = os.path.join(dirs.inbox, "abort")

    def taken_meanwhile(dir_fd: int, st: os.stat_result) -> bool:
        os.unlink(abort)  # another consumer claimed it
        return False

    monkeypatch.setattr(claim, "_abort_complete", taken_meanwhile)
    assert take(dirs, "abort", BIG, wait=True) is None


def test_the_first_free_record_number_after_records_without_gaps(
    save_file: str, dirs: InboxDirs
) -> None:
    rfd = dirs.removed_fd()
    made = 0
    for count in (0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33):
        for n in range(made, count):
            os.close(os.open(numbered("n.txt", n), os.O_CREAT | os.O_WRONLY, dir_fd=rfd))
        made = count
        assert claim._first_free("n.txt", rfd) == count


def test_the_look_for_a_free_record_number_ends_at_the_last_one(
    save_file: str, dirs: InboxDirs
) -> None:
    """Records an operator made at every number the doubling looks at, the bound included:
    the look stops at the bound instead of looking there for ever."""
    rfd = dirs.removed_fd()
    probes = [0, *(1 << k for k in range(MAX_NAMES.bit_length())), MAX_NAMES]
    for n in probes:
        os.close(os.open(numbered("n.txt", n), os.O_CREAT | os.O_WRONLY, dir_fd=rfd))
    assert 1 << (MAX_NAMES.bit_length() - 1) < claim._first_free("n.txt", rfd) <= MAX_NAMES


# --- taking a notice -------------------------------------------------------------------------


def test_a_notice_gone_before_the_look_was_taken_by_another_consumer(
    dirs: InboxDirs, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="scoutd.inbox"):
        assert take(dirs, "gone.txt", BIG) is None
        assert take(dirs, "abort", BIG) is None
    assert caplog.messages == [
        f"inbox file {os.path.join(dirs.inbox, 'gone.txt')!r} was taken by another consumer",
        f"abort file {os.path.join(dirs.inbox, 'abort')!r} was taken by another consumer",
    ]


def test_a_notice_being_written_is_left_and_says_so(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_notice(save_file, "half", name="a.txt")
    monkeypatch.setattr(claim, "is_complete", lambda fd, st: False)
    with caplog.at_level(logging.INFO, logger="scoutd.inbox"):
        assert take(dirs, "a.txt", BIG) is None
    assert caplog.messages == [
        f"inbox file {os.path.join(dirs.inbox, 'a.txt')!r} is still being written: left for the"
        " next pickup"
    ]
    assert os.listdir(dirs.inbox) == ["a.txt"]


def fail_renames(
    monkeypatch: pytest.MonkeyPatch, source: str, error: OSError, times: int
) -> list[str]:
    """The next ``times`` renames of ``source`` fail with ``error``; returns each one's target."""
    rename = os.rename
    tried: list[str] = []

    def failing(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if src == source:
            tried.append(dst)
            if len(tried) <= times:
                raise error
        rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", failing)
    return tried


def test_a_claim_that_fails_while_the_notice_is_still_there_raises(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_notice(save_file, "still here", name="a.txt")
    fail_renames(monkeypatch, "a.txt", FileNotFoundError(errno.ENOENT, "gone"), times=1)
    with pytest.raises(FileNotFoundError):
        take(dirs, "a.txt", BIG)
    assert os.listdir(dirs.inbox) == ["a.txt"]
    # the same failure with the notice gone: another consumer took it
    rename = os.rename

    def taken_first(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        os.unlink(os.path.join(dirs.inbox, "a.txt"))
        raise FileNotFoundError(errno.ENOENT, "gone")

    monkeypatch.setattr(os, "rename", taken_first)
    with caplog.at_level(logging.DEBUG, logger="scoutd.inbox"):
        assert take(dirs, "a.txt", BIG) is None
    monkeypatch.setattr(os, "rename", rename)
    assert caplog.messages == [
        f"inbox file {os.path.join(dirs.inbox, 'a.txt')!r} was taken by another consumer"
    ]


def io_error(*args: Any, **kwargs: Any) -> Any:
    """A call that meets a failing disk."""
    raise OSError(errno.EIO, "Input/output error")


def no_links(*args: Any, **kwargs: Any) -> None:
    """``os.link`` on a file system without hard links."""
    raise PermissionError(errno.EPERM, "Operation not permitted")


def fail_claimed_reads(monkeypatch: pytest.MonkeyPatch, then: Any = None) -> None:
    """The read of a claimed entry (in the removed directory) fails; ``then`` runs first."""
    open_regular = files.open_regular

    def failing(name: str, dir_fd: int, *, rights_of: int | None = None) -> Any:
        if name.startswith(".claim-"):
            if then is not None:
                then()
            raise PermissionError(errno.EACCES, "Permission denied", name)
        return open_regular(name, dir_fd, rights_of=rights_of)

    monkeypatch.setattr(claim, "open_regular", failing)


def test_a_notice_that_cannot_be_read_goes_back_to_the_inbox(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_notice(save_file, "unread", name="a.txt")
    fail_claimed_reads(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        assert take(dirs, "a.txt", BIG) is None
    assert os.listdir(dirs.inbox) == ["a.txt"] and records(save_file) == []
    assert pathlib.Path(dirs.inbox, "a.txt").read_text() == "unread"
    assert len(caplog.messages) == 1
    assert caplog.messages[0].startswith(
        f"inbox file {os.path.join(dirs.inbox, 'a.txt')!r} not delivered: [Errno 13] Permission"
        " denied: '.claim-"
    )


def test_a_notice_that_cannot_go_back_over_a_newer_one_stays_recorded(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_notice(save_file, "older", name="a.txt")
    fail_claimed_reads(monkeypatch, then=lambda: write_notice(save_file, "newer", name="a.txt"))
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        assert take(dirs, "a.txt", BIG) is None
    assert pathlib.Path(dirs.inbox, "a.txt").read_text() == "newer"
    [left] = records(save_file)
    assert left.startswith(".claim-")
    assert pathlib.Path(inbox_removed_dir(save_file), left).read_text() == "older"
    assert caplog.messages[-1] == (
        f"could not return {os.path.join(dirs.removed, left)!r} to"
        f" {os.path.join(dirs.inbox, 'a.txt')!r}; it stays in the removed directory"
    )


@pytest.mark.parametrize("free", [True, False])
def test_without_hard_links_a_notice_goes_back_by_rename_unless_its_name_is_taken(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch, free: bool
) -> None:
    write_notice(save_file, "older", name="a.txt")
    link = os.link

    def newer_arrives() -> None:
        if not free:
            write_notice(save_file, "newer", name="a.txt")
        monkeypatch.setattr(os, "link", no_links)

    fail_claimed_reads(monkeypatch, then=newer_arrives)
    assert take(dirs, "a.txt", BIG) is None
    monkeypatch.setattr(os, "link", link)
    back = pathlib.Path(dirs.inbox, "a.txt").read_text()
    assert back == ("older" if free else "newer")
    assert len(records(save_file)) == (0 if free else 1)


def test_a_record_that_cannot_be_named_keeps_its_claim_name(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_notice(save_file, "delivered", name="a.txt")

    monkeypatch.setattr(claim, "place", io_error)
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        taken = take(dirs, "a.txt", BIG)
    assert taken is not None and taken.text == "delivered"
    [left] = records(save_file)
    assert taken.record == os.path.join(dirs.removed, left) and left.startswith(".claim-")
    assert caplog.messages == [
        f"inbox file 'a.txt' delivered, recorded as {taken.record!r}: [Errno 5] Input/output error"
    ]


@AS_ROOT
def test_what_the_inbox_owner_may_not_read_is_never_read_for_them(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root's mode-0600 file, moved by the agent into its own inbox (a notice swapped in
    after its first look, or the abort): root never reads it for the agent. The abort
    aborts all the same, unread. The removed directory is root's (an operator made it):
    what counts is who owns the inbox."""
    os.chown(dirs.inbox, NOBODY, NOBODY)
    os.mkdir(inbox_removed_dir(save_file))

    def roots(name: str) -> None:
        path = os.path.join(dirs.inbox, name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"root's secret")
        os.close(fd)

    write_notice(save_file, "the agent's", name="a.txt")
    os.chown(os.path.join(dirs.inbox, "a.txt"), NOBODY, NOBODY)

    def swapped(fd: int, st: os.stat_result) -> bool:
        roots("a.txt")  # the agent swaps it after the first look
        return True

    monkeypatch.setattr(claim, "is_complete", swapped)
    assert take(dirs, "a.txt", BIG) is None
    assert os.listdir(dirs.inbox) == ["a.txt"]  # put back, unread
    roots("abort")
    taken = take(dirs, "abort", BIG, complete=True)
    assert taken is not None and (taken.text, taken.unread) == ("", None)


# --- taking an abort -------------------------------------------------------------------------


def test_an_abort_not_settled_names_its_path(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_abort(save_file, "half")
    monkeypatch.setattr(claim, "_abort_complete", lambda fd, st: False)
    with pytest.raises(NotSettled) as raised:
        take(dirs, "abort", BIG)
    assert raised.value.args == (os.path.join(dirs.inbox, "abort"),)


def test_an_abort_of_another_kind_is_logged_and_recorded_by_its_name(
    save_file: str, dirs: InboxDirs, caplog: pytest.LogCaptureFixture
) -> None:
    os.mkdir(os.path.join(dirs.inbox, "abort"))
    told: list[tuple[str, str | None]] = []
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        taken = take(dirs, "abort", BIG, before_claim=lambda text, kind: told.append((text, kind)))
    assert taken is not None
    assert (taken.text, taken.unread) == ("", "a directory") and told == [("", "a directory")]
    assert taken.record == os.path.join(dirs.removed, "abort")  # moved by rename, not linked
    assert records(save_file) == ["abort"]
    shown = os.path.join(dirs.inbox, "abort")
    assert (
        caplog.messages
        == [f"abort entry {shown!r} is a directory: it aborts all the same, unread"] * 2
    )  # told before the claim, and read after it


def test_an_abort_that_cannot_be_read_aborts_with_no_text(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_abort(save_file, "unread")
    fail_claimed_reads(monkeypatch)
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        taken = take(dirs, "abort", BIG)
    assert taken is not None and (taken.text, taken.unread) == ("", None)
    assert caplog.messages[0].startswith(
        f"abort file {os.path.join(dirs.inbox, 'abort')!r} could not be read (it aborts all the"
        " same): [Errno 13] Permission denied"
    )


def test_an_abort_replaced_while_it_is_claimed_is_claimed_again_three_times_at_most(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each time another consumer took it and a new one is in its place; after three
    retries the abort is claimed inside the inbox, every setting passed on each time."""
    write_abort(save_file, "x" * 40)
    monkeypatch.setattr(claim, "_abort_complete", lambda fd, st: False)
    tried = fail_renames(monkeypatch, "abort", FileNotFoundError(errno.ENOENT, "gone"), times=4)
    told: list[str] = []
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        taken = take(
            dirs, "abort", 8, complete=True, before_claim=lambda text, kind: told.append(text)
        )
    assert [target.startswith(".claim-") for target in tried] == [True] * 4 + [False]
    assert told == ["x" * 8 + "\n[scoutd: notice truncated at 8 of 40 bytes]"] * 4
    assert taken is not None and taken.text == told[0]
    [hidden] = os.listdir(dirs.inbox)
    assert hidden.startswith(".abort-") and taken.record == os.path.join(dirs.inbox, hidden)
    assert caplog.messages == [
        f"abort file {os.path.join(dirs.inbox, 'abort')!r} could not be moved to"
        f" {dirs.removed!r} ([Errno 2] gone): the agent is aborted and the abort is recorded as"
        f" {taken.record!r}"
    ]


@pytest.mark.parametrize("moved", [True, False], ids=["within the inbox", "nowhere"])
def test_an_abort_that_cannot_reach_the_removed_directory_is_not_claimed_again(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    moved: bool,
) -> None:
    """Another file system: claimed inside the inbox at once (or read where it is), no
    retry; an abort of another kind is logged by its inbox path all the same."""
    os.mkdir(os.path.join(dirs.inbox, "abort"))
    failures = 1 if moved else 2
    tried = fail_renames(monkeypatch, "abort", OSError(errno.EXDEV, "cross-device"), failures)
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        taken = take(dirs, "abort", BIG)
    assert len(tried) == 2 and not tried[1].startswith(".claim-")
    assert taken is not None and taken.unread == "a directory"
    source = os.path.join(dirs.inbox, "abort")
    if moved:
        [hidden] = os.listdir(dirs.inbox)
        assert taken.record == os.path.join(dirs.inbox, hidden) and hidden.startswith(".abort-")
    else:
        assert taken.record == source
    assert caplog.messages[-1] == (
        f"abort entry {source!r} is a directory: it aborts all the same, unread"
    )


def test_an_abort_that_cannot_be_moved_at_all_is_read_in_place(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_abort(save_file, "stays")
    fail_renames(monkeypatch, "abort", OSError(errno.EROFS, "Read-only file system"), times=2)
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        taken = take(dirs, "abort", BIG)
    source = os.path.join(dirs.inbox, "abort")
    assert taken is not None and (taken.record, taken.text) == (source, "stays")
    assert os.listdir(dirs.inbox) == ["abort"]
    assert caplog.messages == [
        f"abort file {source!r} cannot be moved (to {dirs.removed!r}: [Errno 30] Read-only file"
        " system; within the inbox: [Errno 30] Read-only file system): it stays in place and"
        " aborts every call until an operator removes it"
    ]


@pytest.mark.parametrize(
    "error", [FileNotFoundError(errno.ENOENT, "gone"), OSError(errno.EIO, "EIO")]
)
def test_an_abort_taken_by_another_consumer_during_its_claim_is_reported_as_taken(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: OSError,
) -> None:
    write_abort(save_file, "the other consumer's")
    abort = os.path.join(dirs.inbox, "abort")

    def taken_first(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        os.unlink(abort)
        raise error

    monkeypatch.setattr(os, "rename", taken_first)
    with caplog.at_level(logging.DEBUG, logger="scoutd.inbox"):
        assert take(dirs, "abort", BIG) is None
    assert caplog.messages == [f"abort file {abort!r} was taken by another consumer"]


def test_a_retried_claim_still_waits_for_the_writer(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch, fast_settle: None
) -> None:
    write_abort(save_file, "waited for")
    monkeypatch.setattr(claim, "_abort_complete", lambda fd, st: False)
    fail_renames(monkeypatch, "abort", FileNotFoundError(errno.ENOENT, "gone"), times=1)
    taken = take(dirs, "abort", BIG, wait=True)
    assert taken is not None and taken.text == "waited for"


def test_what_a_claim_asks_of_the_record_name(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular file is recorded by a link; an abort of another kind (a directory has no
    links) by a rename that never replaces."""
    asked: list[bool] = []
    place = files.place

    def spying(*args: Any, by_rename: bool = False, **kwargs: Any) -> str:
        asked.append(by_rename)
        return place(*args, by_rename=by_rename, **kwargs)

    monkeypatch.setattr(claim, "place", spying)
    write_abort(save_file, "regular")
    assert take(dirs, "abort", BIG) is not None
    os.mkfifo(os.path.join(dirs.inbox, "abort"))
    assert take(dirs, "abort", BIG) is not None
    write_notice(save_file, "a notice", name="a.txt")
    assert take(dirs, "a.txt", BIG) is not None
    assert asked == [False, True, False]


def test_a_notice_goes_back_by_a_link_that_never_replaces(
    save_file: str, dirs: InboxDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the file system has links, the put back never renames (a rename may replace a
    notice that arrived meanwhile)."""
    write_notice(save_file, "older", name="a.txt")
    renames: list[Any] = []

    def spy_renames() -> None:
        rename = os.rename

        def spying(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            renames.append(dst)
            rename(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "rename", spying)

    fail_claimed_reads(monkeypatch, then=spy_renames)
    assert take(dirs, "a.txt", BIG) is None
    assert renames == [] and pathlib.Path(dirs.inbox, "a.txt").read_text() == "older"


def test_a_claimed_symlink_goes_back_as_the_link_never_its_target(
    save_file: str, dirs: InboxDirs, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Swapped for a symlink after its first look: it is not delivered, and what goes
    back is the link itself (no hard link to its target appears in the inbox)."""
    secret = tmp_path / "secret"
    secret.write_text("not the agent's")
    write_notice(save_file, "the agent's", name="a.txt")

    def swapped(fd: int, st: os.stat_result) -> bool:
        path = os.path.join(dirs.inbox, "a.txt")
        os.unlink(path)
        os.symlink(secret, path)
        return True

    monkeypatch.setattr(claim, "is_complete", swapped)
    assert take(dirs, "a.txt", BIG) is None
    assert os.path.islink(os.path.join(dirs.inbox, "a.txt"))
    assert os.stat(secret).st_nlink == 1


def test_without_links_a_put_back_that_cannot_rename_leaves_the_claim(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_notice(save_file, "older", name="a.txt")

    def broken() -> None:
        monkeypatch.setattr(os, "link", no_links)
        monkeypatch.setattr(os, "rename", io_error)

    fail_claimed_reads(monkeypatch, then=broken)
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        assert take(dirs, "a.txt", BIG) is None
    monkeypatch.undo()
    [left] = records(save_file)
    assert left.startswith(".claim-") and os.listdir(dirs.inbox) == []
    assert caplog.messages[-1].startswith("could not return ")


def test_an_abort_taken_before_its_claim_inside_the_inbox_is_reported_as_taken(
    save_file: str,
    dirs: InboxDirs,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_abort(save_file, "the other consumer's")
    abort = os.path.join(dirs.inbox, "abort")
    rename = os.rename
    calls: list[str] = []

    def racing(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(dst)
        if len(calls) == 1:
            raise OSError(errno.EXDEV, "cross-device")
        os.unlink(abort)  # another consumer won the claim inside the inbox
        rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", racing)
    with caplog.at_level(logging.DEBUG, logger="scoutd.inbox"):
        assert take(dirs, "abort", BIG) is None
    assert caplog.messages == [f"abort file {abort!r} was taken by another consumer"]
