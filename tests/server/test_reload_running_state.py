"""A valid reload applies at once to what is already running, old sessions included.

An operator tightens the configuration to contain a runaway agent: nothing the new
file takes away may keep working through a session, a connection or a sleeping loop
made before the reload (docs/OPERATIONS.md, "Reloading"). Real daemon processes on
real Unix sockets; every reload is a real one (``config.reload``, SIGHUP or the
file watch) and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from typing import Any

import pytest

from scoutd import protocol
from scoutd.security import PeerCred
from scoutd.server.daemon_config import Snapshot, load_daemon_config
from scoutd.server.sessions import SessionRegistry
from scoutd.watcher import FsWatcher

from ..support.daemon import Daemon, LineClient, conversation, wait_for
from ..test_server import gated_daemon, release

WAIT = 10.0  # seconds any one step may take


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, str(reply)[:400]
    result: dict[str, Any] = reply["result"]
    return result


def _code(reply: dict[str, Any]) -> int:
    assert "error" in reply, str(reply)[:400]
    code: int = reply["error"]["code"]
    return code


def _counts(c: LineClient) -> dict[str, Any]:
    counts: dict[str, Any] = _result(c.call("status"))["counts"]
    return counts


def _open(c: LineClient, save_file: str) -> str:
    session: str = _result(c.call("session.open", {"save_file": save_file}))["session"]
    return session


def _reload(c: LineClient, d: Daemon) -> int:
    """Write the harness's tables and reload them; the new generation."""
    d.write_config()
    generation: int = _result(c.call("config.reload"))["generation"]
    return generation


def _chat(d: Daemon, name: str) -> str:
    directory = os.path.join(d.dir, name)
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, "agent.chat")


def test_shrinking_allowed_roots_closes_the_sessions_left_outside() -> None:
    """Before: a session on a chat the reload left outside ``allowed_roots`` stayed
    open; its rounds were refused, but ``session.recall`` still answered from its
    stored conversation, and its inbox watches and memory stayed held (watches 2,
    session bytes unchanged). Now the reload closes it: every call of it is
    ``-32006``, a new session there ``-32003``, and the one inside goes on."""
    d = Daemon()
    outside, inside = _chat(d, "a"), _chat(d, "b")
    messages = conversation(6)
    with d, d.connect() as c:
        gone, kept = _open(c, outside), _open(c, inside)
        for session in (gone, kept):
            _result(c.call("prepare_prompt", {"session": session, "messages": messages}))
        before = _counts(c)
        assert (before["sessions"], before["watches"]) == (2, 2)
        d.daemon["allowed_roots"] = [os.path.dirname(inside)]
        assert _reload(c, d) == 2
        counts = _counts(c)
        assert (counts["sessions"], counts["watches"]) == (1, 1)
        assert counts["session_bytes"] == before["session_bytes"] // 2
        recall = c.call("session.recall", {"session": gone, "search": "failing"})
        assert _code(recall) == protocol.UNKNOWN_SESSION
        more = [{"role": "user", "content": "go on"}]
        appended = c.call("prepare_prompt", {"session": gone, "append": more})
        assert _code(appended) == protocol.UNKNOWN_SESSION
        assert _code(c.call("session.open", {"save_file": outside})) == protocol.FORBIDDEN
        _result(c.call("prepare_prompt", {"session": kept, "append": more}))
        _result(c.call("session.recall", {"session": kept, "search": "failing"}))
        assert "outside allowed_roots" in d.log()


