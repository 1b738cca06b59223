"""The fleet view and retention: heartbeats, session events, backlog, trimming, receipts' age."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import msgspec
import pytest
import redis

from scoutd.cli.common import EXIT_INCOMPLETE
from scoutd.cli.main import main
from scoutd.fleet.operator import fleet_view
from scoutd.fleet.wire import FIELD, Keys, Receipt, SessionEvent
from scoutd.testing.fleet import RedisServer
from tests.fleet.hosts import (
    WAIT,
    fleet_host,
    open_session,
    operator,
    publish_sync,
    wait_connected,
    wait_receipts,
)
from tests.support.daemon import toml_text, wait_for

KEYS = Keys("scoutd:fleet")


def events(server: RedisServer) -> list[tuple[str, str]]:
    client = redis.Redis.from_url(server.url)
    try:
        entries = client.xrange(KEYS.events)
    finally:
        client.close()
    decoded = [
        msgspec.json.decode(fields[FIELD.encode()], type=SessionEvent) for _, fields in entries
    ]
    return [(e.event, e.session) for e in decoded]


def test_heartbeats_and_session_events_make_the_fleet_view(redis_server: RedisServer) -> None:
    ops = operator(redis_server)
    with fleet_host(redis_server, "h1", labels=["gpu"]) as h1, fleet_host(redis_server, "h2") as h2:
        wait_connected(h1)
        wait_connected(h2)
        with h1.connect() as c:
            chat = os.path.join(h1.dir, "agent.chat")
            session = open_session(c, chat, label="job-7")
            wait_for(lambda: ("opened", session) in events(redis_server), WAIT, "opened")

            def listed() -> bool:
                view = anyio.run(fleet_view, ops)
                beats = {b.host: b for b in view.hosts}
                return beats.get("h1") is not None and beats["h1"].sessions == 1

            wait_for(listed, WAIT, "h1's heartbeat with its session")
            view = anyio.run(fleet_view, ops)
            assert view.alive == ["h1", "h2"]
            (beat,) = [b for b in view.hosts if b.host == "h1"]
            assert beat.labels == ["gpu"] and beat.listed[0].label == "job-7"
            assert {g.host: (g.pending, g.lag) for g in view.groups} == {
                "h1": (0, 0),
                "h2": (0, 0),
            }
            publish_sync(ops, "abort", "session=job-7", "done")
            c.notification("session.aborted", WAIT)
            wait_for(lambda: ("aborted", session) in events(redis_server), WAIT, "aborted")
        wait_for(lambda: ("closed", session) in events(redis_server), WAIT, "closed")
        h2.stop()  # down: its backlog shows, and it falls silent
        command = publish_sync(ops, "notice", "all", "while h2 is down")
        wait_receipts(ops, command.id, ["h1"])
        view = anyio.run(fleet_view, ops)
        assert {g.host: g.lag for g in view.groups} == {"h1": 0, "h2": 1}
        assert view.recent[0]["id"] == command.id and view.recent[0]["receipts"] == 1


def test_the_command_stream_is_trimmed_by_length_and_age(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    try:
        by_length = operator(redis_server, command_max_len=10)
        for i in range(300):
            publish_sync(by_length, "notice", "host=nobody", f"n{i}")
        length = client.xlen(KEYS.commands)
        # approximate trimming drops whole stream nodes (100 entries each by default)
        assert 10 <= length <= 110, length
        time.sleep(0.05)
        by_age = operator(redis_server, command_max_age=0.01)
        for i in range(101):  # the 101st starts a new node: the old ones can go
            publish_sync(by_age, "notice", "host=nobody", f"m{i}")
        assert client.xlen(KEYS.commands) < 150
    finally:
        client.close()


@pytest.mark.parametrize("via", ["library", "cli"])
def test_an_operator_whose_clock_runs_ahead_trims_nothing_it_should_keep(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: str
) -> None:
    """Before: the command stream was aged by the operator's clock against the entries'
    ids, which are Redis's: an operator whose clock ran 8 days ahead (retention 7) trimmed
    every command, the abort it had just published among them, before any host read it."""
    client = redis.Redis.from_url(redis_server.url)
    config = tmp_path / "ops.toml"
    config.write_text(toml_text({"fleet": {"url": redis_server.url}}))
    real = time.time
    try:
        publish_sync(operator(redis_server), "notice", "host=nobody", "an hour ago, say")
        monkeypatch.setattr(time, "time", lambda: real() + 8 * 24 * 3600)
        if via == "library":
            publish_sync(operator(redis_server), "abort", "all", "stop")
        else:
            assert main(["abort", "--fleet", "--config", str(config), "all", "stop"]) == 0
        assert client.xlen(KEYS.commands) == 2
    finally:
        monkeypatch.undo()
        client.close()


def test_a_host_whose_clock_runs_behind_is_alive_on_redis_clock(
    redis_server: RedisServer,
) -> None:
    """Before: whether a host was alive compared its beat's time, by its own clock, with
    the operator's clock: a host whose clock ran two minutes behind showed as silent
    while it beat. Its times are Redis's now, measured as it connects."""
    host = fleet_host(redis_server, "late")
    with open(os.path.join(host.dir, "sitecustomize.py"), "w") as handle:
        handle.write("import time\n_real = time.time\ntime.time = lambda: _real() - 120.0\n")
    ops = operator(redis_server)
    with host:
        wait_connected(host)

        def alive() -> bool:
            return anyio.run(fleet_view, ops).alive == ["late"]

        wait_for(alive, WAIT, "the host whose clock runs behind seen alive")
        with host.connect() as c:
            session = open_session(c, os.path.join(host.dir, "agent.chat"))
            wait_for(lambda: ("opened", session) in events(redis_server), WAIT, "opened")
        view = anyio.run(fleet_view, ops)
        assert abs(view.hosts[0].at - view.at) < 10  # dated by Redis's clock, not 120 s back
        (opened,) = event_times(redis_server)
        assert abs(opened - view.at) < 60  # so is its session event


