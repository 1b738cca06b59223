"""A path the daemon resolved itself is used exactly: a symlink found on it later is refused.

The daemon resolves a save file (``allowed_roots``) at ``session.open`` and at
each call, then works on the resolved path, which holds no symlink. An agent
that may rename entries in a directory on that path can rename a symlink into
a directory's place after the check. One of root's (a system link lying in
the agent's tree) used to be followed, because the walk to an inbox follows
root's links for everyone: the daemon claimed another chat's abort for the
agent's session, delivered another chat's notices into its prompt, read
another chat's marker, and the fleet wrote into another chat's inbox. Now any
symlink on a path the daemon resolved fails that chat closed, whoever owns
it; the library and ``scoutd notify``/``abort`` still follow root's links.

The swap is made deterministic: in the watcher's case it happens after
``session.open``; in a call's, the daemon's own check of the path is wrapped
(a fault module) so that the swap happens right after it, once.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple

import pytest

from scoutd.fleet.deliver import Journal, deliver
from scoutd.fleet.wire import Command, new_command_id
from scoutd.inbox import inbox_dir, inbox_removed_dir, walk, write_abort, write_notice
from scoutd.inbox.aborted import mark, marker_paths
from tests.reliability.harness import FaultDaemon
from tests.support.daemon import Daemon, LineClient

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a root-owned symlink needs root")

PUSH = 10.0
HELLO = [{"role": "user", "content": "hello"}]

# The daemon's check of a save file, then the swap the trigger file asks for (once):
# the chat directory renamed away, root's link renamed into its place.
SWAP_AFTER_CHECK = r"""
import json, os
from scoutd.server import workers

_check = workers.check_save_file
TRIGGER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "swap.json")


def check_save_file(save_file, roots):
    resolved = _check(save_file, roots)
    try:
        with open(TRIGGER, encoding="utf-8") as handle:
            swap = json.load(handle)
    except FileNotFoundError:
        return resolved
    os.unlink(TRIGGER)
    os.rename(swap["chat"], swap["chat"] + ".real")
    os.rename(swap["link"], swap["chat"])
    return resolved


workers.check_save_file = check_save_file
"""


class Chats(NamedTuple):
    """The agent's chat (``mine``) in a tree it may rename entries in, root's link
    there (``link``) to a root-only directory holding another chat (``theirs``)."""

    mine: str
    theirs: str
    link: str

    @property
    def chat_dir(self) -> str:
        return os.path.dirname(self.mine)

    def swap(self) -> None:
        """What the agent does: its chat directory away, root's link in its place."""
        os.rename(self.chat_dir, self.chat_dir + ".real")
        os.rename(self.link, self.chat_dir)


def chats(top: str) -> Chats:
    agents, private = os.path.join(top, "agents"), os.path.join(top, "private")
    os.makedirs(os.path.join(agents, "a1"))
    os.mkdir(private, 0o700)
    link = os.path.join(agents, "system")
    os.symlink(private, link)  # root's: made by root, in the agent's tree
    assert os.lstat(link).st_uid == 0
    return Chats(
        os.path.join(agents, "a1", "agent.chat"), os.path.join(private, "agent.chat"), link
    )


def untouched(c: Chats, entries: list[str]) -> None:
    """The other chat's inbox holds what it held, nothing was recorded or marked there."""
    assert sorted(os.listdir(inbox_dir(c.theirs))) == entries
    assert not os.path.lexists(inbox_removed_dir(c.theirs))
    assert not any(os.path.lexists(p) for p in marker_paths(c.theirs)[:1])


@pytest.fixture
def swapping() -> Iterator[FaultDaemon]:
    with FaultDaemon(SWAP_AFTER_CHECK) as d:
        yield d


def swap_after_next_check(d: Daemon, c: Chats) -> None:
    with open(os.path.join(d.dir, "swap.json"), "w", encoding="utf-8") as handle:
        json.dump({"chat": c.chat_dir, "link": c.link}, handle)


def open_session(client: LineClient, save_file: str) -> str:
    session: str = client.call("session.open", {"save_file": save_file})["result"]["session"]
    return session


def refused(reason: str) -> None:
    assert "symbolic link" in reason and "resolved" in reason, reason


