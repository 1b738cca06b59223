"""A fleet when things fail: redelivery, a host killed mid-delivery, Redis killed, a host down.

Invariants: a command is delivered to a chat at most once (0 duplicates) and
every command a host acknowledged reached its chats (0 lost); an abort
published while its host was down is in the chat's inbox before that host
answers any prepare of the chat; a host without Redis serves its local files.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import anyio
import msgspec
import pytest
import redis

from scoutd import protocol
from scoutd.config import FleetConfig
from scoutd.fleet import agent as fleet_agent
from scoutd.fleet.agent import FleetAgent
from scoutd.fleet.deliver import over_limit
from scoutd.fleet.operator import publish, receipts
from scoutd.fleet.wire import FIELD, Command, Keys, Receipt, encode, new_command_id
from scoutd.inbox import inbox_dir, write_abort
from scoutd.paths import display_path
from scoutd.testing.fleet import RedisServer
from tests.fleet.hosts import (
    WAIT,
    delivered_copies,
    fleet_host,
    open_session,
    operator,
    publish_sync,
    wait_connected,
    wait_receipts,
)
from tests.support.daemon import wait_for

# Long (tests/conftest.py starts the tests marked slow first).
pytestmark = pytest.mark.slow

HELLO = [{"role": "user", "content": "hello"}]


def chats_in(directory: str, n: int) -> list[str]:
    out = []
    for i in range(n):
        path = os.path.join(directory, f"a{i}", "agent.chat")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as handle:
            handle.write("[]")
        out.append(path)
    return out


def pending(server: RedisServer, host: str) -> int:
    client = redis.Redis.from_url(server.url)
    try:
        return int(client.xpending(Keys("scoutd:fleet").commands, Keys.group(host))["pending"])
    finally:
        client.close()


def test_a_redelivered_command_is_not_delivered_twice(redis_server: RedisServer) -> None:
    """Entries read by the host's group and never acknowledged come again, once each."""
    ops = operator(redis_server)
    with fleet_host(redis_server, "h1") as host:
        wait_connected(host)
        chats = chats_in(host.dir, 3)
        host.stop()
        commands = [
            publish_sync(ops, "notice", f"chat={host.dir}/*/*.chat", f"n{i}") for i in range(5)
        ]
        # The host "read" them and died before its XACK: they are its pending entries.
        client = redis.Redis.from_url(redis_server.url)
        try:
            read = client.xreadgroup("host:h1", "h1", {"scoutd:fleet:commands": ">"}, count=10)
        finally:
            client.close()
        assert len(read[0][1]) == 5
        # ... and it had written the first two to the first chat before dying.
        from scoutd.fleet.deliver import Journal, deliver

        journal = Journal(os.path.join(host.dir, "state", "unused.log"))
        for command in commands[:2]:
            deliver(command, chats[:1], journal, "h1", time.time())
        assert pending(redis_server, "h1") == 5
        host.start()
        wait_connected(host)
        for command in commands:
            found = wait_receipts(ops, command.id, ["h1"])
            for chat in chats:
                assert delivered_copies(chat, command) == 1, (command.text, chat)
            (receipt,) = found.receipts
            assert len(receipt.chats) + len(receipt.already) == 3
        assert pending(redis_server, "h1") == 0


def test_a_host_killed_mid_delivery_loses_and_duplicates_nothing(
    redis_server: RedisServer,
) -> None:
    ops = operator(redis_server)
    with fleet_host(redis_server, "h1") as host:
        wait_connected(host)
        chats = chats_in(host.dir, 20)
        commands = [
            publish_sync(ops, "notice", f"chat={host.dir}/*/*.chat", f"n{i}") for i in range(40)
        ]
        # killed while it works through them (whatever it had reached by then)
        wait_for(lambda: host.status()["fleet"]["commands"] >= 3, WAIT, "a few commands")
        host.signal(signal.SIGKILL)
        host.wait()
        acked_before = 40 - pending(redis_server, "h1") - unread(redis_server, "h1")
        host.start()
        wait_connected(host)
        for command in commands:
            wait_receipts(ops, command.id, ["h1"])
        duplicates = lost = 0
        for command in commands:
            for chat in chats:
                copies = delivered_copies(chat, command)
                duplicates += copies > 1
                lost += copies == 0
        assert (duplicates, lost) == (0, 0), f"{acked_before} acknowledged before the kill"
        assert pending(redis_server, "h1") == 0


