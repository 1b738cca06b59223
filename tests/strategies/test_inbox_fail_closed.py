"""The library's side of two inbox rules: an abort fails closed, files are taken complete."""

from __future__ import annotations

import errno
import logging
import os
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from scoutd import Aborted, PromptConfig
from scoutd.errors import AbortNotTaken, StillAborted
from scoutd.inbox.aborted import clear, held
from scoutd.inbox.files import being_written
from scoutd.inbox.pickup import BEING_WRITTEN
from scoutd.strategies import inbox_files
from scoutd.strategies.inbox import (
    AbortNotWritten,
    claim_abort,
    inbox,
    inbox_dir,
    inbox_removed_dir,
    record_problem,
    write_abort,
    write_notice,
)
from tests.support.odd_entries import KIND_WORDS, KINDS, OddEntry

CONFIG = PromptConfig()


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


def hidden(save_file: str, prefix: str = ".abort-") -> list[str]:
    return sorted(n for n in os.listdir(inbox_dir(save_file)) if n.startswith(prefix))


SABOTAGE: dict[str, Callable[[str], object]] = {
    "regular-file": lambda removed: pathlib.Path(removed).write_text("not a directory"),
    "dangling-symlink": lambda removed: os.symlink(removed + ".missing", removed),
}


@pytest.mark.parametrize("how", sorted(SABOTAGE))
def test_an_abort_fails_closed_when_the_removed_directory_is_sabotaged(
    save_file: str, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    write_notice(save_file, "a notice stays", name="a.txt")
    write_abort(save_file, "stop")
    SABOTAGE[how](inbox_removed_dir(save_file))
    assert record_problem(save_file) is not None
    with caplog.at_level(logging.ERROR, "scoutd.inbox"), pytest.raises(Aborted) as raised:
        inbox([], CONFIG, save_file=save_file)
    assert raised.value.reason == "stop"
    [record] = hidden(save_file)
    assert pathlib.Path(inbox_dir(save_file), record).read_text() == "stop"
    assert "a.txt" in os.listdir(inbox_dir(save_file))  # a notice is never lost either
    assert any(r.levelno == logging.ERROR and "recorded as" in r.message for r in caplog.records)
    # consumed once: the next call takes nothing, the chat stays aborted until cleared
    with pytest.raises(StillAborted, match="stop"):
        inbox([], CONFIG, save_file=save_file)
    assert len(hidden(save_file)) == 1
    clear(save_file)
    inbox([], CONFIG, save_file=save_file)


def cross_directory_renames_fail(monkeypatch: pytest.MonkeyPatch, *, everywhere: bool) -> None:
    """Every rename across directories (or every rename) fails with EXDEV."""
    real_rename = os.rename

    def rename(src: Any, dst: Any, *, src_dir_fd: Any = None, dst_dir_fd: Any = None) -> None:
        if everywhere or src_dir_fd != dst_dir_fd:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "rename", rename)


