"""The session memory bounds count what the daemon really holds (its resident memory).

A conversation of tiny messages holds about fifteen times its JSON size: a
bound on the JSON let three sessions "of 25 MB" take a gigabyte. The bounds
now count :func:`scoutd.engine.held.held_bytes`, measured against the daemon
process's RSS (docs/RELIABILITY.md, "CPU and memory, per request, per uid,
per daemon"). Real daemon subprocess, real socket.
"""

from __future__ import annotations

import os
from typing import Any

from tests.support.daemon import Daemon, LineClient

MIB = 1024 * 1024
APPEND = 4000  # tiny messages an append (about 100 KB of JSON)


def _tiny(start: int, count: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"t{i}"} for i in range(start, start + count)]


def _fill(client: LineClient, d: Daemon, name: str) -> tuple[str, dict[str, Any]]:
    """Append tiny messages to a new session until a bound refuses: the session, the refusal."""
    reply = client.call("session.open", {"save_file": os.path.join(d.dir, name)})
    session: str = reply["result"]["session"]
    held = 0
    for _ in range(1000):  # far more than any bound below allows
        params = {"session": session, "append": _tiny(held, APPEND), "base": held}
        reply = client.call("prepare_prompt", params, timeout=60)
        if "error" in reply:
            return session, reply["error"]
        held += APPEND
    raise AssertionError("no bound refused the session")


def test_tiny_messages_cannot_take_more_memory_than_the_bound_says() -> None:
    bound, sessions = 8 * MIB, 3
    with Daemon(daemon={"max_session_bytes": bound}) as d, d.connect(60) as client:
        warm, _ = _fill(client, d, "warm.chat")  # the daemon's own first allocations
        client.call("session.close", {"session": warm})
        before = d.rss_kib() * 1024
        refusals = [_fill(client, d, f"s{k}.chat")[1] for k in range(sessions)]
        grown = d.rss_kib() * 1024 - before
        for refusal in refusals:
            assert refusal["code"] == -32004 and "max_session_bytes" in refusal["message"]
        # the bound counts at least what the daemon holds (slack: the allocator's
        # arenas, the answers' buffers); counting the JSON, this grew by 300 MB
        assert grown <= sessions * bound + 12 * MIB, grown
        assert d.status()["counts"]["session_bytes"] <= sessions * bound
