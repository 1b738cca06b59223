"""Reaching an inbox: the one definition of "does not exist" and "cannot be used".

:meth:`scoutd.inbox.files.InboxDirs.of` decides for every consumer (the
library's pickup, the daemon with a session and without, ``scoutd inbox``):
a missing inbox holds nothing; one that exists, or may, and cannot be opened
and searched fails closed. The chat directory is reached one component at a
time, following only the symlinks root or the caller made
(:mod:`scoutd.inbox.walk`).
"""

from __future__ import annotations

import errno
import os
import pathlib
import threading
from collections.abc import Callable

import pytest

from scoutd import Aborted, PromptConfig
from scoutd.errors import InboxUnusable, StillAborted
from scoutd.inbox import claim_abort, inbox_dir, list_inbox, walk, write_abort, write_notice
from scoutd.inbox.files import InboxDirs
from scoutd.inbox.gate import InboxGate, guarded
from scoutd.inbox.walk import open_directory
from scoutd.paths import printable
from scoutd.strategies.base import InboxCall
from scoutd.strategies.inbox import inbox
from tests.support.umask import umask

NOBODY = 65534
CONFIG = PromptConfig()
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make another uid's link")


def _symlink_to_dir(inbox_path: str) -> None:
    os.mkdir(inbox_path + ".target")
    os.symlink(inbox_path + ".target", inbox_path)


def _file(inbox_path: str) -> None:
    pathlib.Path(inbox_path).write_text("x")


UNUSABLE: dict[str, tuple[Callable[[str], None], str]] = {
    "symlink": (_symlink_to_dir, "is a symbolic link, not followed"),
    "regular-file": (_file, "is not a directory but a regular file"),
    "fifo": (os.mkfifo, "is not a directory but a FIFO"),
}


@pytest.mark.parametrize("kind", sorted(UNUSABLE))
def test_an_inbox_that_is_not_a_directory_fails_closed_everywhere(
    tmp_path: pathlib.Path, kind: str
) -> None:
    save_file = str(tmp_path / "agent.chat")
    make, words = UNUSABLE[kind]
    make(inbox_dir(save_file))
    with pytest.raises(OSError, match=words):
        InboxDirs.of(save_file)
    with pytest.raises(InboxUnusable, match=words) as raised:
        inbox([], CONFIG, save_file=save_file)
    assert isinstance(raised.value, Aborted)
    with pytest.raises(InboxUnusable):
        claim_abort(save_file)
    with pytest.raises(OSError, match=words):
        list_inbox(save_file)


