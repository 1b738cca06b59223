"""Two daemons under one host name share one consumer group: each command reaches one.

Redis gives each entry of a group to one of its readers, so two daemons that
beat under the same name (cloned machines, a copied config) split the fleet's
commands between them: an abort published to every host reaches the chats of
one of them only, and the receipts, keyed by the name, look complete. The
daemons cannot tell a duplicate from their own restart by the name alone; each
beat carries the daemon's instance, and a beat of another instance written
since a daemon's own last one is a second daemon, live, under its name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import ExitStack

from scoutd.config import FleetConfig
from scoutd.fleet.operator import fleet_view
from scoutd.fleet.wire import HostBeat
from scoutd.testing.fleet import RedisServer
from tests.fleet.hosts import (
    WAIT,
    fleet_host,
    operator,
    publish_sync,
    receipts_sync,
    run,
    wait_connected,
)
from tests.support.daemon import toml_text, wait_for

CONFLICT = "another scoutd daemon beats as host 'twin'"


def test_two_daemons_under_one_name_are_told_everywhere(redis_server: RedisServer) -> None:
    with ExitStack() as stack:
        first = stack.enter_context(fleet_host(redis_server, "twin"))
        second = stack.enter_context(fleet_host(redis_server, "twin"))
        for daemon in (first, second):
            wait_connected(daemon)
        for daemon in (first, second):
            wait_for(
                lambda d=daemon: CONFLICT in (d.status()["fleet"]["last_error"] or ""),
                WAIT,
                "the conflict in the daemon's status",
            )
        config = os.path.join(first.dir, "ops.toml")
        with open(config, "w") as handle:
            handle.write(toml_text({"fleet": {"url": redis_server.url}}))
        shown = subprocess.run(
            [sys.executable, "-m", "scoutd", "fleet", "status", "--config", config],
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert shown.returncode == 4, shown
        assert "twin" in shown.stderr and "one name" in shown.stderr
        # the split itself: a command for every host reaches one of the two only
        ops = operator(redis_server)
        command = publish_sync(ops, "notice", "all", "wrap up")
        found = wait_for(lambda: receipts_sync(ops, command.id).receipts, WAIT, "a receipt")
        assert [r.host for r in found] == ["twin"]
        read = receipts_sync(ops, command.id)
        assert read.conflicts == ["twin"] and read.incomplete == ["twin"]
        second.stop()
        # the survivor stops saying so once the other's beats are old
        wait_for(
            lambda: CONFLICT not in (first.status()["fleet"]["last_error"] or ""),
            WAIT,
            "the conflict to clear",
        )


def test_the_fleet_view_tells_a_conflict_as_soon_as_the_daemons_do(
    redis_server: RedisServer,
) -> None:
    """The beat that finds the other daemon says so itself, not the beat after it.

    Slow beats make the gap plain: an operator who read `fleet status` right
    after both daemons told the conflict in `status` was shown none for up to
    an interval.
    """
    ops = operator(redis_server)
    with ExitStack() as stack:
        first = stack.enter_context(fleet_host(redis_server, "pair", heartbeat_interval=1.5))
        second = stack.enter_context(fleet_host(redis_server, "pair", heartbeat_interval=1.5))
        for daemon in (first, second):
            wait_connected(daemon)
        for daemon in (first, second):
            wait_for(
                lambda d=daemon: (
                    "beats as host 'pair'" in (d.status()["fleet"]["last_error"] or "")
                ),
                WAIT,
                "the conflict in the daemon's status",
            )
        assert run(lambda: fleet_view(ops)).conflicts == ["pair"]


def test_a_daemon_restarted_under_its_name_is_no_conflict(redis_server: RedisServer) -> None:
    """Its first beat replaces its own last one from before the restart (killed: fresh)."""
    ops = operator(redis_server)
    with fleet_host(redis_server, "solo") as daemon:
        wait_connected(daemon)
        before = wait_for(lambda: _beat(ops, "solo"), WAIT, "the first daemon's beat")
        daemon.kill()
        daemon.start()
        wait_connected(daemon)

        def beat_of_the_restart() -> HostBeat | None:
            beat = _beat(ops, "solo")
            return beat if beat is not None and beat.instance != before.instance else None

        first = wait_for(beat_of_the_restart, WAIT, "the restarted daemon's beat")
        # three more of its beats: any conflict it saw at its first would still be told
        wait_for(
            lambda: (_beat(ops, "solo") or first).at >= first.at + 3 * first.interval,
            WAIT,
            "three more beats",
        )
        fleet = daemon.status()["fleet"]
        assert fleet["last_error"] is None and fleet["host"] == "solo", fleet
        assert run(lambda: fleet_view(ops)).conflicts == []
        with open(daemon.log_path, encoding="utf-8") as log:
            assert "another daemon" not in log.read()  # not even for a moment


def _beat(ops: FleetConfig, host: str) -> HostBeat | None:
    """The heartbeat stored for ``host``, as ``fleet status`` reads it."""
    return next((b for b in run(lambda: fleet_view(ops)).hosts if b.host == host), None)
