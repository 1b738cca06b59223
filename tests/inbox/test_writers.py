"""The writers (``write_notice``, ``write_abort``) on real directories: where they
write, what they refuse, and what they say when they cannot.

An operator runs ``scoutd notify`` from anywhere, as root or as another user; the
notice must land in the chat's own inbox, readable by whoever reads that inbox.
"""

from __future__ import annotations

import errno
import itertools
import os
import pathlib
import stat
import time
from collections.abc import Callable

import pytest

from scoutd.inbox import inbox_dir, write_abort, write_notice, writers
from scoutd.inbox.writers import place_abort
from tests.reliability.harness import GROUP, NOBODY, notice_as_nobody
from tests.support.umask import umask

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another uid)")


def test_the_inbox_is_found_beside_the_chat_not_in_the_working_directory(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory of the inbox's name where the operator stands is not the chat's inbox,
    whether or not the chat's inbox exists yet."""
    (tmp_path / "chats").mkdir()
    decoy = tmp_path / "elsewhere"
    (decoy / "run.inbox").mkdir(parents=True)
    monkeypatch.chdir(decoy)
    save_file = str(tmp_path / "chats" / "run.chat")
    first = write_notice(save_file, "one", name="a.txt")  # the inbox is made
    second = write_notice(save_file, "two", name="b.txt")  # the inbox is there
    assert [first, second] == [os.path.join(inbox_dir(save_file), n) for n in ("a.txt", "b.txt")]
    assert os.listdir(decoy / "run.inbox") == []


def test_an_inbox_that_is_not_a_directory_is_named_in_full(tmp_path: pathlib.Path) -> None:
    save_file = str(tmp_path / "run.chat")
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "target", inbox_dir(save_file))
    with pytest.raises(OSError) as raised:
        write_notice(save_file, "x")
    assert raised.value.filename == inbox_dir(save_file)
    assert raised.value.strerror == "is a symbolic link, not followed"
    assert os.listdir(tmp_path / "target") == []
    os.unlink(inbox_dir(save_file))
    pathlib.Path(inbox_dir(save_file)).write_text("")
    with pytest.raises(OSError) as raised:
        write_abort(save_file, "stop")
    assert raised.value.filename == inbox_dir(save_file)
    assert raised.value.strerror == "is not a directory but a regular file"


@pytest.mark.parametrize(
    "name", ["", ".hidden", "a/b", "../up", "nul\0byte", "abort", "/abs.txt", "./dot"]
)
def test_a_notice_name_that_is_not_a_plain_visible_file_name_is_refused(
    tmp_path: pathlib.Path, name: str
) -> None:
    save_file = str(tmp_path / "run.chat")
    with pytest.raises(ValueError, match="invalid notice name") as raised:
        write_notice(save_file, "x", name=name)
    assert repr(name) in str(raised.value)
    assert not os.path.lexists(inbox_dir(save_file))  # refused before anything is made


def test_the_longest_notice_name_leaves_room_for_its_sequence_names(tmp_path: pathlib.Path) -> None:
    """A name of 249 bytes is written three times over (the second and third get
    ``~00001`` and ``~00002``, 255 bytes); one of 250 is refused before anything is
    made, with its size: its second notice could get no name."""
    save_file = str(tmp_path / "run.chat")
    name = "é" * 122 + "n.txt"  # 249 bytes
    paths = [write_notice(save_file, text, name=name) for text in ("1", "2", "3")]
    expected = [name, "é" * 122 + "n~00001.txt", "é" * 122 + "n~00002.txt"]
    assert [os.path.basename(path) for path in paths] == expected
    assert [pathlib.Path(path).read_text() for path in paths] == ["1", "2", "3"]
    longer = tmp_path / "longer.chat"
    with pytest.raises(ValueError, match=r"invalid notice name .*: 250 bytes, at most 249"):
        write_notice(str(longer), "x", name="x" + name)
    assert not os.path.lexists(inbox_dir(str(longer)))


def test_a_notice_name_no_file_name_can_hold_is_refused_in_words(tmp_path: pathlib.Path) -> None:
    """A lone surrogate has no bytes: a ValueError that says so, not the codec's."""
    save_file = str(tmp_path / "run.chat")
    with pytest.raises(
        ValueError, match=r"invalid notice name '\\ud800x': not a file name's bytes"
    ):
        write_notice(save_file, "x", name="\ud800x")
    assert not os.path.lexists(inbox_dir(save_file))


def test_a_second_abort_keeps_the_first_and_says_so(tmp_path: pathlib.Path) -> None:
    save_file = str(tmp_path / "run.chat")
    first = place_abort(save_file, "first")
    second = place_abort(save_file, "second")
    assert first.written and not second.written
    assert first.path == second.path == os.path.join(inbox_dir(save_file), "abort")
    assert pathlib.Path(first.path).read_text() == "first"
    assert write_abort(save_file, "third") == first.path
    assert pathlib.Path(first.path).read_text() == "first"


