"""The ``inbox`` strategy on real directories: paths, delivery, abort, writers, races."""

from __future__ import annotations

import collections
import errno
import json
import logging
import os
import pathlib
import select
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd import Aborted, PromptConfig, prepare, prepare_prompt
from scoutd.errors import InboxUnusable
from scoutd.inbox.aborted import clear
from scoutd.strategies.inbox import (
    ABORT_NAME,
    claim_abort,
    inbox,
    inbox_dir,
    inbox_removed_dir,
    write_abort,
    write_notice,
)
from scoutd.testing import conversation

CONFIG = PromptConfig()
WORKER = pathlib.Path(__file__).with_name("inbox_worker.py")
NOBODY = 65534


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


@pytest.fixture
def short_dir() -> Iterator[str]:
    """A short directory under /tmp: Unix socket paths must stay under 108 bytes."""
    path = tempfile.mkdtemp(prefix="sd")
    try:
        yield path
    finally:
        shutil.rmtree(path)


def drop(save_file: str, name: str, text: str | bytes) -> str:
    """Put a file straight into the inbox (the tests' stand-in for an operator)."""
    directory = inbox_dir(save_file)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "wb") as stream:
        stream.write(text.encode() if isinstance(text, str) else text)
    return path


def listing(path: str) -> list[str]:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def read(path: str) -> str:
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def contents(messages: list[Any]) -> list[str]:
    return [message["content"] for message in messages]


def run_bounded(fn: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Run ``fn`` in a thread; fail (instead of hanging) if it blocks."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the call blocked"
    if "error" in box:
        raise box["error"]
    return box["result"]


# --- paths -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("save", "inbox_path", "removed_path"),
    [
        ("D/a.b.chat", "D/a.b.inbox", "D/a.b.inbox_removed"),
        ("D/agent", "D/agent.inbox", "D/agent.inbox_removed"),
        ("dir/x.files/agent.chat", "dir/x.files/agent.inbox", "dir/x.files/agent.inbox_removed"),
        ("D/.chat", "D/.chat.inbox", "D/.chat.inbox_removed"),
        ("agent.chat", "agent.inbox", "agent.inbox_removed"),
        ("/abs/a.chat", "/abs/a.inbox", "/abs/a.inbox_removed"),
    ],
)
def test_sibling_paths(save: str, inbox_path: str, removed_path: str) -> None:
    """The inbox is a sibling of the save file, named after its stem."""
    assert inbox_dir(save) == inbox_path
    assert inbox_removed_dir(save) == removed_path
    assert inbox_dir(pathlib.PurePosixPath(save)) == inbox_path
    assert scoutd.inbox_dir(save) == inbox_path


