"""An aborted chat stays aborted: the durable marker a consumed abort leaves (docs/RELIABILITY.md).

Real files in a real inbox; the library's own entry points (the ``inbox``
strategy, ``scoutd.prepare``, ``scoutd.Session``) and another process
(``scoutd prepare``) all see the same marker, until an operator clears it.
"""

from __future__ import annotations

import logging
import os
import pathlib
import stat
import subprocess
import sys
from typing import Any

import pytest

import scoutd
from scoutd import Aborted, PromptConfig
from scoutd.inbox import aborted, inbox_dir, inbox_removed_dir, write_abort, write_notice
from scoutd.inbox.aborted import MARKER, check, claim_and_mark, clear, held, mark, marker_paths
from scoutd.strategies.inbox import inbox
from tests.support.odd_entries import KINDS, SECRET, OddEntry
from tests.support.umask import umask

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = PromptConfig()
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


def beside(save_file: str) -> str:
    return marker_paths(save_file)[0]


def aborts_with(save_file: str) -> str:
    """The reason the ``inbox`` strategy aborts with (it must abort)."""
    with pytest.raises(Aborted) as raised:
        inbox(HELLO, CONFIG, save_file=save_file)
    return raised.value.reason


def test_a_consumed_abort_aborts_every_later_call_until_cleared(save_file: str) -> None:
    write_abort(save_file, "budget exhausted")
    assert aborts_with(save_file) == "budget exhausted"  # consumed now
    assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]
    assert beside(save_file) == os.path.join(os.path.dirname(save_file), "agent.inbox_aborted")
    with open(beside(save_file), encoding="utf-8") as handle:
        assert handle.read() == "budget exhausted"
    write_notice(save_file, "carry on", name="note.txt")
    for _ in range(3):  # the abort was consumed, the chat stays aborted
        assert aborts_with(save_file) == "budget exhausted"
    with pytest.raises(Aborted, match="budget exhausted"):
        scoutd.prepare(HELLO, save_file=save_file)
    with scoutd.Session(save_file) as session, pytest.raises(Aborted, match="budget exhausted"):
        session.prepare_prompt(HELLO)
    assert os.listdir(inbox_dir(save_file)) == ["note.txt"]  # nothing delivered meanwhile
    cleared = clear(save_file)
    assert cleared.removed == [beside(save_file)] and cleared.failed == [] and cleared.still is None
    out, report = inbox(HELLO, CONFIG, save_file=save_file)
    assert out[-1] == {"role": "user", "content": "carry on"} and report.inbox_delivered == 1


def test_another_process_sees_the_abort_after_this_one_consumed_it(save_file: str) -> None:
    write_abort(save_file, "stop the deploy")
    assert aborts_with(save_file) == "stop the deploy"
    messages = os.path.join(os.path.dirname(save_file), "messages.json")
    with open(messages, "w", encoding="utf-8") as handle:
        handle.write('[{"role": "user", "content": "hello"}]')
    command = [sys.executable, "-m", "scoutd", "prepare", "--local", messages]
    command += ["--save-file", save_file]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 3, done.stderr  # aborted
    assert "stop the deploy" in done.stderr


def test_the_first_reason_stays_and_a_later_abort_waits(save_file: str) -> None:
    write_abort(save_file, "first")
    assert aborts_with(save_file) == "first"
    write_abort(save_file, "second")
    assert aborts_with(save_file) == "first"  # the marker answers before any pickup
    abort = os.path.join(inbox_dir(save_file), "abort")
    assert os.path.isfile(abort)  # left for the watcher, or for clear
    assert claim_and_mark(save_file) == "second"
    assert held(save_file) == "first"
    assert mark(save_file, "third") == beside(save_file)
    assert held(save_file) == "first"


def test_a_blank_reason_names_the_marker(save_file: str) -> None:
    assert mark(save_file, "  \n") == beside(save_file)
    assert held(save_file) == f"aborted by operator (abort marker {beside(save_file)})"


def test_check_is_the_marker_else_a_waiting_abort(save_file: str) -> None:
    assert check(None) is None
    assert check(save_file) is None
    assert not os.path.exists(inbox_dir(save_file))  # nothing created
    write_abort(save_file, "now")
    assert check(save_file) == "now"  # consumed and marked
    assert not os.path.lexists(os.path.join(inbox_dir(save_file), "abort"))
    assert held(save_file) == "now"
    assert check(save_file) == "now"


