"""One pickup of an inbox, case by case: what mutation testing of ``scoutd/inbox/pickup.py``
showed no test read (docs/TESTING.md, "The twelfth round").

Real files in real inboxes. A fault the kernel gives only to another user or a
failing disk (an entry that cannot be examined, a listing that fails) is
injected at the one call that meets it.
"""

from __future__ import annotations

import errno
import logging
import os
import pathlib
from typing import Any

import pytest

from scoutd.errors import AbortNotTaken, InboxUnusable
from scoutd.inbox import claim as claim_module
from scoutd.inbox import inbox_dir, inbox_removed_dir, pickup, write_abort, write_notice
from scoutd.inbox.files import InboxDirs
from scoutd.inbox.pickup import claim_abort, open_inbox, pending_names, pick_up, unusable

BIG = 1 << 20


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


@pytest.fixture
def linked(tmp_path: pathlib.Path) -> tuple[str, str]:
    """``(save file through the caller's own symlink, the same save file resolved)``."""
    real = tmp_path / "data"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    return str(tmp_path / "link" / "agent.chat"), str(real / "agent.chat")


def take_all(save_file: str, **kwargs: Any) -> pickup.Pickup:
    return pick_up(save_file, max_bytes=BIG, max_total_bytes=BIG, **kwargs)


# --- exact: the library follows the caller's links, the daemon none ----------------------


def test_the_library_picks_up_through_its_own_link_and_the_daemon_does_not(
    linked: tuple[str, str],
) -> None:
    given, resolved = linked
    write_notice(resolved, "hello", name="a.txt")
    with pytest.raises(InboxUnusable):
        take_all(given, exact=True)
    with pytest.raises(InboxUnusable):
        open_inbox(given, exact=True)
    assert take_all(given).notices == ["hello"]  # the default: the caller's own link followed


def test_a_claim_follows_the_callers_link_unless_exact(linked: tuple[str, str]) -> None:
    given, resolved = linked
    write_abort(resolved, "stop")
    with pytest.raises(InboxUnusable):
        claim_abort(given, exact=True)
    assert claim_abort(given) == "stop"


def test_open_inbox_follows_the_callers_link_by_default(linked: tuple[str, str]) -> None:
    given, resolved = linked
    os.mkdir(inbox_dir(resolved))
    dirs = open_inbox(given)
    assert dirs is not None
    dirs.close()


def test_a_save_file_without_a_name_has_no_inbox(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="scoutd.inbox"):
        assert open_inbox(f"{tmp_path}/") is None
    assert caplog.messages == [f"no inbox: save file '{tmp_path}/' has no file name"]


# --- the order and the budget -------------------------------------------------------------


