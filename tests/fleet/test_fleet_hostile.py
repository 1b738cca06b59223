"""The fleet under a hostile publisher and a failing Redis.

* An abort is never reported reached without being written: the journal, which
  keeps a redelivered *notice* single, does not stand in for an abort (its
  marker does), so a redelivery reaches the chat refused the first time and a
  second command under a used id still aborts.
* A command id used before for another command is refused as such (a notice
  is not written; an abort is, and its receipt says why it is not clean).
* A consumer group that Redis lost (restarted without its data, FLUSHALL, the
  group deleted) is created again after the last command the host
  acknowledged, so a command published before the host reconnects is read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

import anyio
import msgspec
import redis

from scoutd.cli.main import main
from scoutd.config import FleetConfig
from scoutd.fleet.acl import acl_rules, acl_setuser
from scoutd.fleet.agent import FleetAgent
from scoutd.fleet.deliver import Journal, deliver
from scoutd.fleet.operator import publish, receipts
from scoutd.fleet.select import Identity
from scoutd.fleet.wire import FIELD, Command, Keys, Receipt, encode, new_command_id
from scoutd.inbox import inbox_dir
from scoutd.inbox.aborted import claim_and_mark, held
from scoutd.testing.fleet import RedisServer
from tests.fleet.hosts import WAIT, operator
from tests.support.daemon import toml_text


def chat_at(tmp_path: Any, name: str) -> str:
    path = tmp_path / name / "agent.chat"
    path.parent.mkdir(parents=True)
    path.write_text("[]")
    return str(path)


def abort_waits(chat: str) -> bool:
    return os.path.exists(os.path.join(inbox_dir(chat), "abort"))


def test_a_redelivered_abort_reaches_the_chat_refused_before(tmp_path: Any) -> None:
    """A host wrote an abort to one chat, could not write the other, journaled it and
    lost Redis before its XACK: the redelivery must try the refused chat again,
    never answer it as reached ("already")."""
    good, bad = chat_at(tmp_path, "a"), chat_at(tmp_path, "b")
    inbox = inbox_dir(bad)
    os.symlink("/nonexistent-target", inbox)  # a symlinked inbox is refused
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    command = Command(id=new_command_id(), kind="abort", selector="all", text="stop", issued=1.0)
    first = deliver(command, [good, bad], journal, "h1", 1.0)
    assert first.chats == [good] and len(first.refused) == 1
    assert claim_and_mark(good) == "stop"  # as the daemon's watcher takes it
    os.unlink(inbox)  # the cause is fixed; the command comes again (no XACK)
    again = deliver(command, [good, bad], journal, "h1", 2.0)
    assert bad not in again.already, again
    assert again.chats == [bad] and again.already == [good] and not again.refused
    assert abort_waits(bad)


def test_a_used_command_id_never_hides_an_abort(tmp_path: Any) -> None:
    """A notice, then an abort published under the same id (a raw publisher, a
    replayed id): the abort is written, and its receipt is not clean."""
    (chat,) = [chat_at(tmp_path, "a")]
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    ident = new_command_id()
    notice = Command(id=ident, kind="notice", selector="all", text="hello", issued=1.0)
    assert deliver(notice, [chat], journal, "h1", 1.0).chats == [chat]
    abort = Command(id=ident, kind="abort", selector="all", text="stop", issued=2.0)
    restarted = Journal(journal.path)
    restarted.load()
    receipt = deliver(abort, [chat], restarted, "h1", 2.0)
    assert receipt.chats == [chat] and abort_waits(chat)
    assert receipt.refused and "used" in receipt.refused[0], receipt


def test_a_used_command_id_is_refused_for_another_notice(tmp_path: Any) -> None:
    (chat,) = [chat_at(tmp_path, "a")]
    journal = Journal(str(tmp_path / "state" / "delivered.log"))
    journal.load()
    ident = new_command_id()
    first = Command(id=ident, kind="notice", selector="all", text="one", issued=1.0)
    deliver(first, [chat], journal, "h1", 1.0)
    second = Command(id=ident, kind="notice", selector="all", text="two", issued=2.0)
    receipt = deliver(second, [chat], journal, "h1", 2.0)
    assert receipt.error is not None and not receipt.chats and not receipt.already
    assert len(os.listdir(inbox_dir(chat))) == 1
    # the same command again (a redelivery) is "already", as ever
    assert deliver(first, [chat], journal, "h1", 3.0).already == [chat]


def test_a_journal_of_the_older_form_still_loads(tmp_path: Any) -> None:
    path = tmp_path / "delivered.log"
    ident = new_command_id()
    path.write_text(f"{ident} 1.5\n")
    journal = Journal(str(path))
    journal.load()
    assert journal.done == {ident: 1.5}
    chat = chat_at(tmp_path, "a")
    command = Command(id=ident, kind="notice", selector="all", text="x", issued=1.5)
    assert deliver(command, [chat], journal, "h1", 2.0).already == [chat]


def _agent(server: RedisServer, tmp_path: Any, roots: str) -> FleetAgent:
    config = FleetConfig(
        url=server.url,
        host="h1",
        state_dir=str(tmp_path / "state"),
        startup_timeout=5.0,
        reconnect_max=0.2,
        connect_timeout=1.0,
    )
    return FleetAgent(config, lambda: [], lambda: [roots])


async def _answered(ops: FleetConfig, command: str) -> Receipt:
    with anyio.fail_after(WAIT):
        while True:
            found = (await receipts(ops, command)).receipts
            if found:
                return found[0]
            await anyio.sleep(0.02)


def test_a_group_redis_lost_is_created_after_the_last_command_read(
    redis_server: RedisServer, tmp_path: Any
) -> None:
    """Redis comes back without its data; an abort is published before the host
    reconnects. The host must read it (its group created again from the last
    command it acknowledged, not from "$", which would skip the abort for good)."""
    chat = chat_at(tmp_path / "roots", "a")
    agent = _agent(redis_server, tmp_path, str(tmp_path / "roots"))
    fresh = RedisServer(tempfile.mkdtemp(prefix="rd", dir="/tmp"))
    try:

        async def main() -> Receipt:
            async with anyio.create_task_group() as tg:
                await tg.start(agent.run)
                first, _ = await publish(
                    operator(redis_server), "notice", "chat", chat, "before", by="t"
                )
                await _answered(operator(redis_server), first.id)
                redis_server.stop()
                with anyio.fail_after(WAIT):
                    while True:  # the host saw Redis go
                        if not agent.connected:
                            break
                        await anyio.sleep(0.02)
                # A Redis without the data answers at the host's address only once
                # the abort is in it: the host cannot have reconnected before.
                fresh.start()
                ops = operator(fresh)
                abort, _ = await publish(ops, "abort", "chat", chat, "after the restart", by="t")
                os.rename(fresh.socket_path, redis_server.socket_path)
                answer = await _answered(operator(redis_server), abort.id)
                tg.cancel_scope.cancel()
            return answer

        answer = anyio.run(main)
        assert answer.chats == [chat] and abort_waits(chat)
    finally:
        fresh.cleanup()
        shutil.rmtree(fresh.dir, ignore_errors=True)


def test_hostile_entries_are_refused_with_a_receipt_saying_why(
    redis_server: RedisServer, tmp_path: Any
) -> None:
    """Entries written raw: no command field, bytes that are not UTF-8, JSON of the
    wrong type, a text over the bound, ``..``, a path outside the roots. Each is
    acknowledged with a receipt whose error says what it is; none is delivered
    outside the roots; the abort after them applies."""
    roots = str(tmp_path / "roots")
    chat = chat_at(tmp_path / "roots", "a")
    outside = chat_at(tmp_path, "outside")
    keys = Keys("scoutd:fleet")
    base = {"kind": "abort", "selector": "chat", "value": chat, "text": "x", "issued": 1.0}

    def raw(**fields: Any) -> bytes:
        return encode({"id": new_command_id(), **base, **fields})

    hostile: dict[str, dict[str, bytes]] = {
        "no `d` field": {"x": b"y"},
        "invalid character": {FIELD: b"\xff\xfe"},
        "got `array`": {FIELD: b"[1]"},
        "over 1048576 bytes": {FIELD: raw(text="y" * (1 << 20 | 1))},
        "'..'": {FIELD: raw(value=f"{roots}/../outside/agent.chat")},
    }
    agent = _agent(redis_server, tmp_path, roots)
    client = redis.Redis.from_url(redis_server.url)
    try:

        async def main() -> tuple[Receipt, Receipt]:
            async with anyio.create_task_group() as tg:
                await tg.start(agent.run)
                for fields in hostile.values():
                    client.xadd(keys.commands, fields)  # type: ignore[arg-type]
                ops = operator(redis_server)
                out, _ = await publish(ops, "abort", "chat", outside, "out", by="t")
                last, _ = await publish(ops, "abort", "chat", chat, "stop", by="t")
                outside_answer = await _answered(ops, out.id)
                answer = await _answered(ops, last.id)
                tg.cancel_scope.cancel()
            return outside_answer, answer

        outside_answer, answer = anyio.run(main)
        entries: Any = client.xrange(keys.commands)
        for (entry, _), why in zip(entries[: len(hostile)], hostile, strict=True):
            stored: Any = client.hget(keys.receipts(f"entry:{entry.decode()}"), "h1")
            assert stored is not None, why
            error = msgspec.json.decode(stored, type=Receipt).error
            assert error is not None and why in error, (why, error)
        assert not outside_answer.chats and not abort_waits(outside)
        assert answer.chats == [chat] and abort_waits(chat)
        assert held(outside) is None
        assert agent.status().connected and time.time() > 0
    finally:
        client.close()


def test_a_published_command_is_said_even_when_the_trim_fails(
    redis_server: RedisServer, tmp_path: Any, capsys: Any
) -> None:
    """An operator account without ``XTRIM`` (an ACL of its own): the abort is in the
    stream, so the CLI prints its id and exits 0, warning of the trim; before, it
    exited 1 with no id, and a retry published the command twice."""
    admin = redis.Redis.from_url(redis_server.url)
    try:
        rules = [r for r in acl_rules("operator", "scoutd:fleet") if r != "+xtrim"]
        admin.execute_command("ACL", "SETUSER", "ops", "reset", "on", ">pw", *rules)  # type: ignore[no-untyped-call]
        password = tmp_path / "pw"
        password.write_text("pw\n")
        config = tmp_path / "ops.toml"
        table = {"url": redis_server.url, "username": "ops", "password_file": str(password)}
        config.write_text(toml_text({"fleet": table}))
        code = main(["abort", "--fleet", "--config", str(config), "all", "stop"])
        out, err = capsys.readouterr()
        entries: Any = admin.xrange(Keys("scoutd:fleet").commands)
        assert len(entries) == 1
        published = msgspec.json.decode(entries[0][1][FIELD.encode()], type=Command)
        assert (code, out.strip()) == (0, published.id), err
        assert "not trimmed" in err and "xtrim" in err
    finally:
        admin.close()


class _Open:
    """One open session, as the daemon's registry shows it to the fleet."""

    def __init__(self, save_file: str) -> None:
        self.id, self.resolved, self.label, self.aborted = "s1", save_file, None, None


