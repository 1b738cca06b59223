"""Who the daemon claims an operator's abort for, case by case, on real directories.

:func:`scoutd.server.claims.claim_for` decides, for the sessions open on an inbox,
who is aborted and whether the abort is taken (docs/RELIABILITY.md, "An abort fails
closed"). The daemon tests see that through pushes (tests/server/test_hidden_abort.py,
tests/reliability/test_abort_reach.py); here each layout is built for real (the
directories of root and of uid 65534, their modes, a sticky inbox, an abort of
either) and the expected outcome is written out by the rules:

* a session whose uid may take the abort gets it, and the abort is taken;
* one kept out only by its own directories' modes fails closed, the abort left;
* one kept out by anyone else's is left alone, and so is the abort;
* an inbox that cannot be used, or an abort that cannot be looked at, aborts all.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator

import pytest

from scoutd.inbox import inbox_dir, inbox_removed_dir, write_abort
from scoutd.inbox.gate import InboxGate
from scoutd.inbox.pickup import claim_abort
from scoutd.server import claims
from scoutd.server.claims import Candidate, Claimed, claim_for, hidden_from, holding_abort
from tests.reliability.harness import GROUP
from tests.support.ids import AS_ROOT, NOBODY

pytestmark = AS_ROOT

ROOT = Candidate("root", 0, 0, frozenset({0}))
AGENT = Candidate("agent", NOBODY, NOBODY, frozenset({NOBODY}))
MEMBER = Candidate("member", NOBODY, NOBODY, frozenset({NOBODY, GROUP}))


@pytest.fixture
def base() -> Iterator[str]:
    """A directory every user may search, under /tmp (whose every ancestor is too)."""
    path = tempfile.mkdtemp(prefix="claims", dir="/tmp")
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def chat(
    base: str,
    *,
    owner: int = NOBODY,
    group: int | None = None,
    chat_mode: int = 0o755,
    inbox_mode: int = 0o755,
) -> str:
    """A save file in a chat directory and inbox of ``owner`` (and ``group``)."""
    save_file = os.path.join(base, "chat", "agent.chat")
    os.makedirs(inbox_dir(save_file))
    for path, mode in ((os.path.dirname(save_file), chat_mode), (inbox_dir(save_file), inbox_mode)):
        os.chown(path, owner, owner if group is None else group)
        os.chmod(path, mode)
    return save_file


def dropped(save_file: str, owner: int = 0) -> str:
    """The operator's abort, ``stop``, as ``owner``'s file."""
    path = write_abort(save_file, "stop")
    os.chown(path, owner, owner)
    return path


def claimed(save_file: str, *candidates: Candidate) -> Claimed:
    return claim_for(
        claim_abort,
        InboxGate(),
        save_file,
        candidates,
        os.geteuid(),
        max_bytes=1 << 20,
        complete=True,
    )


def taken(save_file: str) -> bool:
    """Whether the abort left the inbox for its record."""
    gone = not os.path.lexists(os.path.join(inbox_dir(save_file), "abort"))
    recorded = "abort" in os.listdir(inbox_removed_dir(save_file)) if gone else False
    return gone and recorded


def test_nothing_is_claimed_without_an_inbox_or_an_abort(base: str) -> None:
    save_file = os.path.join(base, "none", "agent.chat")
    os.makedirs(os.path.dirname(save_file))
    assert claimed(save_file, ROOT, AGENT) == Claimed()
    os.mkdir(inbox_dir(save_file))
    assert claimed(save_file, ROOT, AGENT) == Claimed()


def test_a_session_whose_uid_may_take_the_abort_gets_it(base: str) -> None:
    save_file = chat(base)
    dropped(save_file)
    assert claimed(save_file, AGENT) == Claimed("stop", ("agent",), consumed=True)
    assert taken(save_file)


def test_every_session_that_may_take_it_gets_it_in_order(base: str) -> None:
    save_file = chat(base)
    dropped(save_file)
    expected = Claimed("stop", ("agent", "root"), consumed=True)
    assert claimed(save_file, AGENT, ROOT) == expected


@pytest.mark.parametrize("own", [0, 1], ids=["root", "the daemon's uid"])
def test_root_and_the_daemons_own_uid_may_always_take_it(base: str, own: int) -> None:
    save_file = chat(base, owner=0, chat_mode=0o700, inbox_mode=0o700)
    dropped(save_file)
    session = Candidate("s", os.geteuid() if own else 0, 0)
    assert claimed(save_file, session) == Claimed("stop", ("s",), consumed=True)


@pytest.mark.parametrize("locked", ["inbox", "chat directory"])
@pytest.mark.parametrize("mode", [0o070, 0o000, 0o500])
def test_a_session_locked_out_by_its_own_directory_fails_closed(
    base: str, locked: str, mode: int
) -> None:
    """Its owner may give itself its rights back at any time: the abort is its own."""
    save_file = chat(base)
    path = dropped(save_file)
    directory = inbox_dir(save_file) if locked == "inbox" else os.path.dirname(save_file)
    os.chmod(directory, mode)
    try:
        assert claimed(save_file, AGENT) == Claimed(hidden=("agent",))
        assert os.path.exists(path)  # left in place, unread
        # with a session that may take it, it is taken for that one; the other fails closed
        found = claimed(save_file, ROOT, AGENT)
        assert found == Claimed("stop", ("root",), consumed=True, hidden=("agent",))
    finally:
        os.chmod(directory, 0o755)


@pytest.mark.parametrize("kept_out_by", ["chat directory", "an ancestor"])
def test_a_session_kept_out_by_another_users_directory_is_left_alone(
    base: str, kept_out_by: str
) -> None:
    """Not its doing: the abort is left for its owner and this session is not aborted."""
    if kept_out_by == "an ancestor":
        nested = os.path.join(base, "closed")
        os.mkdir(nested, 0o700)  # root's, searchable by root only
        save_file = chat(nested)
    else:
        save_file = chat(base, owner=0, chat_mode=0o755, inbox_mode=0o777)
        os.chmod(os.path.dirname(save_file), 0o755)  # root's: the agent may not write it
    path = dropped(save_file)
    assert claimed(save_file, AGENT) == Claimed()
    assert os.path.exists(path)


def test_in_a_sticky_inbox_of_another_user_only_an_abort_of_its_own_is_a_sessions(
    base: str,
) -> None:
    save_file = chat(base, owner=0, chat_mode=0o777, inbox_mode=0o1777)
    path = dropped(save_file, owner=0)
    assert claimed(save_file, AGENT) == Claimed()  # root's abort: not the agent's to take
    assert os.path.exists(path)
    os.chown(path, NOBODY, NOBODY)
    assert claimed(save_file, AGENT) == Claimed("stop", ("agent",), consumed=True)


def test_a_sticky_inbox_of_the_sessions_own_is_its_own(base: str) -> None:
    save_file = chat(base, inbox_mode=0o1755)
    dropped(save_file, owner=0)
    assert claimed(save_file, AGENT) == Claimed("stop", ("agent",), consumed=True)


def test_a_sticky_inbox_of_another_user_locked_only_by_the_sessions_own_chat_directory(
    base: str,
) -> None:
    """Its own abort in another user's sticky inbox: hidden only by its own chat
    directory's mode (it fails closed); root's abort there is not its own (left)."""
    save_file = chat(base, owner=NOBODY, chat_mode=0o755, inbox_mode=0o755)
    inbox = inbox_dir(save_file)
    os.chown(inbox, 0, 0)
    os.chmod(inbox, 0o1777)
    path = dropped(save_file, owner=NOBODY)
    os.chmod(os.path.dirname(save_file), 0o000)
    try:
        assert claimed(save_file, AGENT) == Claimed(hidden=("agent",))
        os.chown(path, 0, 0)
        assert claimed(save_file, AGENT) == Claimed()
    finally:
        os.chmod(os.path.dirname(save_file), 0o755)


def test_the_groups_a_session_holds_decide_what_a_group_directory_grants(base: str) -> None:
    save_file = chat(base, owner=0, group=GROUP, chat_mode=0o770, inbox_mode=0o770)
    path = dropped(save_file)
    assert claimed(save_file, AGENT) == Claimed()  # not in the group: left for its owner
    assert os.path.exists(path)
    assert claimed(save_file, MEMBER) == Claimed("stop", ("member",), consumed=True)


def test_a_group_directory_the_session_is_kept_out_of_is_not_its_doing(base: str) -> None:
    """The group's bits apply to a member, whatever the other bits grant; a directory of
    the group is not the member's own, so being kept out of it is not hiding."""
    save_file = chat(base, owner=0, group=GROUP, chat_mode=0o707, inbox_mode=0o777)
    path = dropped(save_file)
    assert claimed(save_file, MEMBER) == Claimed()
    assert os.path.exists(path)
    assert claimed(save_file, AGENT) == Claimed("stop", ("agent",), consumed=True)


