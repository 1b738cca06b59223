"""``scoutd fleet receipts`` against hostile and unclean receipts, on a real Redis.

Any host account may write any field of a command's receipts hash
(docs/OPERATIONS.md, "Who may publish"), so what the operator reads there is
hostile input: one bad receipt must not hide the others, nor crash the verb,
and an answer that did not reach every chat must not exit 0.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis

from scoutd.cli.common import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_OK
from scoutd.fleet.wire import HostBeat, Keys, Receipt
from scoutd.testing.fleet import RedisServer
from tests.cli.helpers import run
from tests.fleet.hosts import fleet_host, operator, publish_sync, wait_connected, wait_receipts
from tests.support.daemon import toml_text
from tests.support.nesting import too_deep

KEYS = Keys("scoutd:fleet")
COMMAND = "c" * 32


def clean(host: str, **fields: Any) -> bytes:
    """A well-formed receipt of ``COMMAND`` by ``host``, with ``fields`` changed."""
    return msgspec.json.encode(
        Receipt(**{"command": COMMAND, "host": host, "at": time.time(), **fields})
    )


def write(
    server: RedisServer, receipts: dict[bytes | str, bytes | str], beats: tuple[str, ...] = ()
) -> None:
    """HSET ``receipts`` as a host account could, and a heartbeat for each of ``beats``."""
    client = redis.Redis.from_url(server.url)
    try:
        client.hset(KEYS.receipts(COMMAND), mapping=receipts)
        for host in beats:
            beat = HostBeat(host=host, at=time.time())
            client.hset(KEYS.hosts, host, msgspec.json.encode(beat))
    finally:
        client.close()


def receipts_cli(server: RedisServer, home: Path, command: str, *options: str) -> Any:
    """Run the real ``scoutd fleet receipts`` with an operator config for ``server``."""
    config = home / "ops.toml"
    config.write_text(toml_text({"fleet": {"url": server.url}}))
    (home / "empty.toml").write_text("")  # run()'s $SCOUTD_CONFIG
    return run(home, "fleet", "receipts", "--config", str(config), *options, command)


def test_a_malformed_receipt_hides_no_other(redis_server: RedisServer, tmp_path: Path) -> None:
    """A receipt that is not JSON, or not a receipt, is shown as unreadable for its field
    (escaped), every well-formed one is still shown, and the answer is not a clean one."""
    write(
        redis_server,
        {
            "h1": clean("h1", chats=["/srv/a.chat"]),
            "evil": "not json",
            b"ev\x1b[2J\xff": "not json",  # a field name to clear the screen, not UTF-8
            "typed": '{"command": "x", "host": 5, "at": 1}',
        },
    )
    shown = receipts_cli(redis_server, tmp_path, COMMAND)
    assert shown.returncode == EXIT_INCOMPLETE, shown.stderr
    assert shown.stderr == ""
    assert "\x1b" not in shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"command {COMMAND}: 4 host(s) answered, 1 chat(s) reached;")
    assert lines[0].endswith("refused, failed or unreadable on: ev\\x1b[2J\\xff, evil, typed")
    assert lines[1].startswith("  h1  ") and "written 1  already 0  refused 0" in lines[1]
    assert lines[2] == "    /srv/a.chat"
    assert lines[3].startswith("  ev\\x1b[2J\\xff  unreadable receipt: JSON is malformed")
    assert lines[4].startswith("  evil  unreadable receipt: JSON is malformed")
    assert lines[5].startswith("  typed  unreadable receipt: Expected `str`, got `int`")
    assert len(lines) == 6

    as_json = receipts_cli(redis_server, tmp_path, COMMAND, "--json")
    assert as_json.returncode == EXIT_INCOMPLETE, as_json.stderr
    found = json.loads(as_json.stdout)
    assert [r["host"] for r in found["receipts"]] == ["h1"]
    assert [u["host"] for u in found["unreadable"]] == ["ev\x1b[2J\\xff", "evil", "typed"]
    assert found["incomplete"] == ["ev\x1b[2J\\xff", "evil", "typed"]
    assert found["missing"] == [] and found["chats"] == 1


def test_receipts_and_beats_nested_too_deeply_hide_nothing(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """An unknown field nested past what the decoder walks: that receipt is unreadable,
    that heartbeat left out, and the rest shown (``fleet status`` too)."""
    nested = "[" * too_deep() + "]" * too_deep()  # past this interpreter's decoder
    deep = f'{{"command": "{COMMAND}", "host": "h2", "at": 1, "z": {nested}}}'
    write(redis_server, {"h1": clean("h1"), "h2": deep}, beats=("h1",))
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.hset(KEYS.hosts, "h3", f'{{"host": "h3", "at": 1, "z": {nested}}}')
    finally:
        client.close()
    shown = receipts_cli(redis_server, tmp_path, COMMAND, "--json")
    assert shown.returncode == EXIT_INCOMPLETE, shown.stderr
    found = json.loads(shown.stdout)
    assert [r["host"] for r in found["receipts"]] == ["h1"]
    assert found["unreadable"] == [{"host": "h2", "reason": "nested too deeply"}]
    status = run(tmp_path, "fleet", "status", "--config", str(tmp_path / "ops.toml"), "--json")
    assert status.returncode == 0, status.stderr
    assert [h["host"] for h in json.loads(status.stdout)["hosts"]] == ["h1"]


def test_a_receipt_filed_under_another_host_or_command_is_not_an_answer(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A well-formed receipt whose own host or command is not where it was filed says
    nothing of that host: shown as unreadable, never as its clean answer."""
    write(
        redis_server,
        {"h1": clean("h2", chats=["/srv/a.chat"]), "h3": clean("h3", command="d" * 32)},
        beats=("h1", "h3"),
    )
    found = json.loads(receipts_cli(redis_server, tmp_path, COMMAND, "--json").stdout)
    assert found["receipts"] == [] and found["chats"] == 0
    assert [u["host"] for u in found["unreadable"]] == ["h1", "h3"]
    assert found["incomplete"] == ["h1", "h3"]