@root_only
def test_a_writer_outside_the_chat_directorys_group_still_writes(
    reachable: pathlib.Path,
) -> None:
    """The inbox cannot be given the chat directory's group by a user outside that group:
    the notice is written all the same, the inbox keeping the writer's group."""
    chat_dir = reachable / "chats"
    chat_dir.mkdir(mode=0o775)
    os.chown(chat_dir, NOBODY, 0)  # the agent's directory, group root (not nobody's)
    save_file = str(chat_dir / "run.chat")
    written = notice_as_nobody(save_file)
    assert pathlib.Path(written).read_text() == "hi"
    inbox = os.stat(inbox_dir(save_file))
    assert (inbox.st_uid, inbox.st_gid) == (NOBODY, NOBODY)


def test_a_path_the_daemon_resolved_follows_no_symlink_not_even_its_own(
    tmp_path: pathlib.Path,
) -> None:
    """``exact``: a symlink on the way is refused (``ELOOP``) for a notice and an
    abort alike, though the same writer follows it without ``exact`` (its own)."""
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    save_file = str(tmp_path / "link" / "run.chat")
    writes: list[Callable[[], object]] = [
        lambda: write_notice(save_file, "x", exact=True),
        lambda: write_notice(save_file, "x", name="n.txt", exact=True),
        lambda: write_abort(save_file, "stop", exact=True),
        lambda: place_abort(save_file, "stop", exact=True),
    ]
    for write in writes:
        with pytest.raises(OSError) as raised:
            write()
        assert raised.value.errno == errno.ELOOP
    assert os.listdir(tmp_path / "real") == []
    inbox = tmp_path / "real" / "run.inbox"
    assert write_notice(save_file, "x", name="n.txt") == str(inbox / "n.txt")
    assert place_abort(save_file, "stop").path == str(inbox / "abort")


def test_an_abort_without_a_reason_is_an_empty_file(tmp_path: pathlib.Path) -> None:
    save_file = str(tmp_path / "run.chat")
    assert pathlib.Path(write_abort(save_file)).read_bytes() == b""
    os.unlink(write_abort(save_file))
    assert place_abort(save_file).written
    assert pathlib.Path(inbox_dir(save_file), "abort").read_bytes() == b""


def test_fresh_names_keep_increasing_when_the_clock_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: 1_000)
    names = list(itertools.islice(writers._fresh_names(-1), 3))
    pid = os.getpid()
    assert names == [f"{n:020d}-{pid}.txt" for n in (1_000, 1_001, 1_002)]


@root_only
def test_root_gives_a_new_inbox_the_chat_directorys_group_and_group_bits(
    tmp_path: pathlib.Path,
) -> None:
    """Under umask 077 too: the inbox gets the chat directory's group bits (not its
    others' bits) and its group; its owner stays root's when the chat is root's."""
    chat_dir = tmp_path / "chats"
    chat_dir.mkdir()
    os.chmod(chat_dir, 0o750)
    os.chown(chat_dir, 0, GROUP)
    save_file = str(chat_dir / "run.chat")
    with umask(0o077):
        write_notice(save_file, "x", name="n.txt")
    st = os.stat(inbox_dir(save_file))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o750, 0, GROUP)


@root_only
@pytest.mark.parametrize("agent", [NOBODY, 1])
def test_root_gives_a_new_inbox_the_owner_of_a_chat_directory_of_its_own_group(
    tmp_path: pathlib.Path, agent: int
) -> None:
    chat_dir = tmp_path / "chats"
    chat_dir.mkdir()
    os.chown(chat_dir, agent, 0)  # the agent's, root's group: only the owner differs
    save_file = str(chat_dir / "run.chat")
    write_notice(save_file, "x", name="n.txt")
    st = os.stat(inbox_dir(save_file))
    assert (st.st_uid, st.st_gid) == (agent, 0)


@root_only
def test_a_member_of_the_chat_directorys_group_gives_it_to_the_inbox(
    reachable: pathlib.Path,
) -> None:
    """A writer that is not root may still hand the inbox the chat directory's group
    (it is a member), though never its owner."""
    chat_dir = reachable / "chats"
    chat_dir.mkdir(mode=0o775)
    os.chmod(chat_dir, 0o775)
    os.chown(chat_dir, 0, GROUP)
    save_file = str(chat_dir / "run.chat")
    notice_as_nobody(save_file, group=GROUP)
    st = os.stat(inbox_dir(save_file))
    assert (st.st_uid, st.st_gid) == (NOBODY, GROUP)
