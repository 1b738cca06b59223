"""The session registry in this process, each path whole: what a session open and close
count and watch, the per-uid bound, idle conversations, where a file event goes, an
abort marked, pushed, logged and signalled, and a claim of a real ``abort`` file
(docs/PROTOCOL.md, sessions; docs/RELIABILITY.md, "An abort fails closed").

The daemon's own tests reach the same code through a socket; these check each count,
line and push exactly, with real files, a real watcher and a real child process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from scoutd import protocol
from scoutd.engine.incremental import SessionPrompt
from scoutd.inbox import aborted as aborted_marks
from scoutd.inbox.claim import MAX_SETTLE_WAIT
from scoutd.inbox.names import inbox_dir
from scoutd.security import PeerCred
from scoutd.server import claims, sessions
from scoutd.server.daemon_config import Snapshot, load_daemon_config
from scoutd.server.sessions import ABORT_THREADS_PER_UID, SessionRegistry
from scoutd.watcher import Batch, FsWatcher

pytestmark = pytest.mark.anyio

ME = os.getuid()


class Owner:
    """A connection: who it is and the lines pushed to it."""

    def __init__(self, uid: int = ME, gid: int = 4343) -> None:
        self.peer = PeerCred(pid=os.getpid(), uid=uid, gid=gid)
        self.pushed: list[dict[str, Any]] = []

    def push(self, line: bytes) -> None:
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        self.pushed.append(json.loads(line))


def aborted_push(session: sessions.AgentSession, reason: str) -> dict[str, Any]:
    """The notification a client reads, built by hand (docs/PROTOCOL.md)."""
    params = {"session": session.id, "save_file": session.save_file, "reason": reason}
    return {"jsonrpc": "2.0", "method": "session.aborted", "params": params}


class Registry:
    """A registry over ``root`` (its one allowed root), its released ids and its files."""

    def __init__(self, registry: SessionRegistry, root: Path, released: list[str]) -> None:
        self.registry = registry
        self.root = root
        self.released = released

    def chat(self, name: str) -> str:
        """A save file under the root (its directory made)."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return str(path)

    async def open(self, name: str, owner: Owner, **kwargs: Any) -> sessions.AgentSession:
        path = self.chat(name)
        return await self.registry.open(
            path, path, kwargs.pop("pid", None), owner.peer.uid, owner, **kwargs
        )

    async def end(self, *opened: sessions.AgentSession) -> None:
        """Close ``opened``; then every count is back at rest."""
        for session in opened:
            await self.registry.close(session.id)
        self.at_rest()

    def at_rest(self) -> None:
        """Every count back at zero once every session is closed."""
        r = self.registry
        assert (r.sessions, r.by_inbox, r._per_uid, r._chat_dirs) == ({}, {}, {}, {})
        assert (r._claim_limiters, r._claiming, r._complete, r._unsettled) == ({}, {}, set(), {})
        assert r.watcher.watched == []


def _snapshot(root: Path, daemon: str = "") -> Snapshot:
    path = root.parent / f"{root.name}.toml"
    path.write_text(f'[daemon]\nallowed_roots = ["{root}"]\n{daemon}', encoding="utf-8")
    path.chmod(0o600)
    config, roots, signum = load_daemon_config(str(path), {})
    return Snapshot(config=config, generation=1, roots=roots, abort_signal=signum)


@contextlib.asynccontextmanager
async def _registry(tmp_path: Path, daemon: str = "", run: bool = False) -> AsyncIterator[Registry]:
    root = tmp_path / "agents"
    root.mkdir()
    snap = _snapshot(root, daemon)
    released: list[str] = []
    async with FsWatcher("poll") as watcher:
        registry = SessionRegistry(watcher, lambda: snap, released=released.append)
        if not run:
            yield Registry(registry, root, released)
            return
        async with anyio.create_task_group() as tg:
            await tg.start(registry.run)
            yield Registry(registry, root, released)
            tg.cancel_scope.cancel()