def test_an_abort_on_another_file_system_is_recorded_in_the_inbox(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_abort(save_file, "exdev")
    cross_directory_renames_fail(monkeypatch, everywhere=False)
    assert claim_abort(save_file) == "exdev"
    assert len(hidden(save_file)) == 1
    assert not os.path.lexists(os.path.join(inbox_dir(save_file), "abort"))


def test_an_abort_that_cannot_be_moved_at_all_aborts_every_call(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_abort(save_file, "stuck")
    cross_directory_renames_fail(monkeypatch, everywhere=True)
    for _ in range(2):
        with caplog.at_level(logging.ERROR, "scoutd.inbox"), pytest.raises(Aborted) as raised:
            inbox([], CONFIG, save_file=save_file)
        assert raised.value.reason == "stuck"
    assert os.path.isfile(os.path.join(inbox_dir(save_file), "abort"))  # left in place
    assert "aborts every call until an operator removes it" in caplog.text


def require_leases(tmp_path: pathlib.Path) -> None:
    """Skip unless the kernel tells here whether a file is open for writing (read leases)."""
    probe = tmp_path / "lease-probe"
    probe.write_text("x")
    fd = os.open(probe, os.O_RDONLY)
    try:
        if being_written(fd) is None:
            pytest.skip("no read leases on this file system: only the settle rule applies")
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", ["note.txt", "abort"])
def test_a_file_open_for_writing_is_never_taken_and_never_waited_for(
    save_file: str, name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """A writer pausing mid-file far longer than the settle time: nothing is taken half.

    The call returns at once (it used to sleep until the file settled, holding
    a daemon worker): a notice is left for the next call, an abort aborts at
    once unread and stays. Once the writer closes it, it is taken whole at
    once, although it changed a moment ago (the kernel tells nobody writes it).
    """
    require_leases(tmp_path)
    monkeypatch.setattr(inbox_files, "SETTLE_TIME", 0.01)
    monkeypatch.setattr(inbox_files, "MAX_SETTLE_WAIT", 30.0)  # a wait would hang the test
    os.makedirs(inbox_dir(save_file))
    path = os.path.join(inbox_dir(save_file), name)
    handle = open(path, "w")  # noqa: SIM115 - closed below
    try:
        handle.write("first ")
        handle.flush()
        time.sleep(0.05)  # five settle times: the old rule took the file as it was
        if name == "abort":
            with pytest.raises(AbortNotTaken) as raised:  # an Aborted, consuming nothing
                inbox([], CONFIG, save_file=save_file)
            assert raised.value.reason == BEING_WRITTEN
            assert held(save_file) is None  # not consumed, so not marked: it stands for itself
        else:
            out, report = inbox([], CONFIG, save_file=save_file)
            assert out == [] and report.inbox_delivered == 0
        assert os.path.exists(path)  # not consumed
        handle.write("second")
    finally:
        handle.close()
    monkeypatch.setattr(inbox_files, "SETTLE_TIME", 30.0)  # closed: no settle time needed
    if name == "abort":
        with pytest.raises(Aborted) as raised:
            inbox([], CONFIG, save_file=save_file)
        assert raised.value.reason == "first second"
    else:
        out, _ = inbox([], CONFIG, save_file=save_file)
        assert out == [{"role": "user", "content": "first second"}]


def test_a_notice_still_changing_is_left_for_the_next_call(save_file: str) -> None:
    os.makedirs(inbox_dir(save_file))
    path = os.path.join(inbox_dir(save_file), "busy.txt")
    stop = threading.Event()
    handle = open(path, "w")  # noqa: SIM115 - closed by the writer thread
    handle.write("start ")
    handle.flush()

    def keep_writing() -> None:
        with handle:
            for n in range(10_000):  # bounded: about 10 s at most
                if stop.is_set():
                    return
                handle.write(f"{n} ")
                handle.flush()
                time.sleep(0.001)

    thread = threading.Thread(target=keep_writing)
    thread.start()
    try:
        out, report = inbox([], CONFIG, save_file=save_file)
        assert out == [] and report.inbox_delivered == 0
        assert os.path.exists(path)  # not consumed: delivered once complete
    finally:
        stop.set()
        thread.join(timeout=10)
    with open(path) as whole:
        text = whole.read()
    out, _ = inbox([], CONFIG, save_file=save_file)
    assert out == [{"role": "user", "content": text}] and text.startswith("start 0 ")


def unread_reason(kind: str) -> str:
    return f"aborted by operator (the abort entry is {KIND_WORDS[kind]}; not read)"


@pytest.mark.parametrize("kind", KINDS)
def test_an_abort_entry_of_any_type_aborts_unread(
    save_file: str, tmp_path: pathlib.Path, kind: str
) -> None:
    """The agent can make ``abort`` a directory, FIFO, symlink...: it still aborts, unread.

    Both consumers: the inbox strategy (``prepare_prompt``) and ``claim_abort``
    (the daemon's watcher). The entry itself is recorded, never its target.
    """
    abort = os.path.join(inbox_dir(save_file), "abort")
    removed = inbox_removed_dir(save_file)
    os.makedirs(inbox_dir(save_file))
    entry = OddEntry(abort, kind, str(tmp_path / "1"))
    try:
        with pytest.raises(Aborted) as raised:
            inbox([], CONFIG, save_file=save_file)
        assert raised.value.reason == unread_reason(kind)
        entry.assert_moved_to(os.path.join(removed, "abort"))
        entry.assert_untouched()
    finally:
        entry.close()
    second = OddEntry(abort, kind, str(tmp_path / "2"))
    try:
        started = time.monotonic()
        assert claim_abort(save_file, wait=False) == unread_reason(kind)  # nothing to settle
        assert time.monotonic() - started < inbox_files.MAX_SETTLE_WAIT
        second.assert_moved_to(os.path.join(removed, "abort.1"))
        second.assert_untouched()
    finally:
        second.close()


@pytest.mark.parametrize("kind", ["dir", "fifo", "symlink-to-fifo"])
def test_an_odd_abort_that_cannot_be_moved_aborts_unread_in_place(
    save_file: str, tmp_path: pathlib.Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Both sabotages at once: the record goes to a hidden name in the inbox, unread."""
    os.makedirs(inbox_dir(save_file))
    SABOTAGE["regular-file"](inbox_removed_dir(save_file))
    entry = OddEntry(os.path.join(inbox_dir(save_file), "abort"), kind, str(tmp_path))
    try:
        with caplog.at_level(logging.ERROR, "scoutd.inbox"), pytest.raises(Aborted) as raised:
            inbox([], CONFIG, save_file=save_file)
        assert raised.value.reason == unread_reason(kind)
        [record] = hidden(save_file)
        entry.assert_moved_to(os.path.join(inbox_dir(save_file), record))
        entry.assert_untouched()
    finally:
        entry.close()
    assert any(r.levelno == logging.ERROR and "recorded as" in r.message for r in caplog.records)


def test_write_abort_says_when_an_odd_abort_already_waits(save_file: str) -> None:
    """The operator learns that the reason was not written; the odd entry still aborts."""
    abort = os.path.join(inbox_dir(save_file), "abort")
    os.makedirs(abort)
    with pytest.raises(AbortNotWritten) as raised:
        write_abort(save_file, "my reason")
    assert raised.value.kind == "a directory" and raised.value.filename == abort
    assert os.listdir(inbox_dir(save_file)) == ["abort"]  # no temporary file left
    assert claim_abort(save_file) == unread_reason("dir")


def test_a_second_abort_keeps_the_first_reason(save_file: str) -> None:
    """Documented behaviour: an abort already waiting is kept; the later reason is dropped."""
    first = write_abort(save_file, "first")
    assert write_abort(save_file, "second") == first
    assert pathlib.Path(first).read_text() == "first"
    assert claim_abort(save_file) == "first"
    assert write_abort(save_file, "third") == first  # consumed: a new abort is written
    assert claim_abort(save_file) == "third"