def test_sibling_paths_do_not_resolve_symlinks(tmp_path: pathlib.Path) -> None:
    """The directory part is kept as given, even through a symlinked directory."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    save = str(tmp_path / "link" / "agent.chat")
    assert inbox_dir(save) == str(tmp_path / "link" / "agent.inbox")


def test_save_file_without_a_name_is_an_error_for_paths_but_not_for_the_strategy(
    tmp_path: pathlib.Path,
) -> None:
    with pytest.raises(ValueError):
        inbox_dir(str(tmp_path) + "/")
    messages = [{"role": "user", "content": "hi"}]
    out, report = inbox(messages, CONFIG, save_file=str(tmp_path) + "/")
    assert out == messages
    assert report.inbox_delivered == 0


# --- gating ------------------------------------------------------------------------------


@pytest.mark.parametrize("save", [None, "", "   "])
def test_no_save_file_leaves_messages_untouched(
    save: str | None, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    messages = [{"role": "user", "content": "hi"}]
    out, report = inbox(messages, CONFIG, save_file=save)
    assert out == messages and out is not messages
    assert out[0] is messages[0]
    assert report.inbox_delivered == 0
    assert report.chars_before == report.chars_after == 2
    assert os.listdir(tmp_path) == []


def test_missing_inbox_creates_nothing(save_file: str, tmp_path: pathlib.Path) -> None:
    """Readers never create the inbox, nor the removed directory without a move."""
    out, report = inbox([], CONFIG, save_file=save_file)
    assert out == [] and report.inbox_delivered == 0
    assert os.listdir(tmp_path) == []


def test_removed_dir_is_created_only_at_the_first_move(save_file: str) -> None:
    os.makedirs(inbox_dir(save_file))
    drop(save_file, ".hidden", "x")
    os.mkdir(os.path.join(inbox_dir(save_file), "sub"))
    inbox([], CONFIG, save_file=save_file)
    assert not os.path.exists(inbox_removed_dir(save_file))
    drop(save_file, "note.txt", "hello")
    out, _ = inbox([], CONFIG, save_file=save_file)
    assert contents(out) == ["hello"]
    assert listing(inbox_removed_dir(save_file)) == ["note.txt"]


# --- delivery ----------------------------------------------------------------------------


def test_delivers_in_name_order_and_moves_every_file(save_file: str) -> None:
    for name, text in [("b.txt", "second"), ("c", "third"), ("a.txt", "first")]:
        drop(save_file, name, text)
    messages = [{"role": "user", "content": "go"}]
    out, report = inbox(messages, CONFIG, save_file=save_file)
    assert out == [
        {"role": "user", "content": "go"},
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
        {"role": "user", "content": "third"},
    ]
    assert report.strategy == "inbox"
    assert report.inbox_delivered == 3
    assert (report.chars_before, report.chars_after) == (2, 2 + 5 + 6 + 5)
    assert listing(inbox_dir(save_file)) == []
    removed = inbox_removed_dir(save_file)
    assert listing(removed) == ["a.txt", "b.txt", "c"]
    assert read(os.path.join(removed, "b.txt")) == "second"
    again, report = inbox(messages, CONFIG, save_file=save_file)
    assert again == messages and report.inbox_delivered == 0


def test_input_list_and_messages_are_not_mutated(save_file: str) -> None:
    message = {"role": "user", "content": "hi", "extra": [1]}
    messages = [message]
    drop(save_file, "n", "notice")
    out, _ = inbox(messages, CONFIG, save_file=save_file)
    assert messages == [{"role": "user", "content": "hi", "extra": [1]}]
    assert len(messages) == 1 and out[0] is message and len(out) == 2


def test_only_regular_files_are_delivered(short_dir: str) -> None:
    """Dotfiles, directories, symlinks, FIFOs and sockets stay; nothing blocks."""
    save = os.path.join(short_dir, "a.chat")
    directory = inbox_dir(save)
    secret = os.path.join(short_dir, "secret")
    with open(secret, "w") as stream:
        stream.write("SECRET")
    drop(save, "regular", "visible")
    drop(save, ".hidden", "hidden")
    os.mkdir(os.path.join(directory, "subdir"))
    os.symlink(secret, os.path.join(directory, "link"))
    os.mkfifo(os.path.join(directory, "fifo"))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(os.path.join(directory, "sock"))
        out, report = run_bounded(lambda: inbox([], CONFIG, save_file=save))
    finally:
        server.close()
    assert contents(out) == ["visible"]
    assert report.inbox_delivered == 1
    assert "SECRET" not in json.dumps(out)
    assert listing(directory) == [".hidden", "fifo", "link", "sock", "subdir"]
    assert os.path.islink(os.path.join(directory, "link"))
    assert listing(inbox_removed_dir(save)) == ["regular"]
    assert read(secret) == "SECRET"


_UNPRIVILEGED_CODE = """
import json, sys
from scoutd.config import PromptConfig
from scoutd.strategies.inbox import inbox
out, report = inbox([], PromptConfig(), save_file=sys.argv[1])
print(json.dumps([m["content"] for m in out]))
"""


def test_unreadable_file_is_left_in_place(short_dir: str, caplog: pytest.LogCaptureFixture) -> None:
    """Moving an unreadable file would take it out of reach without delivering it."""
    save = os.path.join(short_dir, "agent.chat")
    for name in ("a.txt", "b.txt", "c.txt"):
        drop(save, name, name.upper())
    unreadable = os.path.join(inbox_dir(save), "b.txt")
    os.chmod(unreadable, 0)
    if os.geteuid() == 0:
        # root reads through mode 000: run the strategy as an unprivileged user who
        # owns the tree (so it may move files) but cannot read the mode-000 file.
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop privileges")
        for root, dirs, files in os.walk(short_dir):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.chown(name, NOBODY, NOBODY)
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        result = subprocess.run(
            [*command, sys.executable, "-c", _UNPRIVILEGED_CODE, save],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=short_dir,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        delivered = json.loads(result.stdout)
        log_text = result.stderr
    else:
        with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
            out, _ = inbox([], CONFIG, save_file=save)
        delivered = contents(out)
        log_text = caplog.text
    assert delivered == ["A.TXT", "C.TXT"]
    assert listing(inbox_dir(save)) == ["b.txt"]
    assert listing(inbox_removed_dir(save)) == ["a.txt", "c.txt"]
    assert "b.txt" in log_text


def test_collisions_never_overwrite_earlier_records(save_file: str) -> None:
    removed = inbox_removed_dir(save_file)
    os.makedirs(removed)
    for name in ("note.txt", ABORT_NAME, "a.b.txt"):
        with open(os.path.join(removed, name), "w") as stream:
            stream.write("old " + name)
    drop(save_file, "note.txt", "new note")
    drop(save_file, "a.b.txt", "new a.b")
    out, _ = inbox([], CONFIG, save_file=save_file)
    assert contents(out) == ["new a.b", "new note"]
    drop(save_file, "note.txt", "newer note")
    assert contents(inbox([], CONFIG, save_file=save_file)[0]) == ["newer note"]
    drop(save_file, ABORT_NAME, "")
    with pytest.raises(Aborted) as caught:
        inbox([], CONFIG, save_file=save_file)
    assert caught.value.reason == (
        f"aborted by operator (abort file {os.path.join(removed, 'abort.1')})"
    )
    assert listing(removed) == [
        "a.b.1.txt", "a.b.txt", "abort", "abort.1", "note.1.txt", "note.2.txt", "note.txt",
    ]  # fmt: skip
    assert read(os.path.join(removed, "note.txt")) == "old note.txt"
    assert read(os.path.join(removed, ABORT_NAME)) == "old abort"
    assert read(os.path.join(removed, "note.1.txt")) == "new note"
    assert read(os.path.join(removed, "note.2.txt")) == "newer note"


def test_move_keeps_the_mtime(save_file: str) -> None:
    path = drop(save_file, "old.txt", "from last year")
    old = 1_600_000_000_123_456_789
    os.utime(path, ns=(old, old))
    inbox([], CONFIG, save_file=save_file)
    record = os.path.join(inbox_removed_dir(save_file), "old.txt")
    assert os.stat(record).st_mtime_ns == old


def test_truncates_large_notices_visibly(save_file: str) -> None:
    config = PromptConfig(inbox_max_bytes=10)
    drop(save_file, "a", "0123456789ABCDEFGHIJKLMNO")
    drop(save_file, "b", "é" * 8)  # 16 bytes; the 10-byte cut falls between characters
    drop(save_file, "c", "0123456789")  # exactly at the limit: whole
    drop(save_file, "d", b"ok\xff\xfe")
    out, _ = inbox([], config, save_file=save_file)
    assert contents(out) == [
        "0123456789\n[scoutd: notice truncated at 10 of 25 bytes]",
        "ééééé\n[scoutd: notice truncated at 10 of 16 bytes]",
        "0123456789",
        "ok\ufffd\ufffd",
    ]
    assert read(os.path.join(inbox_removed_dir(save_file), "a")) == "0123456789ABCDEFGHIJKLMNO"
    config = PromptConfig(inbox_max_bytes=9)
    drop(save_file, "e", "é" * 8)
    assert contents(inbox([], config, save_file=save_file)[0]) == [
        "éééé\n[scoutd: notice truncated at 9 of 16 bytes]"
    ]


# --- abort -------------------------------------------------------------------------------


def test_abort_raises_with_the_stripped_reason_and_leaves_every_notice(save_file: str) -> None:
    """An abort is taken alone: notices sorted before or after it stay for the first run
    after an operator cleared the abort (the chat stays aborted until then)."""
    for name, text in [("a.txt", "before"), (ABORT_NAME, "  stop now, please \n"), ("b", "after")]:
        drop(save_file, name, text)
    with pytest.raises(Aborted) as caught:
        inbox([{"role": "user", "content": "x"}], CONFIG, save_file=save_file)
    assert caught.value.reason == "stop now, please"
    assert listing(inbox_dir(save_file)) == ["a.txt", "b"]
    assert listing(inbox_removed_dir(save_file)) == ["abort"]
    with pytest.raises(Aborted, match="stop now, please"):
        inbox([], CONFIG, save_file=save_file)
    assert listing(inbox_dir(save_file)) == ["a.txt", "b"]
    clear(save_file)
    out, report = inbox([], CONFIG, save_file=save_file)
    assert contents(out) == ["before", "after"] and report.inbox_delivered == 2


def test_blank_abort_reason_names_the_consumed_file(save_file: str) -> None:
    drop(save_file, ABORT_NAME, " \n\t")
    with pytest.raises(Aborted) as caught:
        inbox([], CONFIG, save_file=save_file)
    record = os.path.join(inbox_removed_dir(save_file), ABORT_NAME)
    assert caught.value.reason == f"aborted by operator (abort file {record})"
    assert os.path.isfile(record)


def test_only_the_exact_name_abort_is_reserved(save_file: str) -> None:
    for name in ("Abort", "abort.txt", "do-not-abort", "abort.1"):
        drop(save_file, name, name)
    out, report = inbox([], CONFIG, save_file=save_file)
    assert contents(out) == ["Abort", "abort.1", "abort.txt", "do-not-abort"]
    assert report.inbox_delivered == 4


def test_claim_abort(save_file: str) -> None:
    """Consumes only ``abort``, exactly once; None without one."""
    assert claim_abort(save_file) is None
    assert not os.path.exists(inbox_dir(save_file))
    drop(save_file, "note", "stays")
    assert claim_abort(save_file) is None
    assert not os.path.exists(inbox_removed_dir(save_file))
    drop(save_file, ABORT_NAME, "\nenough\n")
    assert claim_abort(save_file) == "enough"
    assert claim_abort(save_file) is None
    assert listing(inbox_dir(save_file)) == ["note"]
    assert listing(inbox_removed_dir(save_file)) == ["abort"]
    drop(save_file, ABORT_NAME, "")
    record = os.path.join(inbox_removed_dir(save_file), "abort.1")
    assert claim_abort(save_file) == f"aborted by operator (abort file {record})"
    assert claim_abort("") is None


def race(parties: int, fn: Callable[[], Any]) -> list[Any]:
    """Call ``fn`` from ``parties`` threads released together; return their results."""
    barrier = threading.Barrier(parties, timeout=10)
    results: list[Any] = []
    lock = threading.Lock()

    def party() -> None:
        barrier.wait()
        result = fn()
        with lock:
            results.append(result)

    threads = [threading.Thread(target=party) for _ in range(parties)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert len(results) == parties
    return results


def test_claim_abort_races_have_one_winner(save_file: str) -> None:
    """Eight threads claiming one abort file: exactly one gets the reason, each round."""
    rounds, parties = 40, 8
    for round_number in range(rounds):
        drop(save_file, ABORT_NAME, f"round {round_number}")
        results = race(parties, lambda: claim_abort(save_file))
        assert sorted(results, key=str) == [*[None] * (parties - 1), f"round {round_number}"]
    assert len(listing(inbox_removed_dir(save_file))) == rounds


# --- failure points ------------------------------------------------------------------------


def test_entry_swapped_for_a_fifo_after_the_check_is_put_back(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO that replaces a file between the check and the claim is returned unopened."""
    source = drop(save_file, "note", "text")
    real_rename = os.rename

    def swap_then_rename(src: str, dst: str, **dir_fds: Any) -> None:
        if os.path.join(inbox_dir(save_file), src) == source:
            os.unlink(source)
            os.mkfifo(source)
        real_rename(src, dst, **dir_fds)

    monkeypatch.setattr(os, "rename", swap_then_rename)
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        out, _ = run_bounded(lambda: inbox([], CONFIG, save_file=save_file))
    assert out == []
    assert stat.S_ISFIFO(os.lstat(source).st_mode)
    assert listing(inbox_removed_dir(save_file)) == []
    assert "not delivered" in caplog.text