def test_a_session_of_unknown_groups_is_given_its_users_from_the_database(base: str) -> None:
    save_file = chat(base, owner=0, group=GROUP, chat_mode=0o770, inbox_mode=0o770)
    dropped(save_file)
    unknown = Candidate("unknown", NOBODY, None)  # no gid, no groups: the user database's
    assert claimed(save_file, unknown) == Claimed()  # uid 65534 is in no group 4242


def test_an_inbox_that_cannot_be_used_aborts_every_session(base: str) -> None:
    save_file = os.path.join(base, "file", "agent.chat")
    os.makedirs(os.path.dirname(save_file))
    with open(inbox_dir(save_file), "w") as handle:  # a file where the inbox goes
        handle.write("not a directory")
    reason = (
        f"the inbox {inbox_dir(save_file)!r} exists but cannot be used (is not a directory"
        " but a regular file): the chat is not served until an operator repairs it"
    )
    assert claimed(save_file, ROOT, AGENT) == Claimed(reason, ("root", "agent"))


def test_an_abort_that_cannot_be_looked_at_aborts_every_session(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_file = chat(base)
    dropped(save_file)

    def broken(name: str, dir_fd: int | None = None) -> bool:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(claims, "lexists", broken)
    found = claimed(save_file, ROOT, AGENT)
    assert found == Claimed(
        "aborted by operator (the abort entry could not be examined: [Errno 5] Input/output error)",
        ("root", "agent"),
    )


def test_an_abort_that_is_no_regular_file_is_taken_unread(base: str) -> None:
    save_file = chat(base)
    os.mkdir(os.path.join(inbox_dir(save_file), "abort"))
    found = claimed(save_file, AGENT)
    assert found.sessions == ("agent",) and found.consumed
    assert found.reason is not None and "directory" in found.reason


def test_the_rescan_claims_every_inbox_where_an_abort_is_or_may_be(base: str) -> None:
    inboxes = {}
    for name in ("abort", "empty", "loop", "missing"):
        inboxes[name] = os.path.join(base, name + ".inbox")
    os.mkdir(inboxes["abort"])
    with open(os.path.join(inboxes["abort"], "abort"), "w"):
        pass
    os.mkdir(inboxes["empty"])
    os.symlink(inboxes["loop"], inboxes["loop"])  # a link to itself: ELOOP
    beside_a_file = os.path.join(base, "a-file", "x.inbox")
    with open(os.path.join(base, "a-file"), "w"):
        pass
    listed = [*inboxes.values(), beside_a_file]
    assert holding_abort(listed) == [inboxes["abort"], inboxes["loop"]]


def test_a_candidates_group_is_its_users_primary_group_when_not_given() -> None:
    assert claims._gid(Candidate("a", NOBODY, None)) == 65534
    assert claims._gid(Candidate("a", NOBODY, 7)) == 7
    assert claims._gid(Candidate("a", 4_242_424, None)) == 4_242_424  # no such user


def test_a_hidden_sessions_reason_names_the_inbox_as_the_operator_reads_it() -> None:
    reason = hidden_from("/srv/agents/a.inbox")
    assert reason == (
        "aborted by operator (an abort waits in '/srv/agents/a.inbox', which this"
        " session's user has made unusable for itself; not read)"
    )
    assert "\\n" in hidden_from("/srv/a\nb.inbox")  # a line break shown, not written


def test_the_layouts_here_are_what_they_claim(base: str) -> None:
    """The sticky bit and the owners really are set as the cases above build them."""
    save_file = chat(base, owner=0, chat_mode=0o777, inbox_mode=0o1777)
    st = os.stat(inbox_dir(save_file))
    assert st.st_mode & stat.S_ISVTX and st.st_uid == 0