@pytest.mark.parametrize("consumer", ["pickup", "claim"])
def test_an_operator_clear_during_the_take_stands(
    save_file: str, consumer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chat is marked before its abort moves, and never again after: an operator who
    clears it between the move and the end of the take is not overruled."""
    write_abort(save_file, "stop the run")
    rename = os.rename

    def then_cleared(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        rename(src, dst, *args, **kwargs)
        if src == "abort":  # the abort has left the inbox: the operator clears now
            assert held(save_file) == "stop the run"
            clear(save_file)

    monkeypatch.setattr(os, "rename", then_cleared)
    if consumer == "pickup":
        assert aborts_with(save_file) == "stop the run"
    else:
        assert claim_and_mark(save_file) == "stop the run"
    assert held(save_file) is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_marker_of_any_kind_aborts_unread(save_file: str, kind: str, tmp_path: Any) -> None:
    entry = OddEntry(beside(save_file), kind, str(tmp_path / "scratch"))
    try:
        reason = held(save_file)
        assert reason == (
            f"aborted by operator (the abort marker {beside(save_file)} is {entry.words}; not read)"
        )
        entry.assert_untouched()
        if entry.witness is not None:
            entry.witness.release()  # while the FIFO still has a name
        cleared = clear(save_file)  # removed, never followed
        if kind == "dir":  # not empty: it stays, and says so
            assert cleared.removed == [] and cleared.still == reason
            assert [path for path, _ in cleared.failed] == [beside(save_file)]
        else:
            assert cleared.removed == [beside(save_file)] and cleared.still is None
        with open(entry.secret) as handle:
            assert handle.read() == SECRET  # a symlink's target is untouched
        assert entry.target == "" or os.path.lexists(entry.target)
    finally:
        if entry.witness is not None and not entry.witness.opened.is_set():
            entry.witness.release()
        if entry.listener is not None:
            entry.listener.close()


def test_the_marker_goes_into_the_inbox_when_the_chat_directory_refuses_it(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_write = aborted._write

    def refusing(path: str, reason: str, *, inbox: bool, exact: bool) -> str:
        if path == beside(save_file):
            raise PermissionError(13, "Permission denied", path)
        return write_write(path, reason, inbox=inbox, exact=exact)

    monkeypatch.setattr(aborted, "_write", refusing)
    write_abort(save_file, "inside")
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        assert aborts_with(save_file) == "inside"
    in_inbox = os.path.join(inbox_dir(save_file), MARKER)
    assert marker_paths(save_file)[1] == in_inbox
    assert os.path.isfile(in_inbox) and not os.path.lexists(beside(save_file))
    assert "abort marker written to" in caplog.text
    write_notice(save_file, "later", name="later.txt")
    assert aborts_with(save_file) == "inside"  # the dotfile is never delivered either
    assert clear(save_file).removed == [in_inbox]
    out, _ = inbox([], CONFIG, save_file=save_file)
    assert out == [{"role": "user", "content": "later"}]


def test_a_marker_that_cannot_be_written_is_logged(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refusing(path: str, reason: str, *, inbox: bool, exact: bool) -> str:
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(aborted, "_write", refusing)
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        assert mark(save_file, "lost") is None
    assert "no abort marker could be written" in caplog.text
    assert held(save_file) is None


def test_a_symlinked_inbox_is_not_followed_for_its_marker(save_file: str, tmp_path: Any) -> None:
    """A marker seen through a symlink in the inbox's place aborts, unread (fails closed)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / MARKER).write_text("from outside")
    os.symlink(elsewhere, inbox_dir(save_file))
    in_inbox = marker_paths(save_file)[1]
    assert held(save_file) == (
        f"aborted by operator (the abort marker {in_inbox} cannot be read:"
        " is a symbolic link, not followed)"
    )


def test_clear_takes_a_waiting_abort_and_both_markers(save_file: str) -> None:
    assert clear(save_file) == aborted.Cleared([], [], None)  # nothing to do, nothing made
    assert not os.path.exists(inbox_dir(save_file))
    write_abort(save_file, "waiting")
    mark(save_file, "beside")
    in_inbox = os.path.join(inbox_dir(save_file), MARKER)
    with open(in_inbox, "w") as handle:
        handle.write("inside")
    cleared = clear(save_file)
    abort = os.path.join(inbox_dir(save_file), "abort")
    assert cleared.removed == [abort, beside(save_file), in_inbox]
    assert cleared.failed == [] and cleared.still is None
    assert os.listdir(inbox_dir(save_file)) == []
    assert inbox(HELLO, CONFIG, save_file=save_file)[0] == HELLO


@pytest.mark.parametrize(("mask", "mode"), [(0o027, 0o640), (0, 0o666)])
def test_the_marker_is_written_with_the_umask(save_file: str, mask: int, mode: int) -> None:
    with umask(mask):
        path = mark(save_file, "x")
    assert path is not None
    assert stat.S_IMODE(os.stat(path).st_mode) == mode


@pytest.mark.parametrize("consumer", ["pickup", "claim"])
def test_the_chat_is_marked_before_its_abort_leaves_the_inbox(
    save_file: str, consumer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At every moment the abort's entry or the chat's marker exists: a hook that looks
    while the daemon claims the abort (between the move and the record) still aborts."""
    write_abort(save_file, "stop the run")
    entry = os.path.join(inbox_dir(save_file), "abort")
    seen: list[tuple[bool, str | None]] = []
    rename = os.rename

    def watched(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if src == "abort":  # the claim moves the entry: what a hook sees right then
            seen.append((os.path.lexists(entry), held(save_file)))
        rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", watched)
    if consumer == "pickup":
        assert aborts_with(save_file) == "stop the run"
    else:
        assert claim_and_mark(save_file) == "stop the run"
    assert seen == [(True, "stop the run")]
    assert not os.path.lexists(entry)
    assert held(save_file) == "stop the run"