def test_read_error_after_the_claim_puts_the_file_back(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop(save_file, "note", "text")

    def failing_read(fd: int, size: int) -> bytes:
        raise OSError(errno.EIO, "I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "read", failing_read)
        out, report = inbox([], CONFIG, save_file=save_file)
    assert out == [] and report.inbox_delivered == 0
    assert listing(inbox_dir(save_file)) == ["note"]
    assert listing(inbox_removed_dir(save_file)) == []
    assert contents(inbox([], CONFIG, save_file=save_file)[0]) == ["text"]


class Crash(BaseException):
    """Stands for the process dying at an injected point."""


def test_crash_between_claim_and_record_never_delivers_twice(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At-most-once: a notice claimed by a consumer that died is not delivered again."""
    drop(save_file, "note", "text")

    def crash(*args: Any, **kwargs: Any) -> None:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(os, "link", crash)
        with pytest.raises(Crash):
            inbox([], CONFIG, save_file=save_file)
    out, _ = inbox([], CONFIG, save_file=save_file)
    assert out == []
    assert listing(inbox_dir(save_file)) == []
    [leftover] = listing(inbox_removed_dir(save_file))
    assert leftover.startswith(".claim-")


def test_record_failure_still_delivers_and_keeps_the_claim(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    drop(save_file, "note", "text")

    def failing_link(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "I/O error")

    with monkeypatch.context() as patch, caplog.at_level(logging.WARNING, "scoutd.inbox"):
        patch.setattr(os, "link", failing_link)
        out, _ = inbox([], CONFIG, save_file=save_file)
    assert contents(out) == ["text"]
    [record] = listing(inbox_removed_dir(save_file))
    assert record.startswith(".claim-")
    assert "recorded as" in caplog.text


def test_without_hard_links_records_still_do_not_overwrite(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    for text in ("one", "two", "three"):
        drop(save_file, "note.txt", text)
        assert contents(inbox([], CONFIG, save_file=save_file)[0]) == [text]
    removed = inbox_removed_dir(save_file)
    assert listing(removed) == ["note.1.txt", "note.2.txt", "note.txt"]
    assert read(os.path.join(removed, "note.txt")) == "one"
    assert read(os.path.join(removed, "note.2.txt")) == "three"
    path = write_notice(save_file, "w", name="note.txt")
    assert path.endswith("note.txt")
    assert write_abort(save_file, "first") == write_abort(save_file, "second")
    assert read(os.path.join(inbox_dir(save_file), ABORT_NAME)) == "first"


def test_an_inbox_that_is_a_file_fails_closed(
    save_file: str, caplog: pytest.LogCaptureFixture
) -> None:
    """It may stand for an abort nobody can see: the chat is not served (it used to be)."""
    with open(inbox_dir(save_file), "w") as stream:  # a file where the directory belongs
        stream.write("x")
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        with pytest.raises(InboxUnusable) as raised:
            inbox([], CONFIG, save_file=save_file)
        with pytest.raises(InboxUnusable):
            claim_abort(save_file)
    assert isinstance(raised.value, Aborted)
    assert "is not a directory but a regular file" in raised.value.reason
    assert "cannot be used" in caplog.text
    with open(inbox_dir(save_file)) as stream:
        assert stream.read() == "x"  # untouched


def test_unusable_removed_dir_leaves_files_in_place(
    save_file: str, caplog: pytest.LogCaptureFixture
) -> None:
    drop(save_file, "note", "text")
    with open(inbox_removed_dir(save_file), "w") as stream:
        stream.write("not a directory")
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        out, _ = inbox([], CONFIG, save_file=save_file)
        assert claim_abort(save_file) is None
    assert out == []
    assert listing(inbox_dir(save_file)) == ["note"]
    assert "left in place" in caplog.text


# --- writers -----------------------------------------------------------------------------


def test_write_notice_creates_the_inbox_and_sorts_in_drop_order(save_file: str) -> None:
    paths = [write_notice(save_file, f"notice {i}") for i in range(5)]
    assert [os.path.dirname(p) for p in paths] == [inbox_dir(save_file)] * 5
    assert listing(inbox_dir(save_file)) == sorted(os.path.basename(p) for p in paths)
    assert [os.path.basename(p) for p in paths] == sorted(os.path.basename(p) for p in paths)
    out, _ = inbox([], CONFIG, save_file=save_file)
    assert contents(out) == [f"notice {i}" for i in range(5)]


def test_write_notice_never_overwrites(save_file: str) -> None:
    first = write_notice(save_file, "one", name="note.txt")
    second = write_notice(save_file, "two", name="note.txt")
    assert os.path.basename(first) == "note.txt"
    assert os.path.basename(second) == "note~00001.txt"
    assert read(first) == "one" and read(second) == "two"
    for bad in ("", ".hidden", "a/b", ABORT_NAME, "nul\0"):
        with pytest.raises(ValueError):
            write_notice(save_file, "x", name=bad)


def test_writers_expose_no_partial_file(save_file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the text is being written, the inbox holds only a dotfile readers ignore."""
    seen: list[tuple[list[str], list[Any]]] = []
    real_fsync = os.fsync

    def observe(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode) and not seen:
            seen.append((listing(inbox_dir(save_file)), inbox([], CONFIG, save_file=save_file)[0]))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", observe)
    path = write_notice(save_file, "complete text")
    [(names, delivered)] = seen
    assert len(names) == 1 and names[0].startswith(".")
    assert delivered == []
    assert listing(inbox_dir(save_file)) == [os.path.basename(path)]
    assert read(path) == "complete text"


def test_write_abort_keeps_a_waiting_abort(save_file: str) -> None:
    path = write_abort(save_file, "first reason")
    assert path == os.path.join(inbox_dir(save_file), ABORT_NAME)
    assert write_abort(save_file, "second reason") == path
    assert read(path) == "first reason"
    assert listing(inbox_dir(save_file)) == [ABORT_NAME]
    assert claim_abort(save_file) == "first reason"
    write_abort(save_file)
    with pytest.raises(Aborted, match="aborted by operator"):
        inbox([], CONFIG, save_file=save_file)


# --- dispatcher --------------------------------------------------------------------------


def test_prepare_prompt_delivers_through_the_dispatcher(save_file: str) -> None:
    drop(save_file, "note", "from the operator")
    messages = [{"role": "user", "content": "hi"}]
    out = prepare_prompt(messages, "inbox", save_file=save_file, config=CONFIG)
    assert out == [*messages, {"role": "user", "content": "from the operator"}]
    assert prepare_prompt(messages, "inbox", save_file=save_file, config=CONFIG) == messages
    drop(save_file, ABORT_NAME, "halt")
    with pytest.raises(Aborted, match="halt"):
        prepare_prompt(messages, ["inbox"], save_file=save_file, config=CONFIG)


def test_inbox_composes_after_compaction(save_file: str) -> None:
    messages = conversation(60)
    compacted = prepare_prompt(messages, "shorten_tools_epoch_increment", config=CONFIG)
    assert compacted != messages  # the conversation is long enough to compact
    drop(save_file, "note", "notice")
    prepared = prepare(
        messages, "shorten_tools_epoch_increment,inbox", save_file=save_file, config=CONFIG
    )
    assert prepared.messages == [*compacted, {"role": "user", "content": "notice"}]
    assert [r.strategy for r in prepared.report] == ["shorten_tools_epoch_increment", "inbox"]
    assert prepared.report[0].notice
    assert prepared.report[1].inbox_delivered == 1


# --- at most once ------------------------------------------------------------------------


def test_eight_processes_deliver_each_notice_exactly_once(short_dir: str) -> None:
    """Racing consumers: every notice delivered once in total, every record kept."""
    save = os.path.join(short_dir, "agent.chat")
    total, workers = 1000, 8
    for i in range(total):
        drop(save, f"n{i:04d}.txt", f"notice {i}")
    outputs = [os.path.join(short_dir, f"out{w}.json") for w in range(workers)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), save, output],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for output in outputs
    ]
    try:
        deadline = time.monotonic() + 60
        for proc in procs:  # the barrier: all imported and waiting before any starts
            assert proc.stdout is not None and proc.stdin is not None
            ready, _, _ = select.select([proc.stdout], [], [], max(0, deadline - time.monotonic()))
            assert ready, "worker did not start in time"
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.wait(timeout=max(1, deadline + 60 - time.monotonic())) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
    delivered: list[str] = []
    for output in outputs:
        with open(output, encoding="utf-8") as stream:
            delivered.extend(json.load(stream))
    counts = collections.Counter(delivered)
    assert len(delivered) == total
    assert counts == collections.Counter(f"notice {i}" for i in range(total))
    assert listing(inbox_dir(save)) == []
    assert listing(inbox_removed_dir(save)) == [f"n{i:04d}.txt" for i in range(total)]


names = st.sampled_from(["note.txt", "note.1.txt", "a", "a.1", "a.b.c", "z", "abort.1"]) | (
    st.text(alphabet="ab.1", min_size=1, max_size=6).filter(
        lambda n: not n.startswith(".") and n != ABORT_NAME
    )
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    pending=st.lists(names, unique=True, max_size=12),
    recorded=st.lists(names, unique=True, max_size=12),
    consumers=st.integers(min_value=1, max_value=4),
)
def test_each_file_is_delivered_at_most_once(
    pending: list[str], recorded: list[str], consumers: int
) -> None:
    """Whatever the names and earlier records, concurrent pickups deliver each file once."""
    with tempfile.TemporaryDirectory(prefix="sd") as base:
        save = os.path.join(base, "agent.chat")
        removed = inbox_removed_dir(save)
        os.makedirs(removed)
        for name in recorded:
            with open(os.path.join(removed, name), "w") as stream:
                stream.write(f"record {name}")
        for name in pending:
            drop(save, name, f"pending {name}")

        def consume() -> list[str]:
            texts: list[str] = []
            for _ in range(3):
                texts.extend(contents(inbox([], CONFIG, save_file=save)[0]))
            return texts

        results = race(consumers, consume)
        delivered = [text for result in results for text in result]
        assert sorted(delivered) == sorted(f"pending {name}" for name in pending)
        assert listing(inbox_dir(save)) == []
        records = listing(removed)
        assert len(records) == len(pending) + len(recorded)
        for name in recorded:  # earlier records untouched
            assert read(os.path.join(removed, name)) == f"record {name}"
        record_texts = sorted(read(os.path.join(removed, name)) for name in records)
        expected = [f"record {n}" for n in recorded] + [f"pending {n}" for n in pending]
        assert record_texts == sorted(expected)


def test_written_notices_and_aborts_are_complete_to_a_scan_at_once(tmp_path: pathlib.Path) -> None:
    # Found by a scan before any event (an inbox created that instant), a file
    # renamed in within the same timestamp tick as its last write would wait one
    # settle time; scoutd's writers date theirs back so that it never does.
    from scoutd.strategies.inbox_files import SETTLE_TIME, settled

    save_file = str(tmp_path / "a.chat")
    for path in (write_notice(save_file, "hello"), write_abort(save_file, "stop")):
        st = os.stat(path)
        assert time.time() - st.st_mtime >= SETTLE_TIME
        assert settled(st)
