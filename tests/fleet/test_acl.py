"""The fleet's ACL rules on a real Redis: hosts cannot publish commands; each role does its job.

The rules are :func:`scoutd.fleet.acl.acl_rules`, the ones docs/OPERATIONS.md
lists (checked here).
"""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import pytest
import redis

from scoutd.fleet.acl import acl_rules, acl_setuser
from scoutd.fleet.operator import fleet_view
from scoutd.fleet.wire import FIELD, Keys, encode, new_command_id
from scoutd.testing import ROOT
from scoutd.testing.fleet import RedisServer
from tests.fleet.hosts import (
    WAIT,
    delivered_copies,
    fleet_host,
    operator,
    publish_sync,
    wait_connected,
    wait_receipts,
)

PREFIX = "scoutd:fleet"
KEYS = Keys(PREFIX)


def add_users(server: RedisServer) -> None:
    admin = redis.Redis.from_url(server.url)
    try:
        admin.execute_command(*acl_setuser("fleet-host", "host", PREFIX, ">host-secret"))
        admin.execute_command(*acl_setuser("fleet-ops", "operator", PREFIX, ">ops-secret"))
    finally:
        admin.close()


def as_user(server: RedisServer, user: str, password: str) -> redis.Redis:
    return redis.Redis.from_url(server.url, username=user, password=password)


def test_a_host_may_not_publish_commands(redis_server: RedisServer) -> None:
    add_users(redis_server)
    command = encode({"id": new_command_id(), "kind": "abort", "selector": "all", "text": "x"})
    host = as_user(redis_server, "fleet-host", "host-secret")
    ops = as_user(redis_server, "fleet-ops", "ops-secret")
    try:
        ops.xadd(KEYS.commands, {FIELD: command})  # the operator may
        with pytest.raises(redis.exceptions.NoPermissionError):
            host.xadd(KEYS.commands, {FIELD: command})
        with pytest.raises(redis.exceptions.NoPermissionError):
            host.xtrim(KEYS.commands, maxlen=0)  # nor erase them
        with pytest.raises(redis.exceptions.NoPermissionError):
            host.delete(KEYS.commands)
        with pytest.raises(redis.exceptions.NoPermissionError):
            host.xgroup_destroy(KEYS.commands, "host:other")
        with pytest.raises(redis.exceptions.NoPermissionError):
            host.set("elsewhere", "1")  # nor touch keys outside the fleet's
        with pytest.raises(redis.exceptions.NoPermissionError):
            ops.xgroup_create(KEYS.commands, "host:fake", "$")  # operators publish, not read
        assert ops.xlen(KEYS.commands) == 1
        # what a host does is allowed: read through its group, acknowledge, report
        host.xgroup_create(KEYS.commands, "host:h9", "0")
        ((_, entries),) = host.xreadgroup("host:h9", "h9", {KEYS.commands: ">"})
        assert host.xack(KEYS.commands, "host:h9", entries[0][0]) == 1
        host.hset(KEYS.hosts, "h9", b"{}")
        host.xadd(KEYS.events, {FIELD: b"{}"})
        host.hset(KEYS.receipts("x"), "h9", b"{}")
        host.expire(KEYS.receipts("x"), 60)
        assert host.time() and ops.time()  # both date what they write by Redis's clock
    finally:
        host.close()
        ops.close()


def test_a_fleet_runs_on_its_acl_users_with_passwords_from_files(
    redis_server: RedisServer,
) -> None:
    add_users(redis_server)
    secret = os.path.join(redis_server.dir, "host.password")
    with open(secret, "w") as handle:
        handle.write("host-secret\n")
    ops_secret = os.path.join(redis_server.dir, "ops.password")
    with open(ops_secret, "w") as handle:
        handle.write("ops-secret\n")
    with fleet_host(redis_server, "h1", username="fleet-host", password_file=secret) as host:
        wait_connected(host)
        chat = os.path.join(host.dir, "agent.chat")
        with open(chat, "w") as handle:
            handle.write("[]")
        ops = operator(redis_server, username="fleet-ops", password_file=ops_secret)
        command = publish_sync(ops, "notice", "host=h1", "through the ACL users")
        found = wait_receipts(ops, command.id, ["h1"])
        assert found.receipts[0].chats == [] and delivered_copies(chat, command) == 0
        command = publish_sync(ops, "notice", f"chat={chat}", "to one chat")
        assert wait_receipts(ops, command.id, ["h1"]).receipts[0].chats == [chat]
        assert delivered_copies(chat, command) == 1
        # a host's credentials cannot publish through the CLI either
        config = os.path.join(host.dir, "as-host.toml")
        with open(config, "w") as handle:
            handle.write(
                f'[fleet]\nurl = "{redis_server.url}"\nusername = "fleet-host"\n'
                f'password_file = "{secret}"\n'
            )
        refused = subprocess.run(
            [sys.executable, "-m", "scoutd", "abort", "--fleet", "--config", config, "all", "x"],
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert refused.returncode == 1, refused
        assert "NOPERM" in refused.stderr or "permission" in refused.stderr.lower()


def test_a_wrong_password_leaves_the_host_serving_and_says_so(redis_server: RedisServer) -> None:
    add_users(redis_server)
    secret = os.path.join(redis_server.dir, "wrong.password")
    with open(secret, "w") as handle:
        handle.write("not-the-secret\n")
    with fleet_host(redis_server, "h1", username="fleet-host", password_file=secret) as host:
        fleet = host.status()["fleet"]
        assert fleet["connected"] is False
        assert "password" in fleet["last_error"] or "WRONGPASS" in fleet["last_error"]


@pytest.mark.parametrize("role", ["host", "operator"])
def test_the_documented_acl_lines_are_the_tested_ones(role: str) -> None:
    with open(os.path.join(ROOT, "docs", "OPERATIONS.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert " ".join(acl_rules(role, PREFIX)) in text  # type: ignore[arg-type]


def test_accounts_from_before_time_keep_working_on_their_own_clocks(
    redis_server: RedisServer,
) -> None:
    """An ACL written before ``+time``: the host still beats (and says once how to give
    it Redis's clock), the operator still publishes and sees it."""
    admin = redis.Redis.from_url(redis_server.url)
    try:
        for user, role, secret in (("old-host", "host", "h"), ("old-ops", "operator", "o")):
            rules = [r for r in acl_rules(role, PREFIX) if r != "+time"]  # type: ignore[arg-type]
            admin.execute_command("ACL", "SETUSER", user, "reset", "on", f">{secret}", *rules)  # type: ignore[no-untyped-call]
    finally:
        admin.close()
    files = {}
    for name, secret in (("host", "h"), ("ops", "o")):
        files[name] = os.path.join(redis_server.dir, f"{name}.password")
        with open(files[name], "w") as handle:
            handle.write(secret + "\n")
    ops = operator(redis_server, username="old-ops", password_file=files["ops"])
    with fleet_host(redis_server, "h1", username="old-host", password_file=files["host"]) as host:
        wait_connected(host)
        command = publish_sync(ops, "notice", "host=h1", "on its own clock")
        wait_receipts(ops, command.id, ["h1"])
        assert anyio.run(fleet_view, ops).alive == ["h1"]
        with open(host.log_path, encoding="utf-8") as handle:
            said = handle.read()
        assert said.count("Redis's time cannot be read") == 1 and "+time" in said