@pytest.fixture
async def reg(tmp_path: Path) -> AsyncIterator[Registry]:
    async with _registry(tmp_path, "max_sessions_per_uid = 8\n") as r:
        yield r


# -- opening and closing ---------------------------------------------------------------


async def test_open_and_close_count_and_watch_each_inbox_once(
    reg: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scoutd.sessions")
    r = reg.registry
    alice = Owner()
    first = await reg.open("a/one.chat", alice, pid=4321, label="left")
    assert (first.pid, first.uid, first.gid, first.label) == (4321, ME, 4343, "left")
    assert len(first.id) == 32 and int(first.id, 16) >= 0
    assert first.inbox == inbox_dir(first.resolved)
    chat = os.path.dirname(first.inbox)
    again = await reg.open("a/one.chat", alice)  # the same chat: its watches are shared
    assert sorted(r.watcher.watched) == sorted([chat, first.inbox])
    assert r.by_inbox == {first.inbox: {first.id, again.id}}
    assert (r._per_uid, r._chat_dirs) == ({ME: 2}, {chat: 1})
    said = f"session {first.id} opened for {first.resolved!r} (pid 4321, uid {ME})"
    assert said in [rec.getMessage() for rec in caplog.records]

    assert await r.close(again.id) and not await r.close(again.id)
    assert again.closed and reg.released == [again.id]
    assert (r._per_uid, r._chat_dirs) == ({ME: 1}, {chat: 1})
    assert list(r._claim_limiters) == [ME]  # the uid still holds a session
    assert sorted(r.watcher.watched) == sorted([chat, first.inbox])
    assert await r.close(first.id)
    assert f"session {first.id} closed" in [rec.getMessage() for rec in caplog.records]
    reg.at_rest()


async def test_inboxes_in_one_chat_directory_share_its_watch(reg: Registry) -> None:
    r = reg.registry
    owner = Owner()
    one, two, three = [await reg.open(f"a/{n}.chat", owner) for n in ("one", "two", "three")]
    chat = os.path.dirname(one.inbox)
    assert r._chat_dirs == {chat: 3}
    assert sorted(r.watcher.watched) == sorted([chat, one.inbox, two.inbox, three.inbox])
    assert await r.close(two.id)
    assert r._chat_dirs == {chat: 2}
    assert await r.close(three.id)
    assert r._chat_dirs == {chat: 1}
    assert sorted(r.watcher.watched) == sorted([chat, one.inbox])
    assert await r.close(one.id)
    reg.at_rest()


@pytest.mark.parametrize("limit", [1, 2])
async def test_the_sessions_of_a_uid_stop_at_its_bound(tmp_path: Path, limit: int) -> None:
    async with _registry(tmp_path, f"max_sessions_per_uid = {limit}\n") as reg:
        r = reg.registry
        owner = Owner()
        opened = [await reg.open(f"a/{i}.chat", owner) for i in range(limit)]
        with pytest.raises(protocol.ProtocolError) as refused:
            await reg.registry.open(
                reg.chat("a/x.chat"), reg.chat("a/x.chat"), None, ME, owner, request_id=7
            )
        error = refused.value
        said = f"too many sessions for uid {ME} (max_sessions_per_uid = {limit})"
        assert (error.code, error.message, error.id) == (protocol.TOO_LARGE, said, 7)
        assert error.data == protocol.TooLargeData(limit=limit, key="max_sessions_per_uid")
        assert r._per_uid == {ME: limit}
        await r.close(opened[0].id)
        opened[0] = await reg.open("a/y.chat", owner)  # room again
        for session in opened:
            await r.close(session.id)
        reg.at_rest()


async def test_a_peer_the_generation_refuses_is_told_with_its_request_id(
    tmp_path: Path,
) -> None:
    async with _registry(tmp_path, "allowed_uids = [5]\n") as reg:
        owner = Owner(uid=6, gid=6)
        with pytest.raises(protocol.ProtocolError) as refused:
            await reg.registry.open(
                reg.chat("a/x.chat"), reg.chat("a/x.chat"), None, 6, owner, request_id="r9"
            )
        assert (refused.value.code, refused.value.id) == (protocol.FORBIDDEN, "r9")
        reg.at_rest()


async def test_close_owner_closes_only_that_connections_sessions(reg: Registry) -> None:
    r = reg.registry
    mine, theirs = Owner(), Owner()
    a = await reg.open("a/one.chat", mine)
    b = await reg.open("b/two.chat", theirs)
    await r.close_owner(mine)
    assert list(r.sessions) == [b.id] and a.closed and not b.closed
    await r.close_owner(theirs)
    reg.at_rest()


async def test_a_session_is_found_by_its_uid_or_the_daemons_own(reg: Registry) -> None:
    r = reg.registry
    session = await reg.open("a/one.chat", Owner())
    assert r.get(session.id, ME, ME + 9) is session
    assert r.get(session.id, ME + 9, ME + 9) is session  # the daemon's own uid
    assert r.get(session.id, ME + 1, ME + 9) is None
    assert r.get("0" * 32, ME, ME) is None
    await r.close(session.id)


# -- idle conversations ------------------------------------------------------------------


def _holding(session: sessions.AgentSession, used: float) -> None:
    """Give ``session`` a stored conversation, last used at ``used`` (monotonic)."""
    session.prompt = SessionPrompt(format="openai-chat")
    session.prompt.extend([{"role": "user", "content": "hi"}])
    session.shown = ({"role": "user", "content": "hi"},)
    session.last_used = used


async def test_only_idle_unlocked_conversations_are_forgotten(
    reg: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scoutd.sessions")
    r = reg.registry
    owner = Owner()
    old, busy, recent, empty = [await reg.open(f"a/{i}.chat", owner) for i in range(4)]
    now = time.monotonic()
    _holding(old, now - 100)
    _holding(busy, now - 100)
    _holding(recent, now - 1)
    empty.last_used = now - 100
    encoder = old.encoder
    async with busy.lock:
        assert r.forget_idle(50) == 1
    assert (old.forgotten, busy.forgotten, recent.forgotten, empty.forgotten) == (
        True,
        False,
        False,
        False,
    )
    assert old.prompt.messages == [] and old.prompt.format == "openai-chat"
    assert old.shown == () and old.encoder is not encoder
    assert reg.released == [old.id]
    _holding(recent, now - 100)
    assert r.forget_idle(50) == 2  # busy, free now, and recent, idle now: both counted
    assert reg.released == [old.id, busy.id, recent.id]
    assert r.forget_idle(50) == 0
    dropped = [line for line in _lines(caplog) if line.startswith("dropped")]
    assert dropped == [
        "dropped the stored conversation of 1 idle session(s)",
        "dropped the stored conversation of 2 idle session(s)",
    ]
    await reg.end(old, busy, recent, empty)


# -- aborts ------------------------------------------------------------------------------


WAIT = 10.0  # seconds: the bound of every wait


async def _until(check: Any, what: str) -> None:
    """Wait (bounded) until ``check()`` is true: state no event announces."""
    try:
        with anyio.fail_after(WAIT):
            while not check():  # noqa: ASYNC110
                await anyio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"waited {WAIT} s for {what}")


def _drop_abort(inbox: str, text: str) -> str:
    """An operator's ``abort`` file, written whole; its path."""
    os.mkdir(inbox)
    path = os.path.join(inbox, "abort")
    Path(path).write_text(text, encoding="utf-8")
    return path


def _listing(directory: str) -> list[str]:
    return [os.path.join(directory, name) for name in os.listdir(directory)]


def _sleeper() -> subprocess.Popen[bytes]:
    """A child process of this uid that waits to be signalled."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _lines(caplog: pytest.LogCaptureFixture, logger: str = "scoutd.sessions") -> list[str]:
    return [rec.getMessage() for rec in caplog.records if rec.name == logger]


async def test_an_abort_file_is_claimed_once_for_its_inboxs_sessions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scoutd.sessions")
    async with _registry(tmp_path, run=True) as reg:
        r = reg.registry
        first, second, elsewhere = Owner(), Owner(), Owner()
        a = await reg.open("a/one.chat", first)
        b = await reg.open("a/one.chat", second)
        c = await reg.open("b/two.chat", elsewhere)
        abort = _drop_abort(a.inbox, "stop: the tests fail\n")
        await r.handle_batch(Batch(paths={abort}, overflow=False, complete={abort}))
        await _until(lambda: a.aborted and b.aborted, "the claim")
        reason = "stop: the tests fail"
        assert (a.aborted, b.aborted, c.aborted) == (reason, reason, None)
        assert first.pushed == [aborted_push(a, reason)]
        assert second.pushed == [aborted_push(b, reason)]
        assert elsewhere.pushed == [] and abort not in _listing(a.inbox)
        assert r.aborts == 1
        ids = sorted([a.id, b.id])
        said = f"abort consumed for {a.inbox!r} (2 session(s)): {reason!r}"
        assert said in _lines(caplog)
        assert ids == sorted(r.by_inbox[a.inbox])
        # the session knows; a session-less call learns it once
        assert await r.pending_abort(a, a.inbox, a.resolved) == reason
        assert await r.pending_abort(c, c.inbox, c.resolved) is None
        assert await r.pending_abort(None, a.inbox, a.resolved) == reason
        assert await r.pending_abort(None, a.inbox, a.resolved) is None
        assert await r.pending_abort(None, None, None) is None
        r.abort(a.inbox, reason, claimed_by_watcher=True, consumed=False)  # kept, then lifted:
        assert aborted_marks.clear(a.resolved).still is None
        assert await r.pending_abort(None, a.inbox, a.resolved) is None  # a cleared chat
        r.abort(a.inbox, reason, claimed_by_watcher=True, consumed=False)
        assert await r.pending_abort(None, a.inbox, None) == reason  # no chat to look at
        aborted_marks.mark(a.resolved, reason, exact=True)
        # a session opened later on the chat is aborted at once, without a count
        late_owner = Owner()
        late = await reg.open("a/one.chat", late_owner)
        assert late.aborted == reason and late_owner.pushed == [aborted_push(late, reason)]
        assert f"session {late.id} opened on an aborted chat: {reason!r}" in _lines(caplog)
        assert r.aborts == 1
        for session in (a, b, c, late):
            await r.close(session.id)
        await _until(lambda: not r._claiming, "the claims the opens started to end")
        reg.at_rest()


async def test_an_abort_without_a_file_is_logged_apart_and_not_counted(
    reg: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scoutd.sessions")
    r = reg.registry
    owners = [Owner(), Owner()]
    one, two = [await reg.open("a/one.chat", owner) for owner in owners]
    r.abort(one.inbox, "first", claimed_by_watcher=False, consumed=False, only=[one.id])
    assert (one.aborted, two.aborted, r.aborts) == ("first", None, 0)
    assert owners[0].pushed == [aborted_push(one, "first")] and owners[1].pushed == []
    said = f"aborted without consuming an abort for {one.inbox!r} (1 session(s)): 'first'"
    assert _lines(caplog)[-1] == said
    assert await r.pending_abort(None, one.inbox, None) is None  # not the watcher's
    r.abort(one.inbox, "second", claimed_by_watcher=True)
    assert (one.aborted, two.aborted, r.aborts) == ("second", "second", 1)
    said = f"abort consumed for {one.inbox!r} (2 session(s)): 'second'"
    assert _lines(caplog)[-1] == said
    assert await r.pending_abort(None, one.inbox, None) == "second"
    r.abort(one.inbox, "third", claimed_by_watcher=False)
    assert r.aborts == 2
    await reg.end(one, two)


@pytest.mark.parametrize("abort_signal", ["USR1", None])
async def test_the_abort_signal_reaches_the_sessions_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, abort_signal: str | None
) -> None:
    caplog.set_level(logging.INFO, logger="scoutd.sessions")
    daemon = f'abort_signal = "{abort_signal}"\n' if abort_signal else ""
    async with _registry(tmp_path, daemon) as reg:
        r = reg.registry
        with _sleeper() as child:
            try:
                with_pid = await reg.open("a/one.chat", Owner(), pid=child.pid)
                without = await reg.open("a/one.chat", Owner())
                r.abort(with_pid.inbox, "stop", claimed_by_watcher=False)
                sent = [line for line in _lines(caplog) if line.startswith("sent ")]
                if abort_signal:
                    assert child.wait(10) == -signal.SIGUSR1
                    assert sent == [f"sent SIGUSR1 to pid {child.pid} (session {with_pid.id})"]
                else:
                    assert child.poll() is None and sent == []
            finally:
                child.kill()
        await reg.end(with_pid, without)


# -- where a file event goes ---------------------------------------------------------------


async def test_each_changed_path_claims_the_inboxes_it_concerns(
    reg: Registry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    r = reg.registry
    owner = Owner()
    one, two, other = [await reg.open(n, owner) for n in ("a/1.chat", "a/2.chat", "b/3.chat")]
    claimed: list[str] = []
    rescans: list[int] = []
    monkeypatch.setattr(r, "_spawn_claim", claimed.append)

    async def rescan() -> None:
        rescans.append(1)

    monkeypatch.setattr(r, "rescan", rescan)

    async def batch(
        *paths: str, complete: tuple[str, ...] = (), overflow: bool = False
    ) -> list[str]:
        claimed.clear()
        await r.handle_batch(Batch(paths=set(paths), overflow=overflow, complete=set(complete)))
        return sorted(claimed)

    chat_a = os.path.dirname(one.inbox)
    assert await batch(one.inbox, other.inbox) == sorted([one.inbox, other.inbox])
    assert await batch(chat_a) == sorted([one.inbox, two.inbox])
    assert await batch(chat_a, os.path.dirname(other.inbox)) == sorted(
        [one.inbox, two.inbox, other.inbox]
    )
    abort_one, abort_two = (os.path.join(s.inbox, "abort") for s in (one, two))
    assert await batch(abort_one, abort_two, complete=(abort_two,)) == sorted(
        [one.inbox, two.inbox]
    )
    assert r._complete == {two.inbox}  # no claim ran: the close drops it
    unrelated = (
        os.path.join(one.inbox, "notice.txt"),
        os.path.join(str(reg.root), "elsewhere.inbox", "abort"),
        str(reg.root),
    )
    assert await batch(*unrelated) == []
    caplog.set_level(logging.WARNING, logger="scoutd.sessions")
    assert await batch(one.inbox, overflow=True) == [] and rescans == [1]
    assert _lines(caplog) == ["file events were lost; rechecking every watched inbox"]
    monkeypatch.undo()
    await reg.end(one, two, other)


# -- a claim, with the look at the inbox replaced ------------------------------------------


class FakeClaims:
    """Stands for ``claims.claim_for``: records each call, answers from ``answers``
    (an exception is raised), and holds the first call until ``release`` is set."""

    def __init__(self, *answers: claims.Claimed | BaseException) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.entered = anyio.Event()
        self.release: threading.Event | None = None

    def __call__(
        self,
        claim: Any,
        gate: Any,
        save_file: str,
        candidates: Any,
        own_uid: int,
        *,
        max_bytes: int,
        complete: bool,
    ) -> claims.Claimed:
        self.calls.append(
            {
                "save_file": save_file,
                "candidates": list(candidates),
                "own_uid": own_uid,
                "max_bytes": max_bytes,
                "complete": complete,
            }
        )
        if self.release is not None and len(self.calls) == 1:
            anyio.from_thread.run_sync(self.entered.set)
            assert self.release.wait(10)
        answer = self.answers.pop(0) if self.answers else claims.Claimed()
        if isinstance(answer, BaseException):
            raise answer
        return answer


@contextlib.asynccontextmanager
async def _claim_held(
    r: SessionRegistry, inbox: str, fake: FakeClaims, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """Inside: a claim of ``inbox`` runs, held in its look at the inbox; it ends after."""
    fake.release = threading.Event()
    monkeypatch.setattr(sessions, "claim_for", fake)
    async with anyio.create_task_group() as tg:
        tg.start_soon(r.claim, inbox)
        await fake.entered.wait()
        yield
        fake.release.set()


async def test_a_claim_asks_for_its_sessions_and_aborts_only_those_it_may(
    reg: Registry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scoutd.sessions")
    r = reg.registry
    alice, carol = Owner(gid=11), Owner(uid=ME, gid=12)
    carol.peer = PeerCred(pid=1, uid=ME, gid=12, groups=frozenset({12, 13}))
    a = await reg.open("a/one.chat", alice)
    c = await reg.open("a/one.chat", carol)
    fake = FakeClaims(claims.Claimed(reason="go", sessions=(a.id,), consumed=True))
    monkeypatch.setattr(sessions, "claim_for", fake)
    await r.claim(a.inbox)
    (call,) = fake.calls
    expected = sorted(
        [claims.Candidate(a.id, ME, 11, None), claims.Candidate(c.id, ME, 12, frozenset({12, 13}))]
    )
    assert call == {
        "save_file": a.resolved,
        "candidates": expected,
        "own_uid": ME,
        "max_bytes": r._snapshot().config.prompt.inbox_max_bytes,
        "complete": False,
    }
    assert (a.aborted, c.aborted, r.aborts) == ("go", None, 1)
    assert await r.pending_abort(c, c.inbox, c.resolved) is None  # not c's: kept
    assert await r.pending_abort(None, a.inbox, None) == "go"  # the watcher's claim
    assert r._claiming == {}
    await reg.end(a, c)


async def test_sessions_opened_while_a_claim_ran_are_aborted_with_it(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = reg.registry
    first = await reg.open("a/one.chat", Owner())
    fake = FakeClaims(claims.Claimed(reason="go", sessions=(first.id,), consumed=True))
    async with _claim_held(r, first.inbox, fake, monkeypatch):
        late = await reg.open("a/one.chat", Owner())  # read no marker: none written yet
        await r.claim(first.inbox)  # folded into one more attempt after this one
        await r.claim(first.inbox)
    assert (first.aborted, late.aborted, r.aborts) == ("go", "go", 1)
    assert len(fake.calls) == 2  # the two asked meanwhile: one more
    assert [c.id for c in fake.calls[1]["candidates"]] == sorted([first.id, late.id])
    await reg.end(first, late)


async def test_a_claim_that_takes_nothing_fails_its_sessions_closed(
    reg: Registry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scoutd.sessions")
    r = reg.registry
    one, two, three = [await reg.open("a/one.chat", Owner()) for _ in range(3)]
    inbox = one.inbox
    fake = FakeClaims(
        claims.Claimed(reason="unusable", sessions=(one.id, two.id)),
        claims.Claimed(hidden=(three.id,)),
        claims.Claimed(reason="again", sessions=(one.id, two.id, three.id)),
    )
    monkeypatch.setattr(sessions, "claim_for", fake)
    await r.claim(inbox)
    assert (one.aborted, two.aborted, three.aborted, r.aborts) == ("unusable",) * 2 + (None, 0)
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert errors == [f"inbox {inbox!r} fails closed for 2 session(s): 'unusable'"]
    assert await r.pending_abort(None, inbox, None) is None  # nothing was consumed
    await r.claim(inbox)
    hidden = claims.hidden_from(inbox)
    assert three.aborted == hidden
    await r.claim(inbox)  # all aborted already: none afresh, nothing logged
    assert (one.aborted, three.aborted) == ("unusable", hidden)
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert errors[1:] == [f"inbox {inbox!r} fails closed for 1 session(s): {hidden!r}"]
    await reg.end(one, two, three)


async def test_a_failing_claim_is_logged_and_the_next_one_runs(
    reg: Registry, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    r = reg.registry
    session = await reg.open("a/one.chat", Owner())
    fake = FakeClaims(
        RuntimeError("disk on fire"),
        claims.Claimed(reason="go", consumed=True, sessions=(session.id,)),
    )
    monkeypatch.setattr(sessions, "claim_for", fake)
    await r.claim(session.inbox)
    (failed,) = [rec for rec in caplog.records if rec.levelno == logging.ERROR]
    assert failed.getMessage() == f"claiming the abort file of {session.inbox} failed"
    assert failed.exc_info is not None and session.aborted is None and r._claiming == {}
    await r.claim(session.inbox)
    assert session.aborted == "go"
    await r.close(session.id)
    reg.at_rest()


async def test_an_abort_still_being_written_is_claimed_again_then_taken_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scoutd.inbox import claim as inbox_claim

    monkeypatch.setattr(inbox_claim, "SETTLE_TIME", 0.01)
    async with _registry(tmp_path) as reg:
        r = reg.registry
        session = await reg.open("a/one.chat", Owner())  # before run(): it claims nothing
        fake = FakeClaims(inbox_claim.NotSettled(), claims.Claimed())
        monkeypatch.setattr(sessions, "claim_for", fake)
        async with anyio.create_task_group() as tg:
            await tg.start(r.run)
            started = time.monotonic()
            await r.claim(session.inbox)
            assert started <= r._unsettled[session.inbox] <= time.monotonic()
            await _until(lambda: session.inbox not in r._unsettled, "the claim after settling")
            tg.cancel_scope.cancel()
        assert len(fake.calls) == 2
        # still changing after MAX_SETTLE_WAIT: the next claim takes it as it is
        assert not r._settle_expired(session.inbox)
        r._unsettled[session.inbox] = time.monotonic() - MAX_SETTLE_WAIT
        assert r._settle_expired(session.inbox)
        r._unsettled[session.inbox] += 60
        assert not r._settle_expired(session.inbox)
        r._unsettled[session.inbox] -= 60
        await r.claim(session.inbox)
        assert [call["complete"] for call in fake.calls] == [False, False, True]
        assert session.inbox not in r._unsettled
        fake.answers.append(inbox_claim.NotSettled())  # left unsettled: the close drops it
        await r.claim(session.inbox)
        assert session.inbox in r._unsettled
        await r.close(session.id)
        reg.at_rest()


async def test_each_uid_claims_on_threads_of_its_own(reg: Registry) -> None:
    r = reg.registry
    mine = r._claim_limiter(ME)
    assert r._claim_limiter(ME) is mine and mine.total_tokens == ABORT_THREADS_PER_UID
    theirs = r._claim_limiter(ME + 1)
    assert theirs is not mine and theirs.total_tokens == ABORT_THREADS_PER_UID
    r._claim_limiters.clear()


async def test_the_periodic_rescan_counts_and_survives_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with _registry(tmp_path, "rescan_interval = 0.01\n") as reg:
        r = reg.registry
        looked: list[int] = []

        async def rescan() -> None:
            looked.append(1)
            if len(looked) == 1:
                raise RuntimeError("rescan broke")

        monkeypatch.setattr(r, "rescan", rescan)
        assert r.rescans == 0
        async with anyio.create_task_group() as tg:
            await tg.start(r.run)
            await _until(lambda: r.rescans >= 3, "three rescans")
            tg.cancel_scope.cancel()
        assert r.rescans == len(looked) and r._tg is None
        (failed,) = [rec for rec in caplog.records if rec.levelno == logging.ERROR]
        assert failed.getMessage() == "rescan of watched inboxes failed"


async def test_a_complete_abort_is_taken_without_settling_once(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = reg.registry
    session = await reg.open("a/one.chat", Owner())
    abort = os.path.join(session.inbox, "abort")
    await r.handle_batch(
        Batch(paths={abort}, overflow=False, complete={abort})
    )  # no run(): no claim
    fake = FakeClaims()
    monkeypatch.setattr(sessions, "claim_for", fake)
    await r.claim(session.inbox)
    await r.claim(session.inbox)  # a later look waits for a changing file again
    assert [call["complete"] for call in fake.calls] == [True, False]
    await r.close(session.id)
    reg.at_rest()


async def test_chats_that_share_an_inbox_are_claimed_for_the_first_sessions_file(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``a.chat`` and ``a.json`` have one inbox, ``a.inbox``: the look goes through the
    save file of the session first by id (each answer names the chat it read)."""
    r = reg.registry
    one = await reg.open("a/agent.chat", Owner())
    two = await reg.open("a/agent.json", Owner())
    assert one.inbox == two.inbox and one.resolved != two.resolved
    fake = FakeClaims()
    monkeypatch.setattr(sessions, "claim_for", fake)
    await r.claim(one.inbox)
    first = min((one, two), key=lambda s: s.id)
    assert [call["save_file"] for call in fake.calls] == [first.resolved]
    await reg.end(one, two)


async def test_a_claim_whose_sessions_closed_meanwhile_still_counts_its_abort(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = reg.registry
    session = await reg.open("a/one.chat", Owner())
    fake = FakeClaims(claims.Claimed(reason="go", sessions=(session.id,), consumed=True))
    async with _claim_held(r, session.inbox, fake, monkeypatch):
        await r.close(session.id)  # the agent went away while its abort was taken
    assert r.aborts == 1 and session.aborted is None and r._claiming == {}
    assert await r.pending_abort(None, session.inbox, None) == "go"  # for its next call
    reg.at_rest()


async def test_a_uids_claims_run_two_at_a_time_on_threads_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One user's slow inboxes hold up only that user's claims."""
    daemon = f"max_sessions_per_uid = 8\nallowed_uids = [{ME}, {ME + 1}]\n"
    async with _registry(tmp_path, daemon) as reg:
        r = reg.registry
        mine = [await reg.open(f"a/{i}.chat", Owner()) for i in range(ABORT_THREADS_PER_UID + 1)]
        theirs = await reg.open("b/x.chat", Owner(uid=ME + 1, gid=ME + 1))
        held = threading.Event()
        inside: list[str] = []

        def slow(
            claim: Any, gate: Any, save_file: str, *args: Any, **kwargs: Any
        ) -> claims.Claimed:
            inside.append(save_file)
            if save_file != theirs.resolved:
                assert held.wait(WAIT)
            return claims.Claimed()

        monkeypatch.setattr(sessions, "claim_for", slow)
        limiter = r._claim_limiter(ME)
        async with anyio.create_task_group() as tg:
            for session in mine:
                tg.start_soon(r.claim, session.inbox)
            await _until(lambda: limiter.statistics().tasks_waiting == 1, "a third claim waiting")
            assert limiter.borrowed_tokens == ABORT_THREADS_PER_UID
            assert len(inside) == ABORT_THREADS_PER_UID
            await r.claim(theirs.inbox)  # not held up by them
            assert inside[-1] == theirs.resolved
            held.set()
        assert len(inside) == len(mine) + 1 and limiter.borrowed_tokens == 0
        await reg.end(*mine, theirs)


async def test_rescans_look_at_the_inboxes_one_at_a_time(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a thread of their own: a second rescan (events lost meanwhile) waits."""
    r = reg.registry
    session = await reg.open("a/one.chat", Owner())
    held = threading.Event()
    looks: list[list[str]] = []

    def slow(inboxes: list[str]) -> list[str]:
        looks.append(list(inboxes))
        assert held.wait(WAIT)
        return []

    monkeypatch.setattr(sessions, "holding_abort", slow)
    async with anyio.create_task_group() as tg:
        tg.start_soon(r.rescan)
        tg.start_soon(r.handle_batch, Batch(paths=set(), overflow=True, complete=set()))
        limiter = r._rescan_limiter
        await _until(lambda: limiter.statistics().tasks_waiting == 1, "the second rescan waiting")
        assert limiter.borrowed_tokens == 1 and looks == [[session.inbox]]
        held.set()
    assert looks == [[session.inbox]] * 2
    await r.close(session.id)
    reg.at_rest()
