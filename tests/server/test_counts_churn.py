"""The daemon's counts return to what it really holds, whatever its clients do.

After sessions open, fail, close and lose their connections at any step, every
count is back where an independent tally puts it: ``status`` and ``metrics``,
the quotas' totals, the session registry's books and the watcher's references
on the inbox directories (a reference left behind keeps an inotify watch for the
daemon's life; one dropped twice stops watching a directory another session, or
the configuration file, still needs). In-process daemon on a real socket: the
internal books are read on its event loop (:meth:`InProcessDaemon.call`).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from scoutd.engine.held import held_bytes
from scoutd.engine.incremental import json_size
from scoutd.testing.figures import inotify_usage

from ..support.daemon import InProcessDaemon, LineClient, wait_for
from .test_metrics import parse_exposition

# An answer far larger than a Unix socket's buffer: its write waits for the client.
BIG = [{"role": "user", "content": "x" * 4_000_000}]


def _turns(count: int, text: str = "t") -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{text} {i}"} for i in range(count)]


def _held(messages: list[dict[str, Any]]) -> int:
    return held_bytes(messages, json_size(messages))


def _refs(d: InProcessDaemon) -> dict[str, int]:
    """The watcher's references, per directory."""
    watcher = d.server.watcher
    found: dict[str, int] = d.call(lambda: {k: w.refs for k, w in watcher._watches.items()})
    return found


def _books(d: InProcessDaemon) -> dict[str, Any]:
    """What the quotas, the registry and the shared counts hold now (on the loop)."""

    def read() -> dict[str, Any]:
        server = d.server
        quotas, registry, shared = server.quotas, server.registry, server.shared
        return {
            "held": quotas.held,
            "held_by_uid": sum(quotas.held_by_uid.values()),
            "held_sessions": sum(held for _, held in quotas._sessions.values()),
            "held_ids": set(quotas._sessions),
            "computing": dict(quotas._computing),
            "waiting": dict(quotas.waiting),
            "queued": quotas.queued,
            "queued_by_uid": dict(quotas.queued_by_uid),
            "request_slots": len(quotas._requests),
            "in_flight": shared.in_flight,
            "connections_by_uid": dict(shared.connections_by_uid),
            "sessions": set(registry.sessions),
            "per_uid": dict(registry._per_uid),
            "by_inbox": dict(registry.by_inbox),
            "chat_dirs": dict(registry._chat_dirs),
        }

    books: dict[str, Any] = d.call(read)
    return books


@contextmanager
def _watcher_busy(d: InProcessDaemon) -> Iterator[None]:
    """Hold the watcher's lock, as another session's open does while it arms a watch
    (thread round trips): a session opened or closed meanwhile waits there."""
    watcher, held, go = d.server.watcher, threading.Event(), []

    async def hold() -> None:
        go.append(anyio.Event())
        async with watcher._lock:
            held.set()
            with anyio.fail_after(10):
                await go[0].wait()

    future = d._portal.start_task_soon(hold)
    assert held.wait(5)
    try:
        yield
    finally:
        d.call(go[0].set)
        future.result(10)


def _drop_mid_answer(d: InProcessDaemon, client: LineClient) -> None:
    """Have the daemon drop ``client``'s connection: an answer it does not read is
    stuck in its write when the client goes, and the write's failure closes it."""
    client.request("prepare_prompt", {"messages": BIG, "strategies": "none"})
    wait_for(lambda: d.status()["counts"]["queued_response_bytes"] > 0, 10, "the answer stuck")
    client.close()


def _gone(d: InProcessDaemon, connections: int) -> None:
    """Wait until ``connections`` are left open, read on the loop (``status`` would
    open one more)."""
    metrics = d.server.metrics
    wait_for(lambda: d.call(lambda: metrics.connections) == connections, 10, "connections")


def test_a_close_cut_short_by_a_dropped_connection_unwatches_the_inbox() -> None:
    """A ``session.close`` that its connection's end cancels while it waits for the
    watcher still drops the session's watches: the session is gone from the
    registry at once, and nothing else would drop them (they stayed for the
    daemon's life, one inotify watch each)."""
    with InProcessDaemon() as d:
        os.mkdir(os.path.join(d.dir, "a.inbox"))  # a watch of its own in the kernel
        base, kernel = _refs(d), inotify_usage(os.getpid())[1]
        client = d.connect()
        save_file = os.path.join(d.dir, "a.chat")
        session = client.call("session.open", {"save_file": save_file})["result"]["session"]
        assert inotify_usage(os.getpid())[1] == kernel + 1
        with _watcher_busy(d):
            client.request("session.close", {"session": session})
            wait_for(lambda: not _books(d)["sessions"], 10, "the close to begin")
            _drop_mid_answer(d, client)
            time.sleep(0.05)  # the connection's tasks are cancelled meanwhile
        _gone(d, 0)
        assert _refs(d) == base
        assert inotify_usage(os.getpid())[1] == kernel