def event_times(server: RedisServer) -> list[float]:
    """The times of the session events the hosts wrote."""
    client = redis.Redis.from_url(server.url)
    try:
        entries = client.xrange(KEYS.events)
    finally:
        client.close()
    return [msgspec.json.decode(f[FIELD.encode()], type=SessionEvent).at for _, f in entries]


def test_receipts_expire_after_their_retention(redis_server: RedisServer) -> None:
    ops = operator(redis_server)
    with fleet_host(redis_server, "h1", receipt_max_age=3600.0) as host:
        wait_connected(host)
        command = publish_sync(ops, "notice", "all", "kept an hour")
        wait_receipts(ops, command.id, ["h1"])
        client = redis.Redis.from_url(redis_server.url)
        try:
            assert 3500 < client.ttl(KEYS.receipts(command.id)) <= 3600
        finally:
            client.close()


COMMAND = "c" * 32  # a command id as publishing makes them (32 hex digits)


def test_receipts_are_printed_escaped(redis_server: RedisServer, tmp_path: object) -> None:
    """A receipt's error and chats may hold what an agent named (a file) or what another
    writer put in the stream: ``scoutd fleet receipts`` prints each escaped on one line."""
    receipt = Receipt(
        command=COMMAND,
        host="h1",
        at=time.time(),
        chats=["/srv/x\x1b[2J.chat"],
        error="bad\nscoutd: all clear",
    )
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.hset(KEYS.receipts(COMMAND), "h1", msgspec.json.encode(receipt))
    finally:
        client.close()
    config = Path(str(tmp_path)) / "ops.toml"
    config.write_text(toml_text({"fleet": {"url": redis_server.url}}))
    shown = subprocess.run(
        [sys.executable, "-m", "scoutd", "fleet", "receipts", "--config", str(config), COMMAND],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert shown.returncode == EXIT_INCOMPLETE, shown.stderr  # an error: not a clean answer
    assert "\x1b" not in shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[1].endswith("error bad\\x0ascoutd: all clear")
    assert lines[2] == "    /srv/x\\x1b[2J.chat"