@pytest.mark.parametrize("at", [1e20, -1e20, 1e17, 1e15])
def test_a_receipt_time_out_of_range_is_shown_not_raised(
    redis_server: RedisServer, tmp_path: Path, at: float
) -> None:
    """A host's clock is a float it wrote: past ``time_t`` or year 9999 it is shown as out
    of range in its line, the other receipts as ever, never as a crash."""
    write(redis_server, {"h1": clean("h1"), "h2": clean("h2", at=at, chats=["/srv/b.chat"])})
    shown = receipts_cli(redis_server, tmp_path, COMMAND)
    assert shown.returncode == EXIT_OK, shown.stderr  # well-formed and clean, if odd
    lines = shown.stdout.splitlines()
    assert lines[1].startswith("  h1  ") and lines[1].split("  ")[2].endswith(" UTC")
    assert lines[2] == f"  h2  time out of range ({at!r})  written 1  already 0  refused 0"
    assert lines[3] == "    /srv/b.chat"


REFUSED = ["/srv/b.chat: its inbox is a symlink"]


@pytest.mark.parametrize(
    ("answer", "beats"),
    [
        pytest.param({"refused": REFUSED}, (), id="refused"),
        pytest.param(
            {"refused": ["more chats matched than [fleet] max_chats (100) allows"]},
            (),
            id="over-max-chats",
        ),
        pytest.param({"error": "the command was trimmed before this host read it"}, (), id="error"),
        pytest.param({"error": ""}, (), id="empty-error"),
        # h3 has a heartbeat and no receipt: the refusal is news all the same
        pytest.param({"refused": REFUSED}, ("h1", "h2", "h3"), id="refused-and-missing"),
    ],
)
def test_a_refusal_or_an_error_is_not_success(
    redis_server: RedisServer, tmp_path: Path, answer: dict[str, Any], beats: tuple[str, ...]
) -> None:
    """A refusal or an error in any answer exits EXIT_INCOMPLETE, text and JSON alike, even
    while another host has not answered: a script checking the code never takes a refused
    chat for a reached one."""
    write(redis_server, {"h1": clean("h1"), "h2": clean("h2", **answer)}, beats)
    for options in ((), ("--json",)):
        shown = receipts_cli(redis_server, tmp_path, COMMAND, *options)
        assert shown.returncode == EXIT_INCOMPLETE, (options, shown.stdout, shown.stderr)
        assert shown.stderr == ""
    as_json = json.loads(shown.stdout)
    assert as_json["incomplete"] == ["h2"]
    assert as_json["missing"] == (["h3"] if beats else [])


def test_a_chat_a_real_host_could_not_write_fails_the_receipts(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """End to end: a real host refuses a chat whose inbox is a symlink and writes the other;
    ``scoutd fleet receipts`` lists the refusal and exits EXIT_INCOMPLETE."""
    with fleet_host(redis_server, "h1") as host:
        wait_connected(host)
        job = os.path.join(host.dir, "job")
        os.makedirs(os.path.join(host.dir, "elsewhere"))
        os.makedirs(job)
        good, bad = os.path.join(job, "a.chat"), os.path.join(job, "b.chat")
        for chat in (good, bad):
            with open(chat, "w") as handle:
                handle.write("[]")
        os.symlink(os.path.join(host.dir, "elsewhere"), os.path.join(job, "b.inbox"))
        ops = operator(redis_server)
        command = publish_sync(ops, "abort", f"chat={job}/*.chat", "job cancelled")
        (receipt,) = wait_receipts(ops, command.id, ["h1"]).receipts
        assert receipt.chats == [good] and len(receipt.refused) == 1
        shown = receipts_cli(redis_server, tmp_path, command.id)
        assert shown.returncode == EXIT_INCOMPLETE, shown.stderr
        assert "refused, failed or unreadable on: h1" in shown.stdout
        assert f"    refused: {bad}" in shown.stdout
        unanswered = receipts_cli(redis_server, tmp_path, "0" * 32)
        assert unanswered.returncode == EXIT_ERROR  # no receipt at all: h1 has not answered
        assert "no answer yet from: h1;" in unanswered.stdout