def test_an_open_cut_short_leaves_the_watches_others_share() -> None:
    """A ``session.open`` cancelled while it waits for the watcher takes the watches
    its close will drop: it dropped the chat directory's reference of another
    session, and of the configuration file beside it, whose edits the daemon then
    stopped noticing once that session closed."""
    with InProcessDaemon() as d:
        base = _refs(d)
        assert base == {d.dir: 1}  # the configuration file's directory, also the chats'
        first = d.connect()
        first.call("session.open", {"save_file": os.path.join(d.dir, "a.chat")})
        opened = _refs(d)
        second = d.connect()
        with _watcher_busy(d):
            second.request("session.open", {"save_file": os.path.join(d.dir, "b.chat")})
            wait_for(lambda: len(_books(d)["sessions"]) == 2, 10, "the open to register")
            _drop_mid_answer(d, second)
            time.sleep(0.05)
        _gone(d, 1)
        assert _refs(d) == opened
        first.close()
        _gone(d, 0)
        assert _refs(d) == base
        d.daemon["idle_timeout"] = 123.0  # the configuration file is still watched
        d.write_config()
        wait_for(lambda: d.status()["config"]["generation"] == 2, 5, "the edit to be reloaded")


def _churn(d: InProcessDaemon, seed: int) -> None:
    """One client's life, drawn from ``seed``: connections that open sessions (some
    with a conversation, some too large), prepare, close, and end at any step,
    some while an answer is still being written to them."""
    rnd = random.Random(seed)
    for _ in range(8):
        client = d.connect()
        opened: list[str] = []
        for _ in range(rnd.randint(1, 3)):
            params: dict[str, Any] = {
                "save_file": os.path.join(d.dir, f"c{rnd.randint(0, 3)}.chat")
            }
            if rnd.random() < 0.6:
                params["messages"] = _turns(rnd.choice((5, 40, 400)))  # 400: too large
            rid = client.request("session.open", params)
            if rnd.random() < 0.3:  # an answer the client may never read
                client.request("prepare_prompt", {"messages": BIG, "strategies": "none"})
            if rnd.random() < 0.2:
                break  # gone before the answer
            reply = client.response(rid, timeout=10)
            if "result" in reply:
                opened.append(reply["result"]["session"])
        for session in opened:
            if rnd.random() < 0.6:
                params = {"session": session, "messages": _turns(rnd.choice((3, 30, 400)))}
                client.request("prepare_prompt", params)
            if rnd.random() < 0.5:
                client.request("session.close", {"session": session})
        client.close()


def test_every_count_returns_to_nothing_after_churn() -> None:
    """Four clients churn at once; then, with every connection gone, every count
    is back to nothing: no session, byte, slot or watch is left counted."""
    limits = {"max_session_bytes": _held(_turns(100)), "max_sessions_per_uid": 5}
    with InProcessDaemon(daemon=limits) as d:
        base = _refs(d)
        failures: list[BaseException] = []

        def run(seed: int) -> None:
            try:
                _churn(d, seed)
            except BaseException as exc:  # reported below, in the test's thread
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert failures == [] and not any(thread.is_alive() for thread in threads)
        # A connection its client closed at once may wait in the listen queue: one more,
        # answered, comes after every earlier one (accepted in order), then all end.
        with d.connect() as last:
            last.call("status")
        _gone(d, 0)
        books = _books(d)
        assert books == {
            "held": 0,
            "held_by_uid": 0,
            "held_sessions": 0,
            "held_ids": set(),
            "computing": {},
            "waiting": {},
            "queued": 0,
            "queued_by_uid": {},
            "request_slots": 0,
            "in_flight": 0,
            "connections_by_uid": {},
            "sessions": set(),
            "per_uid": {},
            "by_inbox": {},
            "chat_dirs": {},
        }
        assert _refs(d) == base
        with d.connect() as c:
            counts = c.call("status")["result"]["counts"]
            samples = parse_exposition(c.call("metrics")["result"]["text"])
        assert (counts["sessions"], counts["watches"], counts["session_bytes"]) == (0, 0, 0)
        assert counts["queued_response_bytes"] == 0
        assert samples["scoutd_sessions{}"] == 0 and samples["scoutd_watched_inboxes{}"] == 0
        assert samples["scoutd_connections{}"] == 1  # the one asking


def _opens(client: LineClient) -> float:
    samples = parse_exposition(client.call("metrics")["result"]["text"])
    return samples["scoutd_sessions_opened_total{}"]


def test_sessions_opened_counts_only_the_opens_that_succeeded() -> None:
    """``scoutd_sessions_opened_total`` counts the ``session.open`` calls that
    succeeded (docs/PROTOCOL.md, "metrics"): one refused because its conversation
    passes ``max_session_bytes`` opened nothing."""
    limits = {"max_session_bytes": _held(_turns(100))}
    with InProcessDaemon(daemon=limits) as d, d.connect() as c:
        params = {"save_file": os.path.join(d.dir, "a.chat"), "messages": _turns(400)}
        assert c.call("session.open", params)["error"]["code"] == -32004
        assert _opens(c) == 0
        assert "result" in c.call("session.open", {"save_file": params["save_file"]})
        assert _opens(c) == 1