def test_notices_are_taken_in_the_byte_order_of_their_names(save_file: str) -> None:
    """U+E000 is three bytes from 0xEE, a name's byte 0xFF (no UTF-8) is one: by bytes
    the first comes first, by code points (U+DCFF) the second."""
    os.mkdir(inbox_dir(save_file))
    fd = os.open(inbox_dir(save_file), os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name, text in ((b"\xff", b"second"), ("\ue000".encode(), b"first")):
            file = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(file, text)
            os.close(file)
    finally:
        os.close(fd)
    dirs = InboxDirs.of(save_file)
    assert dirs is not None
    try:
        assert pending_names(dirs) == ["\ue000", os.fsdecode(b"\xff")]
    finally:
        dirs.close()
    assert take_all(save_file).notices == ["first", "second"]


def test_a_notice_is_taken_while_one_byte_of_the_budget_is_left(save_file: str) -> None:
    write_notice(save_file, "abc", name="1.txt")
    write_notice(save_file, "de", name="2.txt")
    taken = pick_up(save_file, max_bytes=BIG, max_total_bytes=4)
    assert taken.notices == ["abc", "d\n[scoutd: notice truncated at 1 of 2 bytes]"]


def test_a_notice_that_cannot_be_taken_leaves_the_rest_to_be_taken(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("1.txt", "2.txt", "3.txt"):
        write_notice(save_file, f"notice {name}", name=name)
    take = claim_module.take

    def failing_on_the_first(dirs: InboxDirs, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "1.txt":
            raise OSError(errno.EIO, "Input/output error")
        return take(dirs, name, *args, **kwargs)

    monkeypatch.setattr(pickup, "take", failing_on_the_first)
    with caplog.at_level(logging.INFO, logger="scoutd.inbox"):
        assert take_all(save_file).notices == ["notice 2.txt", "notice 3.txt"]
    inbox = inbox_dir(save_file)
    assert os.listdir(inbox) == ["1.txt"]
    assert caplog.messages[0] == (
        f"inbox file {os.path.join(inbox, '1.txt')!r} left in place: [Errno 5] Input/output error"
    )
    removed = inbox_removed_dir(save_file)
    assert caplog.messages[1:] == [
        f"notice '{name}' delivered (12 bytes), recorded as {os.path.join(removed, name)!r}"
        for name in ("2.txt", "3.txt")
    ]


def test_a_pickup_stops_when_it_cannot_tell_whether_an_abort_arrived(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails closed: the next pickup looks again (and fails on the inbox itself)."""
    write_notice(save_file, "kept for later", name="a.txt")

    def failing(name: str, dfd: int) -> bool:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(pickup, "lexists", failing)
    assert take_all(save_file).notices == []
    assert os.listdir(inbox_dir(save_file)) == ["a.txt"]


# --- what cannot be used or examined -------------------------------------------------------


def test_a_listing_that_fails_makes_the_inbox_unusable(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_notice(save_file, "hidden", name="a.txt")
    inbox = inbox_dir(save_file)

    def failing(fd: Any) -> Any:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "scandir", failing)
    with (
        caplog.at_level(logging.ERROR, logger="scoutd.inbox"),
        pytest.raises(InboxUnusable) as raised,
    ):
        take_all(save_file)
    assert (raised.value.inbox, raised.value.problem) == (inbox, "Input/output error")
    assert caplog.messages == [
        f"inbox {inbox!r} cannot be used (Input/output error): its chat is not served"
    ]


def test_an_unusable_inbox_names_the_path_that_failed(caplog: pytest.LogCaptureFixture) -> None:
    inbox = "/chats/agent.inbox"
    cases = [
        (OSError(errno.EACCES, "Permission denied", "/chats"), "/chats: Permission denied"),
        (OSError(errno.EACCES, "Permission denied", inbox), "Permission denied"),
        (OSError(errno.EACCES, "Permission denied", b"/chats"), "Permission denied"),
        (OSError(errno.EACCES, "Permission denied"), "Permission denied"),
        (OSError("no words"), "no words"),
    ]
    with caplog.at_level(logging.ERROR, logger="scoutd.inbox"):
        for error, problem in cases:
            made = unusable(inbox, error)
            assert (made.inbox, made.problem) == (inbox, problem)
    assert caplog.messages[0] == (
        f"inbox {inbox!r} cannot be used (/chats: Permission denied): its chat is not served"
    )


def fail_abort_lstat(monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    """The look at the ``abort`` entry fails (a failing disk; another user's mode 000)."""
    lstat = os.lstat

    def failing(path: Any, *args: Any, dir_fd: int | None = None, **kwargs: Any) -> Any:
        if path == "abort" and dir_fd is not None:
            raise error
        return lstat(path, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "lstat", failing)


@pytest.mark.parametrize("consumer", ["pickup", "claim"])
@pytest.mark.parametrize(
    ("error", "words"),
    [(OSError(errno.EIO, "Input/output error"), "Input/output error"), (OSError("odd"), "odd")],
)
def test_an_abort_that_cannot_be_examined_aborts_and_stays(
    save_file: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    consumer: str,
    error: OSError,
    words: str,
) -> None:
    write_abort(save_file, "unread")
    fail_abort_lstat(monkeypatch, error)
    with (
        caplog.at_level(logging.ERROR, logger="scoutd.inbox"),
        pytest.raises(AbortNotTaken) as raised,
    ):
        take_all(save_file) if consumer == "pickup" else claim_abort(save_file)
    assert raised.value.reason == (
        f"aborted by operator (the abort entry could not be examined: {words})"
    )
    assert caplog.messages == [
        f"abort entry in {inbox_dir(save_file)!r} cannot be examined (it aborts all the"
        f" same): {error}"
    ]
    monkeypatch.undo()
    assert os.listdir(inbox_dir(save_file)) == ["abort"]


def test_an_abort_being_written_aborts_at_once_and_says_so(
    save_file: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_abort(save_file, "half")
    monkeypatch.setattr(claim_module, "_abort_complete", lambda fd, st: False)
    with caplog.at_level(logging.INFO, logger="scoutd.inbox"), pytest.raises(AbortNotTaken):
        take_all(save_file)
    assert caplog.messages == [
        f"abort file in {inbox_dir(save_file)!r} is still being written: aborting, not read yet"
    ]


def test_a_claim_waits_for_an_abort_being_written_unless_told_it_is_complete(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_abort(save_file, "as it is")
    monkeypatch.setattr(claim_module, "_abort_complete", lambda fd, st: False)
    with pytest.raises(claim_module.NotSettled):
        claim_abort(save_file, wait=False)
    assert claim_abort(save_file, complete=True, wait=False) == "as it is"


def test_a_blank_abort_that_cannot_be_made_durable_names_its_file(
    save_file: str, caplog: pytest.LogCaptureFixture
) -> None:
    write_abort(save_file, "  ")
    abort = os.path.join(inbox_dir(save_file), "abort")
    with (
        caplog.at_level(logging.ERROR, logger="scoutd.inbox"),
        pytest.raises(AbortNotTaken) as raised,
    ):
        claim_abort(save_file, before_abort=lambda reason: None)
    assert raised.value.reason == f"aborted by operator (abort file {abort})"
    assert caplog.messages == [
        f"abort file {abort!r} left in place, not consumed: it aborts every call until its"
        " marker can be written or an operator clears it"
    ]
    assert os.listdir(inbox_dir(save_file)) == ["abort"]
