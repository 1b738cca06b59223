"""Delivery into inboxes, one test per crash point: never twice, whatever died when.

A host records a command in its journal after writing every chat and before
its XACK. A host that died before the journal line reads the command again
and must find each notice it wrote by its name, pending or already taken by
the agent; one that died after the line must write nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

import pytest

import scoutd.fleet.deliver
from scoutd.fleet.deliver import (
    Found,
    Journal,
    canonical_pattern,
    deliver,
    find_chats,
    notice_name,
    over_limit,
)
from scoutd.fleet.select import glob_matches
from scoutd.fleet.wire import Command, new_command_id
from scoutd.inbox import Pickup, pick_up, write_abort
from scoutd.inbox.aborted import claim_and_mark, held
from tests.fleet.hosts import delivered_copies


def notice(text: str = "wrap up") -> Command:
    return Command(
        id=new_command_id(), kind="notice", selector="all", text=text, issued=time.time()
    )


def take(save_file: str) -> Pickup:
    """One pickup, as the agent's next prepare does."""
    return pick_up(save_file, max_bytes=1 << 20, max_total_bytes=8 << 20)


def chats(tmp_path: Any, n: int = 3) -> list[str]:
    out = []
    for i in range(n):
        path = tmp_path / f"a{i}" / "agent.chat"
        path.parent.mkdir()
        path.write_text("[]")
        out.append(str(path))
    return out


def test_a_notice_is_written_once_to_each_chat(tmp_path: Any) -> None:
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    targets = chats(tmp_path)
    command = notice()
    receipt = deliver(command, targets, journal, "h1", 1.0)
    assert receipt.chats == targets and not receipt.already and not receipt.refused
    for chat in targets:
        assert delivered_copies(chat, command) == 1
        assert os.path.basename(os.listdir(chat.replace(".chat", ".inbox"))[0]) == notice_name(
            command
        )


def test_died_after_writing_before_the_journal_line(tmp_path: Any) -> None:
    """Crash point 1: the notices are there (one already taken by its agent), no journal line."""
    targets = chats(tmp_path)
    command = notice()
    crashed = Journal(str(tmp_path / "state" / "delivered.log"))
    crashed.load()
    deliver(command, targets[:2], crashed, "h1", 1.0)
    os.unlink(crashed.path)  # the line never reached the disk
    taken = take(targets[0])  # the agent took its notice meanwhile
    assert taken.notices == ["wrap up"]
    again = Journal(crashed.path)
    again.load()
    receipt = deliver(command, targets, again, "h1", 2.0)
    assert receipt.already == targets[:2] and receipt.chats == targets[2:]
    for chat in targets:
        assert delivered_copies(chat, command) == 1
    assert take(targets[0]).notices == []  # never delivered a second time


def test_died_after_the_journal_line_before_the_ack(tmp_path: Any) -> None:
    """Crash point 2: the journal has it; the command comes again; nothing is written."""
    targets = chats(tmp_path)
    command = notice()
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    deliver(command, targets, journal, "h1", 1.0)
    for chat in targets:
        assert take(chat).notices == ["wrap up"]  # taken: the names are in the records
    restarted = Journal(journal.path)
    restarted.load()
    assert command.id in restarted.done
    receipt = deliver(command, targets, restarted, "h1", 2.0)
    assert receipt.chats == [] and receipt.already == targets
    assert all(take(chat).notices == [] for chat in targets)


def test_an_abort_goes_through_the_inbox_and_its_marker(tmp_path: Any) -> None:
    (target,) = chats(tmp_path, 1)
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    first = Command(id=new_command_id(), kind="abort", selector="all", text="job cancelled")
    assert deliver(first, [target], journal, "h1", 1.0).chats == [target]
    assert claim_and_mark(target) == "job cancelled"  # as the daemon's watcher takes it
    assert held(target) == "job cancelled"  # the marker, as for a file abort
    second = Command(id=new_command_id(), kind="abort", selector="all", text="later")
    receipt = deliver(second, [target], journal, "h1", 2.0)
    assert receipt.already == [target]  # aborted already: nothing written
    assert not os.path.lexists(target.replace(".chat", ".inbox") + "/abort")


def test_a_waiting_abort_keeps_its_reason(tmp_path: Any) -> None:
    (target,) = chats(tmp_path, 1)
    write_abort(target, "operator on the host")
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    command = Command(id=new_command_id(), kind="abort", selector="all", text="fleet")
    deliver(command, [target], journal, "h1", 1.0)
    assert take(target).abort == "operator on the host"


def test_a_chat_that_cannot_be_written_is_refused_not_fatal(tmp_path: Any) -> None:
    good, bad = chats(tmp_path, 2)
    os.symlink("/", bad.replace(".chat", ".inbox"))  # a symlinked inbox is refused
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    receipt = deliver(notice(), [good, bad], journal, "h1", 1.0)
    assert receipt.chats == [good]
    assert len(receipt.refused) == 1 and receipt.refused[0].startswith(bad)