def test_the_watchers_claim_never_follows_roots_link_swapped_into_a_chats_path() -> None:
    with Daemon() as d, d.connect() as client:
        c = chats(d.dir)
        write_abort(c.theirs, "for the other chat only")
        session = open_session(client, c.mine)
        c.swap()  # the watcher sees the chat directory move and claims
        note = client.notification("session.aborted", PUSH)
        assert note["params"]["session"] == session
        refused(note["params"]["reason"])
        untouched(c, ["abort"])


def test_a_session_round_never_delivers_notices_through_roots_link(swapping: Any) -> None:
    d = swapping
    c = chats(d.dir)
    write_notice(c.theirs, "the other chat's secret", name="n.txt")
    with d.connect() as client:
        session = open_session(client, c.mine)
        swap_after_next_check(d, c)  # the round's recheck passes, then the swap
        reply = client.call("prepare_prompt", {"messages": HELLO, "session": session})
        assert "the other chat's secret" not in json.dumps(reply)
        refused(reply["error"]["data"]["reason"])
    untouched(c, ["n.txt"])


def test_a_call_without_a_session_never_claims_an_abort_through_roots_link(
    swapping: Any,
) -> None:
    d = swapping
    c = chats(d.dir)
    write_abort(c.theirs, "for the other chat only")
    os.makedirs(c.chat_dir, exist_ok=True)
    swap_after_next_check(d, c)
    with d.connect() as client:
        reply = client.call("prepare_prompt", {"messages": HELLO, "save_file": c.mine})
    refused(reply["error"]["data"]["reason"])
    untouched(c, ["abort"])


def test_an_open_never_reads_a_marker_through_roots_link(swapping: Any) -> None:
    d = swapping
    c = chats(d.dir)
    os.makedirs(inbox_dir(c.theirs))
    assert mark(c.theirs, "the other chat's reason") is not None
    swap_after_next_check(d, c)  # the open's check passes, then the swap
    with d.connect() as client:
        session = open_session(client, c.mine)
        note = client.notification("session.aborted", PUSH)
    assert note["params"]["session"] == session
    assert "the other chat's reason" not in note["params"]["reason"]  # aborted, unread
    with open(marker_paths(c.theirs)[0], encoding="utf-8") as handle:
        assert handle.read() == "the other chat's reason"


@pytest.mark.parametrize("kind", ["notice", "abort"])
def test_the_fleet_never_writes_through_roots_link_swapped_into_a_chats_path(
    tmp_path: Any, kind: Literal["notice", "abort"]
) -> None:
    """The fleet reaches chats by paths it found (or a session's resolved path)."""
    c = chats(str(tmp_path))
    os.makedirs(inbox_dir(c.theirs))
    with open(c.mine, "w", encoding="utf-8") as handle:
        handle.write("[]")
    found = c.mine  # what find_chats gave: a real path
    c.swap()
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    command = Command(
        id=new_command_id(), kind=kind, selector="all", text="for a1", issued=time.time()
    )
    receipt = deliver(command, [found], journal, "h1", 1.0)
    assert receipt.chats == [] and len(receipt.refused) == 1, receipt
    assert "symbolic link" in receipt.refused[0]
    untouched(c, [])  # nothing written through the link


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "step-by-step"])
def test_an_exact_walk_refuses_roots_link_a_users_walk_follows(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, openat2: bool
) -> None:
    """The one rule in the walk: ``exact`` follows no symlink, whoever owns it."""
    monkeypatch.setattr(walk, "_OPENAT2_ABSENT", not openat2 or walk._OPENAT2_ABSENT)
    c = chats(str(tmp_path))
    c.swap()
    followed = walk.open_directory(c.chat_dir)  # the library's, the CLI's: root's link
    os.close(followed.fd)
    assert followed.path == os.path.dirname(c.theirs)
    for create in (False, True):
        with pytest.raises(OSError) as caught:
            walk.open_directory(c.chat_dir, create=create, exact=True)
        assert caught.value.errno == errno.ELOOP and caught.value.filename == c.chat_dir
    real = walk.open_directory(c.chat_dir + ".real", exact=True)  # no link: as before
    os.close(real.fd)
    assert real.path == c.chat_dir + ".real"