@pytest.mark.anyio
async def test_a_session_opened_under_the_old_roots_is_refused_once_they_shrank(
    tmp_path: Any,
) -> None:
    """The race behind the sweep above: ``session.open`` checks its path under the
    generation it started with, in a worker thread; a reload that shrinks the roots
    meanwhile finds no session to close, and the open then registered it outside
    them for good (before: the open succeeded). The registry checks the roots in
    force when it registers."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    (tmp_path / "c.toml").write_text(f'[daemon]\nallowed_roots = ["{tmp_path / "b"}"]\n')
    config, roots, signum = load_daemon_config(str(tmp_path / "c.toml"))
    snap = Snapshot(config=config, generation=2, roots=roots, abort_signal=signum)

    class Owner:
        peer = PeerCred(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())

        def push(self, line: bytes) -> None:
            raise AssertionError("no notification expected")

    async with FsWatcher("poll") as watcher:
        registry = SessionRegistry(watcher, lambda: snap, released=lambda _: None)
        outside = str(tmp_path / "a" / "agent.chat")
        with pytest.raises(protocol.ProtocolError) as refused:
            await registry.open(outside, outside, None, os.getuid(), Owner())
        assert refused.value.code == protocol.FORBIDDEN
        assert (registry.sessions, registry.by_inbox) == ({}, {})
        inside = str(tmp_path / "b" / "agent.chat")
        session = await registry.open(inside, inside, None, os.getuid(), Owner())
        assert await registry.close(session.id)


def test_a_peer_rule_removed_by_a_reload_ends_its_open_connection() -> None:
    """Before: a connection admitted under ``allowed_gids = [its gid]`` kept being
    served after a reload removed the rule (``status`` answered under the new
    generation); only new connections were refused. Now its next request gets the
    ``-32003`` refusal a new connection gets, the connection is closed, and its
    sessions (watches, memory) are closed at the reload."""
    d = Daemon(daemon={"allowed_uids": [os.getuid() + 54321], "allowed_gids": [os.getgid()]})
    save_file = _chat(d, "a")
    with d, d.connect() as c:
        session = _open(c, save_file)
        _result(c.call("prepare_prompt", {"session": session, "messages": conversation(4)}))
        d.daemon["allowed_gids"] = [os.getgid() + 54321]
        assert _reload(c, d) == 2
        c.request("status")  # the next request of this connection
        refused = c.recv(WAIT)
        assert _code(refused) == protocol.FORBIDDEN
        assert refused["id"] is None  # as a new connection is refused: every call gets it
        assert c.read_line(WAIT) == b""  # closed
        # let this test's own uid in again, and look at what the daemon holds
        d.daemon["allowed_gids"] = [os.getgid()]
        d.write_config()
        d.signal(signal.SIGHUP)

        def admitted() -> bool:
            try:
                with d.connect() as probe:
                    return "result" in probe.call("status")
            except (OSError, EOFError, TimeoutError):
                return False

        wait_for(admitted, WAIT, "the peer let in again")
        with d.connect() as again:
            counts = _counts(again)
        assert (counts["sessions"], counts["watches"], counts["session_bytes"]) == (0, 0, 0)


def test_lower_per_uid_limits_hold_new_work_and_keep_the_counts_right() -> None:
    """Limits lowered below what a uid holds: what it holds stays (nothing is taken
    from a running agent), nothing new passes the new bound, and the counts come back
    to zero as the sessions close (no negative or leaked count)."""
    d = Daemon(daemon={"max_sessions_per_uid": 8})
    chats = [_chat(d, f"c{n}") for n in range(3)]
    with d, d.connect() as c:
        sessions = [_open(c, chat) for chat in chats]
        for session in sessions:
            _result(c.call("prepare_prompt", {"session": session, "messages": conversation(4)}))
        held = _counts(c)["session_bytes"]
        d.daemon["max_sessions_per_uid"] = 1
        d.daemon["max_session_bytes_per_uid"] = held // 2
        d.write_config()  # by the file watch this time
        wait_for(lambda: _result(c.call("status"))["config"]["generation"] == 2, WAIT, "reload")
        extra = _chat(d, "extra")
        assert _code(c.call("session.open", {"save_file": extra})) == protocol.TOO_LARGE
        grow = [{"role": "user", "content": "x" * 5000}]
        grown = c.call("prepare_prompt", {"session": sessions[0], "append": grow})
        assert _code(grown) == protocol.TOO_LARGE
        assert grown["error"]["data"]["key"] == "max_session_bytes_per_uid"
        assert _counts(c)["session_bytes"] == held  # the refused round changed nothing
        for session in sessions[1:]:
            _result(c.call("session.close", {"session": session}))
        assert _code(c.call("session.open", {"save_file": extra})) == protocol.TOO_LARGE
        _result(c.call("session.close", {"session": sessions[0]}))
        counts = _counts(c)
        assert (counts["sessions"], counts["session_bytes"]) == (0, 0)
        _result(c.call("session.close", {"session": _open(c, extra)}))
        counts = _counts(c)
        assert (counts["sessions"], counts["watches"], counts["session_bytes"]) == (0, 0, 0)


EPOCH_OLD = {"epoch_tool_call_threshold": 4, "epoch_full_tool_calls": 4, "epoch_size": 10}
COST_OLD = {"context_window": 20000, "compaction_trigger_share": 0.01}


@pytest.mark.parametrize(
    "old, new",
    [
        (
            {"prompt_strategies": "shorten_tools_epoch", **EPOCH_OLD},
            {"epoch_tool_call_threshold": 6, "epoch_full_tool_calls": 9, "epoch_size": 5},
        ),
        (
            {"prompt_strategies": "shorten_tools_cost_aware", **COST_OLD},
            {"context_window": 60000, "cost_full_tool_outputs": 5},
        ),
        (
            {"prompt_strategies": "shorten_tools_epoch", **EPOCH_OLD},
            {"prompt_strategies": "shorten_tools_cost_aware", **COST_OLD},
        ),
    ],
    ids=["epoch", "cost_aware", "epoch_to_cost_aware"],
)
def test_a_session_round_after_a_prompt_reload_is_prepared_whole_under_it(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    """``[prompt]`` changed between two rounds of a session (thresholds, or the
    strategy itself): the round after the reload is exactly what a call without a
    session gives for the same conversation under the new file (messages and report,
    its stable prefix included), never the old epoch or plan carried on."""
    d = Daemon(prompt=old)
    messages = conversation(60, user_every=0)
    with d, d.connect() as c:
        session = _open(c, _chat(d, "a"))
        first = _result(c.call("prepare_prompt", {"session": session, "messages": messages[:80]}))
        report = first["report"][0]
        assert report["outputs_truncated"] + report["outputs_dropped"] > 0  # it compacted
        more: dict[str, Any] = {"session": session, "append": messages[80:84]}
        _result(c.call("prepare_prompt", more))
        before = _result(c.call("prepare_prompt", {"messages": messages}))
        d.prompt.update(new)
        _reload(c, d)
        params: dict[str, Any] = {"session": session, "append": messages[84:]}
        after = _result(c.call("prepare_prompt", params))
        whole = _result(c.call("prepare_prompt", {"messages": messages}))
        assert whole["messages"] != before["messages"]  # the reload changed the answer
        assert after["messages"] == whole["messages"]
        assert after["report"] == whole["report"]


def test_each_prepare_racing_reloads_sees_one_whole_configuration() -> None:
    """Reloads back and forth between two files while clients prepare: every answer
    is exactly one file's answer, never a mix (a notice of one with the limits of
    the other), and both files are seen answering."""
    first = {"compaction_notice": "FIRST {compacted}", "max_tool_chars": 1000}
    second = {"compaction_notice": "SECOND {compacted}", "max_tool_chars": 20000}
    messages = conversation(40, user_every=5)  # the newest user turn's outputs stay whole
    d = Daemon(prompt={**first, "prompt_strategies": "shorten_tools", "full_tool_outputs": 2})
    seen: dict[str, int] = {}
    wrong: list[str] = []
    with d, d.connect() as c:
        expected = {}
        for name, table in (("second", second), ("first", first)):
            d.prompt.update(table)
            _reload(c, d)
            expected[name] = _result(c.call("prepare_prompt", {"messages": messages}))
        reports = [answer["report"][0] for answer in expected.values()]
        assert reports[0]["outputs_truncated"] != reports[1]["outputs_truncated"], reports
        stop = threading.Event()

        def client() -> None:
            with d.connect() as mine:
                while not stop.is_set():
                    answer = _result(mine.call("prepare_prompt", {"messages": messages}))
                    names = [n for n, e in expected.items() if e == answer]
                    if len(names) != 1:
                        wrong.append(str(answer)[:300])
                    else:
                        seen[names[0]] = seen.get(names[0], 0) + 1

        threads = [threading.Thread(target=client) for _ in range(3)]
        for thread in threads:
            thread.start()
        try:
            for n in range(20):
                d.prompt.update(second if n % 2 == 0 else first)
                _reload(c, d)
        finally:
            stop.set()
            for thread in threads:
                thread.join(WAIT)
    assert not wrong, wrong[:2]
    assert min(seen.get("first", 0), seen.get("second", 0)) >= 3, seen


def test_a_lowered_idle_timeout_applies_at_once() -> None:
    """Before: the idle sweep slept a quarter of the old ``session_idle_timeout``
    (at most 60 s) before it read the new one, so a reload meant to free idle
    sessions' memory at once did nothing for up to a minute (the stored
    conversation was still held 10 s later). Now a reload wakes the sweep."""
    d = Daemon(daemon={"session_idle_timeout": 3600.0})
    with d, d.connect() as c:
        session = _open(c, _chat(d, "a"))
        _result(c.call("prepare_prompt", {"session": session, "messages": conversation(4)}))
        assert _counts(c)["session_bytes"] > 0
        d.daemon["session_idle_timeout"] = 0.2
        _reload(c, d)
        wait_for(lambda: _counts(c)["session_bytes"] == 0, WAIT, "the idle sweep")


def test_a_lowered_rescan_interval_applies_at_once() -> None:
    """Before: the periodic rescan slept the whole old ``rescan_interval`` (here an
    hour) before it read the new one: no rescan for that long after a reload asked
    for one every 0.2 s. Now a reload wakes it."""
    d = Daemon(daemon={"rescan_interval": 3600.0})
    with d, d.connect() as c:
        _open(c, _chat(d, "a"))
        assert _counts(c)["rescans"] == 0
        d.daemon["rescan_interval"] = 0.2
        _reload(c, d)
        wait_for(lambda: _counts(c)["rescans"] >= 3, WAIT, "rescans at the new interval")


def test_a_raised_prepare_bound_lets_the_waiting_prepares_go_at_once() -> None:
    """Before: a prepare waiting for one of its uid's slots was woken only when a slot
    freed, so after a reload raised ``max_prepares_per_uid`` from 1 to 2 it still
    waited behind the one held at the gate (no answer in 10 s), while a request sent
    after the reload would have run at once. Now the reload wakes it."""
    d = gated_daemon(daemon={"max_prepares_per_uid": 1})
    save_file = _chat(d, "a")
    hello = [{"role": "user", "content": "hello"}]
    with d, d.connect() as held, d.connect() as waiting, d.connect() as c:
        gate = held.request("prepare_prompt", {"messages": hello, "strategies": "gate"})
        wait_for(lambda: os.path.exists(os.path.join(d.dir, "gate.started")), WAIT, "the gate")
        params = {"messages": hello, "strategies": "none", "save_file": save_file}
        queued = waiting.request("prepare_prompt", params)  # a save file: never inline
        with pytest.raises(TimeoutError):
            waiting.response(queued, timeout=0.5)  # waits for the slot the gate holds
        d.daemon["max_prepares_per_uid"] = 2
        _reload(c, d)
        try:
            _result(waiting.response(queued, timeout=WAIT))
        finally:
            release(d)
        _result(held.response(gate, timeout=WAIT))


def test_a_lowered_request_bound_applies_to_the_rest_of_a_line_being_read() -> None:
    """Before: the read loop took ``max_request_bytes`` before it waited for bytes, so
    a 700 KB line, 600 KB of it sent before a reload lowered the bound from 1 MiB to
    100 KB, was read whole under the old bound and answered. Now the bytes that come
    after the reload are read under its bound: the line is refused (``-32004`` naming
    it), the connection goes on, and no byte of the line stays counted."""
    d = Daemon(daemon={"max_request_bytes": 1 << 20})
    params = {"messages": [{"role": "user", "content": "x" * 700_000}], "strategies": "none"}
    request = {"jsonrpc": "2.0", "id": "big", "method": "prepare_prompt", "params": params}
    line = json.dumps(request).encode() + b"\n"
    with d, d.connect() as big, d.connect() as c:
        idle = _counts(c)["pending_request_bytes"]  # this status request's own line
        big.send_raw(line[:600_000])
        wait_for(lambda: _counts(c)["pending_request_bytes"] >= idle + 600_000, WAIT, "read")
        d.daemon["max_request_bytes"] = 100_000
        _reload(c, d)
        big.send_raw(line[600_000:])
        refused = big.recv(WAIT)
        assert _code(refused) == protocol.TOO_LARGE, str(refused)[:300]
        assert refused["error"]["data"] == {"limit": 100_000, "key": "max_request_bytes"}
        _result(big.call("status"))
        assert _counts(c)["pending_request_bytes"] == idle


def test_a_lowered_idle_timeout_closes_a_silent_connection_at_once() -> None:
    """A connection that stays silent is closed after ``idle_timeout``: lowered by a
    reload from an hour to 0.3 s, an idle connection opened before it closes at once:
    the reload wakes every read waiting with the old bounds."""
    d = Daemon(daemon={"idle_timeout": 3600.0})
    with d, d.connect() as silent, d.connect() as c:
        _result(silent.call("status"))
        d.daemon["idle_timeout"] = 0.3
        _reload(c, d)
        assert silent.read_line(3.0) == b""  # closed by the daemon, not a timeout here