def unread(server: RedisServer, host: str) -> int:
    client = redis.Redis.from_url(server.url)
    try:
        for group in client.xinfo_groups("scoutd:fleet:commands"):
            if group["name"] == Keys.group(host).encode():
                return int(group["lag"] or 0)
    finally:
        client.close()
    return 0


def test_redis_killed_and_restarted(redis_server: RedisServer) -> None:
    ops = operator(redis_server)
    with fleet_host(redis_server, "h1") as host, host.connect() as c:
        wait_connected(host)
        (chat,) = chats_in(host.dir, 1)
        session = open_session(c, chat)
        redis_server.kill()
        fleet = wait_connected(host, connected=False)
        assert fleet["last_error"]
        assert "scoutd_fleet_connected 0" in c.call("metrics")["result"]["text"]
        # local files still work: a prepare, and an abort written on the host
        reply = c.call("prepare_prompt", {"messages": HELLO, "session": session})
        assert reply["result"]["messages"] == HELLO
        other = chats_in(os.path.join(host.dir, "local"), 1)[0]
        second = open_session(c, other)
        write_abort(other, "local abort")
        assert c.notification("session.aborted", WAIT)["params"]["session"] == second
        redis_server.start()  # the same directory: its append-only file brings the groups back
        fleet = wait_connected(host)
        assert fleet["reconnects"] >= 1 and fleet["last_error"] is None
        command = publish_sync(ops, "abort", "host=h1", "after the outage")
        pushed = c.notification("session.aborted", WAIT)
        assert pushed["params"]["session"] == session
        assert wait_receipts(ops, command.id, ["h1"]).receipts[0].chats == [chat]


def test_an_abort_published_while_its_host_is_down_applies_before_any_prepare(
    redis_server: RedisServer,
) -> None:
    ops = operator(redis_server)
    with fleet_host(redis_server, "h1") as host:
        wait_connected(host)  # its group exists from now on
        (chat,) = chats_in(host.dir, 1)
        host.stop()
        command = publish_sync(ops, "abort", f"chat={chat}", "cancelled while you were down")
        assert pending(redis_server, "h1") == 0 and unread(redis_server, "h1") == 1
        host.start(wait=False)
        # the very first request the restarted host answers already fails with the abort
        host.wait_ready()
        with host.connect() as c:
            reply = c.call("prepare_prompt", {"messages": HELLO, "save_file": chat})
            assert reply["error"]["code"] == protocol.ABORTED, reply
            assert reply["error"]["data"]["reason"] == "cancelled while you were down"
        assert wait_receipts(ops, command.id, ["h1"]).receipts[0].chats == [chat]


def test_a_host_starts_and_serves_without_redis(tmp_path: Any) -> None:
    server = RedisServer()
    try:
        with fleet_host(server.url, "h1", startup_timeout=2.0) as host, host.connect() as c:
            fleet = host.status()["fleet"]
            assert fleet["connected"] is False and fleet["last_error"]
            (chat,) = chats_in(host.dir, 1)
            session = open_session(c, chat)
            reply = c.call("prepare_prompt", {"messages": HELLO, "session": session})
            assert reply["result"]["messages"] == HELLO
            server.start()  # Redis comes up later: the host joins without a restart
            wait_connected(host)
            command: Command = publish_sync(operator(server), "notice", "all", "welcome")
            wait_receipts(operator(server), command.id, ["h1"])
            assert delivered_copies(chat, command) == 1
    finally:
        server.cleanup()


def test_a_command_a_host_cannot_apply_is_acknowledged_with_why(
    redis_server: RedisServer,
) -> None:
    """Entries a raw publisher wrote that the host refuses (a relative glob, an issue
    time no notice name holds, a glob 1,000 components deep) each get an error receipt
    and are acknowledged: the host keeps serving, and the abort after them applies."""
    ops, keys = operator(redis_server), Keys("scoutd:fleet")
    client = redis.Redis.from_url(redis_server.url)
    try:
        with fleet_host(redis_server, "h1") as host:
            wait_connected(host)
            (chat,) = chats_in(host.dir, 1)
            base = {"kind": "abort", "selector": "chat", "value": chat, "text": "x"}
            hostile = [
                {**base, "value": "relative/*.chat"},
                {**base, "kind": "notice", "issued": 1e300},
                {**base, "value": "/*" * 1000},
            ]
            entries = [
                client.xadd(keys.commands, {FIELD: encode({"id": new_command_id(), **fields})})
                for fields in hostile
            ]
            command = publish_sync(ops, "abort", f"chat={chat}", "stop")
            assert wait_receipts(ops, command.id, ["h1"]).receipts[0].chats == [chat]
            for entry in entries:
                receipt = client.hget(keys.receipts(f"entry:{entry.decode()}"), "h1")
                assert receipt is not None and msgspec.json.decode(receipt)["error"], entry
            assert pending(redis_server, "h1") == 0
            assert host.status()["fleet"]["connected"] is True
    finally:
        client.close()