def test_a_glob_on_disk_stays_inside_the_roots(tmp_path: Any) -> None:
    """Nothing outside the roots is looked at; a chat that is a symbolic link is reached
    at its own path (its inbox is beside it, inside the roots), as its session would be;
    a directory link out of the roots is not followed."""
    (tmp_path / "in").mkdir()
    inside = chats(tmp_path / "in", 2)
    outside_dir = tmp_path / "out"
    outside_dir.mkdir()
    (outside_dir / "agent.chat").write_text("[]")
    link = tmp_path / "in" / "a0" / "link.chat"
    os.symlink(outside_dir / "agent.chat", link)
    os.symlink(outside_dir, tmp_path / "in" / "elsewhere")
    found = find_chats(f"{tmp_path}/*/*/*.chat", [str(tmp_path / "in")], 100)
    assert found == Found(sorted([*inside, str(link)]))
    assert find_chats(f"{tmp_path}/*/*/*.chat", [str(tmp_path / "in")], 1) == Found(
        found.chats[:1], over_limit(1)
    )


class _Listed:
    """``os.scandir``'s entries of a directory, in a given order (a context manager)."""

    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries

    def __enter__(self) -> list[Any]:
        return self.entries

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("order", ["listed", "reversed"])
def test_a_stopped_search_reaches_the_same_chats_in_any_listing_order(
    tmp_path: Any, monkeypatch: Any, order: str
) -> None:
    """A file system lists a directory in an order of its own (tmpfs: newest first):
    which chats a search over its limit reaches does not depend on it."""
    root = tmp_path / "roots"
    for job in ("c", "a", "b"):
        for name in ("z.chat", "m.chat", "x.chat"):
            (root / job).mkdir(parents=True, exist_ok=True)
            (root / job / name).write_text("[]")
    scandir = os.scandir

    def listed(path: Any) -> _Listed:
        with scandir(path) as entries:
            found = list(entries)
        return _Listed(found[::-1] if order == "reversed" else found)

    monkeypatch.setattr(scoutd.fleet.deliver.os, "scandir", listed)
    every = sorted(str(path) for path in root.glob("*/*.chat"))
    for limit in (1, 2, 4):
        found = find_chats(f"{root}/*/*.chat", [str(root)], limit)
        assert found == Found(every[:limit], over_limit(limit)), (order, limit)


def test_a_glob_matches_on_disk_as_it_matches_sessions(tmp_path: Any) -> None:
    """``*`` matches a leading dot (an agent cannot hide its chat from an abort by its
    name), and a root spelt through a symbolic link, ``//`` or ``.`` is the same root."""
    root = tmp_path / "roots"
    (root / "job").mkdir(parents=True)
    for name in ("w1.chat", ".w2.chat"):
        (root / "job" / name).write_text("[]")
    (tmp_path / "spelt").symlink_to(root)
    real = [str(root / "job" / ".w2.chat"), str(root / "job" / "w1.chat")]
    for spelling in (f"{root}/job/*.chat", f"{tmp_path}/spelt/job/*.chat", f"{root}//./job/*.chat"):
        pattern = canonical_pattern(spelling)
        assert find_chats(pattern, [str(root)], 100) == Found(real), spelling
        assert all(glob_matches(pattern, chat) for chat in real)  # as a session's path


def test_a_glob_search_is_bounded_and_never_loops(tmp_path: Any, monkeypatch: Any) -> None:
    """A directory link to itself is not walked through; past MAX_LOOKED_AT entries the
    search stops and says so."""
    root = tmp_path / "roots"
    root.mkdir()
    (root / "loop").symlink_to(".")
    for i in range(30):
        (root / f"f{i}.chat").write_text("[]")
    deep = canonical_pattern(f"{root}" + "/*" * 40)
    assert find_chats(deep, [str(root)], 100) == Found([])
    monkeypatch.setattr(scoutd.fleet.deliver, "MAX_LOOKED_AT", 10)
    stopped = find_chats(f"{root}/*.chat", [str(root)], 100)
    assert stopped.chats == [] and stopped.cut is not None and "10 directory entries" in stopped.cut


def test_the_journal_forgets_commands_older_than_retention(tmp_path: Any) -> None:
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    for i in range(10_000):
        journal.done[f"{i:032x}"] = float(i)
    journal.compact(older_than=9_990.0)
    reloaded = Journal(journal.path)
    reloaded.load()
    assert sorted(reloaded.done.values()) == [float(i) for i in range(9_990, 10_000)]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to search as another uid")
def test_a_directory_the_host_cannot_look_into_is_said(tmp_path: Any) -> None:
    """A chat may hide in a directory the daemon's account cannot list (an agent may
    chmod its own): the search names that directory and why, never passes it over."""
    root = tempfile.mkdtemp()  # a tree another uid may walk: tmp_path's parent is 0700
    try:
        os.chmod(root, 0o755)
        for name, mode in (("open", 0o755), ("shut", 0o700)):
            os.mkdir(os.path.join(root, name), mode)
            with open(os.path.join(root, name, "agent.chat"), "w") as handle:
                handle.write("[]")
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child searches as uid 65534, with what is loaded already
            try:
                os.setgid(65534)
                os.setuid(65534)
                found = find_chats(f"{root}/*/*.chat", [root], 100)
                os.write(writer, repr(tuple(found)).encode())
            finally:
                os._exit(0)
        os.close(writer)
        with os.fdopen(reader) as pipe:
            answer = pipe.read()
        os.waitpid(pid, 0)
        assert answer == repr(
            (
                [os.path.join(root, "open", "agent.chat")],
                None,
                (
                    f"{root}/shut: cannot be looked into (permission denied):"
                    " its chats were not looked for",
                ),
            )
        )
    finally:
        shutil.rmtree(root)
