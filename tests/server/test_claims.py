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

import contextlib
import errno
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.errors import AbortNotTaken
from scoutd.inbox import claim as inbox_claim
from scoutd.inbox import inbox_dir, inbox_removed_dir, write_abort
from scoutd.inbox.aborted import mark
from scoutd.inbox.claim import NotSettled
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


def claimed(
    save_file: str,
    *candidates: Candidate,
    own_uid: int | None = None,
    gate: InboxGate | None = None,
    complete: bool = True,
    max_bytes: int = 1 << 20,
) -> Claimed:
    return claim_for(
        claim_abort,
        InboxGate() if gate is None else gate,
        save_file,
        candidates,
        os.geteuid() if own_uid is None else own_uid,
        max_bytes=max_bytes,
        complete=complete,
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


def test_root_and_the_daemons_own_uid_may_always_take_it(base: str) -> None:
    """The kernel checks the daemon's own rights for them, which are the caller's."""
    for session, own_uid in ((ROOT, NOBODY), (AGENT, NOBODY)):
        save_file = chat(base, owner=0, chat_mode=0o700, inbox_mode=0o700)
        dropped(save_file)
        found = claimed(save_file, session, own_uid=own_uid)
        assert found == Claimed("stop", (session.id,), consumed=True)
        shutil.rmtree(os.path.dirname(save_file))


def test_a_uid_that_is_neither_root_nor_the_daemons_is_checked(base: str) -> None:
    save_file = chat(base, owner=0, chat_mode=0o700, inbox_mode=0o700)
    path = dropped(save_file)
    assert claimed(save_file, Candidate("one", 1, 1, frozenset({1}))) == Claimed()
    assert os.path.exists(path)


def test_the_gate_records_the_take_under_the_inbox(base: str) -> None:
    """A prepare call that picks up the same inbox meanwhile learns of the take from it."""
    save_file = chat(base)
    dropped(save_file)
    gate = InboxGate()
    ticket = gate.ticket()
    assert claimed(save_file, AGENT, gate=gate).consumed
    assert gate.taken_since(inbox_dir(save_file), ticket.seq) == "stop"
    empty = InboxGate()
    ticket = empty.ticket()
    assert claimed(save_file, AGENT, gate=empty) == Claimed()  # nothing taken: nothing recorded
    assert empty.taken_since(inbox_dir(save_file), ticket.seq) is None


def test_a_long_abort_is_read_to_the_bytes_given(base: str) -> None:
    save_file = chat(base)
    path = write_abort(save_file, "stop now, budget exhausted")
    os.chown(path, 0, 0)
    found = claimed(save_file, AGENT, max_bytes=4)
    assert found.reason is not None and found.reason.startswith("stop")
    assert "budget" not in found.reason


def test_an_abort_the_caller_saw_completed_is_taken_though_still_open(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``complete``: its writer closed it or renamed it in (the watcher saw it); otherwise an
    abort still being written is not waited for here: the registry retries."""
    monkeypatch.setattr(inbox_claim, "being_written", lambda fd: True)
    save_file = chat(base)
    dropped(save_file)
    with pytest.raises(NotSettled):
        claimed(save_file, AGENT, complete=False)
    assert claimed(save_file, AGENT, complete=True) == Claimed("stop", ("agent",), consumed=True)


def test_a_symlink_swapped_into_the_resolved_path_fails_closed(base: str) -> None:
    """The claim works on the path the session's open resolved: a link found on it later
    (root's too) was swapped in, and nothing is read through it."""
    save_file = chat(base)
    elsewhere = os.path.join(base, "elsewhere")
    os.rename(os.path.dirname(save_file), elsewhere)
    os.symlink(elsewhere, os.path.dirname(save_file))
    path = dropped(os.path.join(elsewhere, "agent.chat"))
    found = claimed(save_file, ROOT, AGENT)
    assert found.sessions == ("root", "agent") and not found.consumed
    assert os.path.exists(path)


def test_a_symlink_swapped_in_fails_closed_though_no_abort_is_behind_it(base: str) -> None:
    save_file = chat(base)
    elsewhere = os.path.join(base, "elsewhere")
    os.rename(os.path.dirname(save_file), elsewhere)
    os.symlink(elsewhere, os.path.dirname(save_file))
    found = claimed(save_file, ROOT, AGENT)
    assert found.sessions == ("root", "agent") and found.reason is not None


def test_a_symlink_swapped_in_between_the_look_and_the_claim_fails_closed(base: str) -> None:
    """The claim itself works on the resolved path exactly too (the race injected at it)."""
    save_file = chat(base)
    path = dropped(save_file)
    elsewhere = os.path.join(base, "elsewhere")

    def swapped_first(save_file: str, **options: Any) -> str | None:
        os.rename(os.path.dirname(save_file), elsewhere)
        os.symlink(elsewhere, os.path.dirname(save_file))
        return claim_abort(save_file, **options)

    found = claim_for(
        swapped_first, InboxGate(), save_file, (AGENT,), 0, max_bytes=64, complete=True
    )
    assert found.sessions == ("agent",) and not found.consumed
    assert os.path.exists(
        os.path.join(elsewhere, os.path.relpath(path, os.path.dirname(save_file)))
    )


class AskedGate(InboxGate):
    """A gate that says when a thread other than the test's asks for an inbox."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()

    @contextlib.contextmanager
    def holding(self, inbox: str) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            self.asked.set()
        with super().holding(inbox):
            yield


def test_a_claim_waits_for_a_pickup_holding_the_inbox(base: str) -> None:
    """The gate's lock of the inbox is held around the claim: a prepare call's pickup of the
    same inbox and the claim never run at once."""
    save_file = chat(base)
    dropped(save_file)
    gate, released = AskedGate(), threading.Event()
    seen: list[bool] = []

    def claim(save_file: str, **options: Any) -> str | None:
        seen.append(released.is_set())
        return claim_abort(save_file, **options)

    def run() -> None:
        claim_for(claim, gate, save_file, (AGENT,), 0, max_bytes=64, complete=True)

    with gate.holding(inbox_dir(save_file)):
        worker = threading.Thread(target=run)
        worker.start()
        assert gate.asked.wait(10)  # the claim asks for the inbox the pickup holds
        released.set()
    worker.join(10)
    assert not worker.is_alive()
    assert seen == [True]  # it ran only once the pickup let the inbox go


def test_an_abort_the_claim_cannot_take_aborts_every_session(base: str) -> None:
    save_file = chat(base)
    dropped(save_file)

    def cannot(save_file: str, **options: Any) -> str | None:
        raise AbortNotTaken("aborted by operator (no marker could be written)")

    found = claim_for(cannot, InboxGate(), save_file, (ROOT, AGENT), 0, max_bytes=1, complete=True)
    assert found == Claimed("aborted by operator (no marker could be written)", ("root", "agent"))


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
    base: str, kept_out_by: str, caplog: pytest.LogCaptureFixture
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
    with caplog.at_level(logging.DEBUG, logger="scoutd.sessions"):
        assert claimed(save_file, AGENT) == Claimed()
    assert os.path.exists(path)
    left = f"abort in {inbox_dir(save_file)!r} left for its owner: no session here may take it"
    assert left in caplog.messages


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


@pytest.mark.parametrize(
    ("session", "chat_mode"),
    [(MEMBER, 0o070), (AGENT, 0o007)],
    ids=["the group's bits", "the other bits"],
)
def test_what_another_users_directory_grants_a_session_that_locked_its_own_inbox(
    base: str, session: Candidate, chat_mode: int
) -> None:
    """Another user's chat directory that grants it all by its group or other bits, and an
    inbox of its own that it locked: the session hid the abort from itself."""
    save_file = chat(base, owner=0, group=GROUP, chat_mode=chat_mode, inbox_mode=0o000)
    os.chown(inbox_dir(save_file), NOBODY, NOBODY)
    path = dropped(save_file)
    assert claimed(save_file, session) == Claimed(hidden=(session.id,))
    assert os.path.exists(path)


def test_a_session_locked_out_by_its_own_chat_directory_under_another_users_inbox(
    base: str,
) -> None:
    """Its chat directory locked, the inbox another user's (open to all, not sticky)."""
    save_file = chat(base, chat_mode=0o000, inbox_mode=0o777)
    os.chown(inbox_dir(save_file), 0, 0)
    try:
        path = dropped(save_file)
        assert claimed(save_file, AGENT) == Claimed(hidden=("agent",))
        assert os.path.exists(path)
    finally:
        os.chmod(os.path.dirname(save_file), 0o755)


def test_what_cannot_be_examined_or_is_no_directory_hides_nothing(base: str) -> None:
    missing = os.path.join(base, "missing", "agent.chat")
    assert not claims._hid_it(missing, AGENT)
    os.mkdir(os.path.join(base, "file"))
    with open(os.path.join(base, "file", "dir"), "w"):
        pass
    assert not claims._hid_it(os.path.join(base, "file", "dir", "agent.chat"), AGENT)
    # a sticky inbox of another user, its abort gone meanwhile: not this session's to hide
    save_file = chat(base, chat_mode=0o000, inbox_mode=0o1777)
    os.chown(inbox_dir(save_file), 0, 0)
    try:
        assert not claims._hid_it(save_file, AGENT)
    finally:
        os.chmod(os.path.dirname(save_file), 0o755)


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
    base: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    save_file = chat(base)
    dropped(save_file)

    def broken(name: str, dir_fd: int | None = None) -> bool:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(claims, "lexists", broken)
    with caplog.at_level(logging.ERROR, logger="scoutd.sessions"):
        found = claimed(save_file, ROOT, AGENT)
    said = f"abort entry of {save_file!r} cannot be examined (aborting): [Errno 5] Input/output"
    assert caplog.messages == [said + " error"]
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
    beside_a_file = os.path.join(base, "a-file", "x.inbox")  # no inbox can be there
    a_file = os.path.join(base, "a-file")  # an inbox that is a file: the claim fails closed
    with open(a_file, "w"):
        pass
    listed = [beside_a_file, *inboxes.values(), a_file]
    assert holding_abort(listed) == [inboxes["abort"], inboxes["loop"], a_file]


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


def test_an_aborted_chats_mark_is_read_on_the_resolved_path_exactly(base: str) -> None:
    save_file = chat(base)
    assert mark(save_file, "stop") is not None  # as the registry marks a chat it aborted
    assert claims.marked(save_file) == "stop"
    link = os.path.join(base, "link")
    os.symlink(os.path.dirname(save_file), link)  # root's: trusted elsewhere, not here
    through = claims.marked(os.path.join(link, "agent.chat"))
    assert through is not None and through != "stop"  # fails closed, unread