def test_a_chat_glob_reaches_every_matching_chat_or_says_why_not(
    redis_server: RedisServer,
) -> None:
    """A chat of no session is reached whatever its name (a leading dot, an undecodable
    byte); past ``max_chats`` the receipt says that the others were not reached."""
    ops = operator(redis_server)
    with fleet_host(redis_server, "h1", max_chats=3) as host:
        wait_connected(host)
        job = os.path.join(host.dir, "job")
        os.mkdir(job)
        names = [b"w1.chat", b".w2.chat", b"w\xff.chat"]
        chats = sorted(os.path.join(job, os.fsdecode(name)) for name in names)
        for chat in chats:
            with open(chat, "w") as handle:
                handle.write("[]")
        command = publish_sync(ops, "abort", f"chat={job}/*.chat", "stop")
        receipt = wait_receipts(ops, command.id, ["h1"]).receipts[0]
        assert receipt.chats == [display_path(chat) for chat in chats] and not receipt.refused
        for chat in chats:
            assert os.path.exists(os.path.join(inbox_dir(chat), "abort")), chat
        with open(os.path.join(job, "w4.chat"), "w") as handle:
            handle.write("[]")
        command = publish_sync(ops, "notice", f"chat={job}/*.chat", "four chats now")
        receipt = wait_receipts(ops, command.id, ["h1"]).receipts[0]
        assert len(receipt.chats) + len(receipt.already) == 3
        assert receipt.refused == [over_limit(3)]


def test_an_unexpected_failure_on_a_host_never_ends_its_reading(
    redis_server: RedisServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection, for the failures no input is known to cause any more: a
    delivery that raises is acknowledged with an error receipt; a read that raises
    reads its entry again, from the pending ones; the agent goes on either way."""
    chat = tmp_path / "roots" / "a" / "agent.chat"
    chat.parent.mkdir(parents=True)
    chat.write_text("[]")
    config = FleetConfig(
        url=redis_server.url,
        host="h1",
        state_dir=str(tmp_path / "state"),
        startup_timeout=5.0,
        reconnect_max=0.2,
    )
    agent = FleetAgent(config, lambda: [], lambda: [str(tmp_path / "roots")])
    ops, failures = operator(redis_server), {"deliver": 1, "apply": 1}
    real_deliver, real_apply = fleet_agent.deliver, FleetAgent._apply

    def deliver_failing_once(*args: Any) -> Receipt:
        if failures["deliver"]:
            failures["deliver"] -= 1
            raise RuntimeError("boom")
        return real_deliver(*args)

    async def apply_failing_once(self: FleetAgent, *args: Any) -> Receipt:
        if not failures["deliver"] and failures["apply"]:  # the second command's first read
            failures["apply"] -= 1
            raise RuntimeError("read failed")
        return await real_apply(self, *args)

    monkeypatch.setattr(fleet_agent, "deliver", deliver_failing_once)
    monkeypatch.setattr(FleetAgent, "_apply", apply_failing_once)

    async def answered(command: str) -> Receipt:
        with anyio.fail_after(WAIT):
            while True:
                found = (await receipts(ops, command)).receipts
                if found:
                    return found[0]
                await anyio.sleep(0.05)

    async def main() -> tuple[Receipt, Receipt]:
        async with anyio.create_task_group() as tg:
            await tg.start(agent.run)
            first, _ = await publish(ops, "notice", "chat", str(chat), "first", by="test")
            failed = await answered(first.id)
            second, _ = await publish(ops, "notice", "chat", str(chat), "second", by="test")
            delivered = await answered(second.id)
            tg.cancel_scope.cancel()
        return failed, delivered

    failed, delivered = anyio.run(main)
    assert failed.error is not None and "RuntimeError: boom" in failed.error and not failed.chats
    assert delivered.chats == [str(chat)] and failures == {"deliver": 0, "apply": 0}
    assert pending(redis_server, "h1") == 0