def test_under_the_documented_acl_each_session_event_is_sent_once(
    redis_server: RedisServer, tmp_path: Any
) -> None:
    """The host account of docs/OPERATIONS.md may not ``HGET`` the beat it replaces:
    that refusal failed the whole heartbeat pipeline, so the session events, written
    all the same, were kept as unsent and written again at every beat."""
    admin = redis.Redis.from_url(redis_server.url)
    try:
        rules = acl_setuser("fleet-host", "host", "scoutd:fleet", ">pw")
        admin.execute_command(*rules)  # type: ignore[no-untyped-call]
        password = tmp_path / "pw"
        password.write_text("pw\n")
        config = FleetConfig(
            url=redis_server.url,
            host="h1",
            username="fleet-host",
            password_file=str(password),
            state_dir=str(tmp_path / "state"),
            heartbeat_interval=0.05,
        )
        chat = str(tmp_path / "a.chat")
        agent = FleetAgent(config, lambda: [_Open(chat)], lambda: [str(tmp_path)])

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                await tg.start(agent.run)
                await anyio.sleep(0.5)  # about ten beats
                tg.cancel_scope.cancel()

        anyio.run(main)
        assert admin.xlen(Keys("scoutd:fleet").events) == 1  # "opened", once
        assert admin.hget(Keys("scoutd:fleet").hosts, "h1") is not None
    finally:
        admin.close()


def test_a_redelivery_through_a_moved_link_is_the_same_command(tmp_path: Any) -> None:
    """The journal knows a command as it was read, not as this host spelt its glob
    (a link on the way resolved): moved between two reads, it is "already", not
    "another command under a used id"."""
    real = tmp_path / "roots" / "one"
    chat = chat_at(real, "a")
    link = tmp_path / "roots" / "via"
    link.symlink_to(real)
    config = FleetConfig(host="h1", state_dir=str(tmp_path / "state"))
    agent = FleetAgent(config, lambda: [], lambda: [str(tmp_path / "roots")])
    agent.journal.load()
    me = Identity("h1", (), (str(tmp_path / "roots"),))
    command = Command(
        id=new_command_id(), kind="notice", selector="chat", value=f"{link}/*/*.chat", text="x"
    )
    assert agent._deliver(command, me, [], 1.0).chats == [chat]
    other = chat_at(tmp_path / "roots" / "two", "a")
    link.unlink()
    link.symlink_to(other.removesuffix("/a/agent.chat"))
    again = agent._deliver(command, me, [], 2.0)
    assert again.error is None and again.already == [other], again
