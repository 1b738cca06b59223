"""Several real daemons as the hosts of one fleet, on one machine, one real Redis.

Each host serves its own directory (``allowed_roots``); all of them share the
file system, so only the roots keep a host from writing another's chats.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from scoutd.inbox import inbox_dir
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
from tests.support.daemon import Daemon, toml_text

HOSTS = {"h1": ["gpu"], "h2": ["gpu", "team-b"], "h3": ["team-b"]}


@pytest.fixture
def fleet(redis_server: RedisServer) -> Iterator[dict[str, Daemon]]:
    with ExitStack() as stack:
        daemons = {}
        for name, labels in HOSTS.items():
            daemon = stack.enter_context(fleet_host(redis_server, name, labels=labels))
            daemons[name] = daemon
        for daemon in daemons.values():
            wait_connected(daemon)
        yield daemons


def test_each_selector_reaches_exactly_its_chats(
    redis_server: RedisServer, fleet: dict[str, Daemon]
) -> None:
    ops = operator(redis_server)
    clients = {name: stack_client(d) for name, d in fleet.items()}
    try:
        chats = {name: os.path.join(d.dir, "job", "agent.chat") for name, d in fleet.items()}
        for chat in chats.values():
            os.makedirs(os.path.dirname(chat))
        sessions = {name: open_session(clients[name], chats[name]) for name in fleet}
        labelled = {name: os.path.join(fleet[name].dir, "job", "l.chat") for name in ("h1", "h3")}
        for name, chat in labelled.items():
            open_session(clients[name], chat, label="job-42")
        idle = os.path.join(fleet["h3"].dir, "job", "idle.chat")  # a chat of no session
        with open(idle, "w") as handle:
            handle.write("[]")
        cases = {
            "all": {"h1", "h2", "h3"},
            "host=h2": {"h2"},
            "label=gpu": {"h1", "h2"},
            "label=team-b": {"h2", "h3"},
            f"session={sessions['h1']}": {"h1"},
            "session=job-42": {"h1-label", "h3-label"},
            f"chat={fleet['h3'].dir}/*/agent.chat": {"h3"},
            f"chat={fleet['h3'].dir}/*/idle.chat": {"h3-idle"},
        }
        for target, expected in cases.items():
            command = publish_sync(ops, "notice", target, f"notice for {target}")
            found = wait_receipts(ops, command.id, fleet)
            reached = {r.host for r in found.receipts if r.chats}
            assert reached == {e.split("-")[0] for e in expected}, target
            for name in fleet:
                assert delivered_copies(chats[name], command) == int(name in expected), target
            for name, chat in labelled.items():
                wanted = f"{name}-label" in expected or target in ("all", f"host={name}")
                gpu = target == "label=gpu" and name == "h1"
                team = target == "label=team-b" and name == "h3"
                assert delivered_copies(chat, command) == int(wanted or gpu or team), target
            assert delivered_copies(idle, command) == int("h3-idle" in expected), target
            # h1 and h2 see h3's files on this shared disk: their roots keep them out
            for receipt in found.receipts:
                assert all(c.startswith(fleet[receipt.host].dir) for c in receipt.chats)
                assert not receipt.already and not receipt.refused
    finally:
        for client in clients.values():
            client.close()


def stack_client(daemon: Daemon):  # type: ignore[no-untyped-def]
    return daemon.connect()


def test_a_fleet_abort_is_pushed_to_the_session(
    redis_server: RedisServer, fleet: dict[str, Daemon]
) -> None:
    ops = operator(redis_server)
    chat = os.path.join(fleet["h2"].dir, "agent.chat")
    with fleet["h2"].connect() as c:
        session = open_session(c, chat)
        command = publish_sync(ops, "abort", "host=h2", "job 42 cancelled")
        pushed = c.notification("session.aborted", WAIT)
        assert pushed["params"] == {
            "session": session,
            "save_file": chat,
            "reason": "job 42 cancelled",
        }
        found = wait_receipts(ops, command.id, fleet)
        assert {r.host: r.chats for r in found.receipts} == {"h1": [], "h2": [chat], "h3": []}
        assert found.missing == []


def test_the_cli_publishes_and_reads_receipts(
    redis_server: RedisServer, fleet: dict[str, Daemon], tmp_path: object
) -> None:
    config = os.path.join(fleet["h1"].dir, "ops.toml")
    with open(config, "w") as handle:
        handle.write(toml_text({"fleet": {"url": redis_server.url}}))
    chat = os.path.join(fleet["h1"].dir, "agent.chat")
    with open(chat, "w") as handle:  # no session: the chat is found on disk
        handle.write("[]")
    cli = [sys.executable, "-m", "scoutd"]
    published = subprocess.run(
        [*cli, "notify", "--fleet", "--config", config, f"chat={chat}", "from the CLI"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    )
    command = published.stdout.strip()
    wait_receipts(operator(redis_server), command, fleet)
    shown = subprocess.run(
        [*cli, "fleet", "receipts", "--config", config, command],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert shown.returncode == 0, shown.stderr
    assert "3 host(s) answered, 1 chat(s) reached" in shown.stdout
    assert chat in shown.stdout
    status = subprocess.run(
        [*cli, "fleet", "status", "--config", config],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    )
    assert "hosts: 3 known, 3 alive" in status.stdout
    # a notice on stdin whose bytes are not UTF-8 is published, as from the command line
    piped = subprocess.run(
        [*cli, "notify", "--fleet", "--config", config, f"chat={chat}", "-"],
        input=b"from stdin \xff",
        capture_output=True,
        timeout=WAIT,
    )
    assert piped.returncode == 0, piped.stderr
    wait_receipts(operator(redis_server), piped.stdout.decode().strip(), fleet)
    inbox = inbox_dir(chat)
    texts = sorted(Path(inbox, name).read_bytes() for name in os.listdir(inbox))
    assert len(texts) == 2 and texts[0].startswith(b"from stdin "), texts
    refused = subprocess.run(
        [*cli, "abort", "--fleet", "--config", config, "chat=relative/*.chat", "x"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert refused.returncode == 2 and "not an absolute path" in refused.stderr
    # a mistake the fleet verbs do not read (another table, a [prompt] variable) stops none
    typo = os.path.join(fleet["h1"].dir, "typo.toml")
    with open(typo, "w") as handle:
        handle.write(toml_text({"fleet": {"url": redis_server.url}, "prompt": {"epoch_sise": 3}}))
    aborted = subprocess.run(
        [*cli, "abort", "--fleet", "--config", typo, "chat=/nowhere/*.chat", "x"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "EPOCH_SIZE": "many"},
    )
    assert aborted.returncode == 0, aborted.stderr
    wait_receipts(operator(redis_server), aborted.stdout.strip(), fleet)


def test_the_client_labels_its_session_for_the_fleet(
    redis_server: RedisServer, fleet: dict[str, Daemon]
) -> None:
    from scoutd import Client

    chat = os.path.join(fleet["h3"].dir, "agent.chat")
    with Client(fleet["h3"].socket_path) as client, client.session(chat, label="nightly") as s:
        command = publish_sync(operator(redis_server), "abort", "session=nightly", "stop nightly")
        assert s.wait_aborted(WAIT)
        assert s.reason == "stop nightly"
        found = wait_receipts(operator(redis_server), command.id, fleet)
        assert {r.host: r.chats for r in found.receipts} == {"h1": [], "h2": [], "h3": [chat]}