def test_a_symlink_loop_above_the_inbox_fails_closed(tmp_path: pathlib.Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    save_file = str(loop / "agent.chat")
    with pytest.raises(OSError) as raised:
        InboxDirs.of(save_file)
    assert raised.value.errno == errno.ELOOP
    with pytest.raises(InboxUnusable, match="symbolic links"):
        inbox([], CONFIG, save_file=save_file)


@root_only
def test_a_symlink_another_user_made_on_the_way_is_never_followed(tmp_path: pathlib.Path) -> None:
    """Reader and writer alike: the agent's link to another chat directory is refused."""
    other = tmp_path / "other"
    other.mkdir()
    write_abort(str(other / "agent.chat"), "the other agent's")
    link = tmp_path / "mine"
    link.symlink_to(other)
    os.lchown(link, NOBODY, NOBODY)
    save_file = str(link / "agent.chat")
    with pytest.raises(InboxUnusable, match="owned by uid 65534"):
        inbox([], CONFIG, save_file=save_file)
    with pytest.raises(OSError, match="owned by uid 65534"):
        write_notice(save_file, "for mine")
    assert sorted(os.listdir(inbox_dir(str(other / "agent.chat")))) == ["abort"]


def test_a_missing_inbox_holds_nothing(tmp_path: pathlib.Path) -> None:
    (tmp_path / "file").write_text("")
    for save_file in (
        tmp_path / "agent.chat",  # no inbox yet
        tmp_path / "no" / "such" / "agent.chat",  # no chat directory
        tmp_path / "file" / "agent.chat",  # a file on the way: nothing can be there
        tmp_path / ("x" * 250 + ".chat"),  # an inbox name longer than any file system allows
    ):
        assert InboxDirs.of(str(save_file)) is None
        assert inbox([], CONFIG, save_file=str(save_file))[0] == []
        assert claim_abort(str(save_file)) is None
        assert not list_inbox(str(save_file)).exists


def test_paths_are_walked_as_the_kernel_would(tmp_path: pathlib.Path) -> None:
    """Our own and root's symlinks are followed, ``..`` after a link goes to its real parent."""
    real = tmp_path / "a" / "b"
    real.mkdir(parents=True)
    (tmp_path / "rel").symlink_to("a/b")
    (tmp_path / "abs").symlink_to(real)
    (tmp_path / "chain").symlink_to(tmp_path / "rel")
    for given, expected in (
        (tmp_path / "rel", real),
        (tmp_path / "abs", real),
        (tmp_path / "chain", real),
        (tmp_path / "chain" / "..", real.parent),
        (tmp_path / "abs" / "." / ".." / "b", real),
    ):
        walked = open_directory(str(given))
        try:
            assert walked.path == str(expected)
        finally:
            os.close(walked.fd)
    made = open_directory(str(tmp_path / "rel" / "new" / "deep"), create=True)
    os.close(made.fd)
    assert made.path == str(real / "new" / "deep") and (real / "new" / "deep").is_dir()
    with pytest.raises(FileNotFoundError):
        open_directory(str(tmp_path / "missing"))


@pytest.mark.parametrize("one_call", [True, False])
def test_both_ways_of_opening_a_path_agree(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, one_call: bool
) -> None:
    """``openat2`` without symlinks, or step by step where it is missing: one answer."""
    from scoutd.inbox import walk

    if not one_call:
        monkeypatch.setattr(walk, "_OPENAT2_ABSENT", True)
    plain = tmp_path / "x" / "y"
    plain.mkdir(parents=True)
    (tmp_path / "link").symlink_to(plain)
    for given, expected in (
        (plain, plain),
        (tmp_path / "x" / "." / "y" / ".." / "y", plain),
        (tmp_path / "link", plain),
    ):
        walked = open_directory(str(given))
        os.close(walked.fd)
        assert walked.path == str(expected)
    for missing in (tmp_path / "nothing", plain / "file" / "below"):
        (plain / "file").write_text("")
        with pytest.raises((FileNotFoundError, NotADirectoryError)):
            open_directory(str(missing))


def test_writers_print_the_real_path(tmp_path: pathlib.Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    path = write_notice(str(tmp_path / "alias" / "agent.chat"), "hi", name="n.txt")
    assert path == str(real / "agent.inbox" / "n.txt")


def test_a_pickup_in_a_daemon_call_learns_of_a_take_since_the_call_began(
    tmp_path: pathlib.Path,
) -> None:
    """The gate: a claim recorded after the call began fails the call, taking nothing."""
    save_file = str(tmp_path / "agent.chat")
    write_notice(save_file, "stays", name="n.txt")
    inbox_path = inbox_dir(save_file)
    gate = InboxGate()
    gate.record(inbox_path, "before the call")
    call = InboxCall(gate.ticket())
    out, _ = inbox([], CONFIG, save_file=save_file, call=call)  # a take before the call: none
    assert out == [{"role": "user", "content": "stays"}]
    write_notice(save_file, "stays too", name="n.txt")
    call = InboxCall(gate.ticket())
    gate.record(inbox_path, "taken by the watcher")
    with pytest.raises(StillAborted, match="taken by the watcher"):
        inbox([], CONFIG, save_file=save_file, call=call)
    assert os.listdir(inbox_path) == ["n.txt"]  # nothing taken
    with guarded(inbox_path, None):  # outside a call: nothing to learn, no lock
        pass


def test_a_claim_and_a_pickup_of_one_inbox_exclude_each_other() -> None:
    gate = InboxGate()
    held, release, entered = threading.Event(), threading.Event(), threading.Event()

    def claim() -> None:
        with gate.holding("/x.inbox"):
            held.set()
            release.wait(10)

    def pickup() -> None:
        with gate.holding("/x.inbox"):
            entered.set()

    first = threading.Thread(target=claim)
    first.start()
    assert held.wait(10)
    second = threading.Thread(target=pickup)
    second.start()
    with gate.holding("/other.inbox"):  # another inbox is never held up
        pass
    assert not entered.is_set()
    release.set()
    assert entered.wait(10)
    first.join(10)
    second.join(10)


def test_printable_escapes_what_could_forge_a_terminal() -> None:
    assert printable("plain name é.txt") == "plain name é.txt"
    assert printable("x\x1b[2J\nforged\r") == "x\\x1b[2J\\x0aforged\\x0d"
    assert printable("a\u202eb\u2028c\x7f\x9b") == "a\\u202eb\\u2028c\\x7f\\x9b"
    assert printable(os.fsdecode(b"bad\xff")) == "bad\\xff"
    assert printable(b"\xfe\x00") == "\\xfe\\x00"


@root_only
def test_a_link_swapped_for_another_users_after_its_look_is_not_read(
    tmp_path: pathlib.Path,
) -> None:
    """The link is checked again on the descriptor it is read through: one another user
    owns by then is refused, with who owns it and where."""
    (tmp_path / "target").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "target")
    os.lchown(link, NOBODY, NOBODY)
    (tmp_path / "plain").mkdir()
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as raised:
            walk._read_link("link", dfd, "/chats/link")
        assert walk._read_link("plain", dfd, "/chats/plain") is None  # no longer a link
    finally:
        os.close(dfd)
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (
        errno.ELOOP,
        f"is a symbolic link owned by uid {NOBODY} (neither root nor uid 0), not followed",
        "/chats/link",
    )


def test_directories_a_walk_makes_are_made_as_mkdir_p_makes_them(tmp_path: pathlib.Path) -> None:
    with umask(0o022):
        made = open_directory(str(tmp_path / "new" / "deeper"), create=True)
    os.close(made.fd)
    for path in (tmp_path / "new", tmp_path / "new" / "deeper"):
        assert path.stat().st_mode & 0o7777 == 0o755
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk._make("new", dfd)  # made meanwhile by another party: fine
    finally:
        os.close(dfd)
