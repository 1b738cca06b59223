"""The configuration as a hurried operator and a hostile client leave it.

A config file caught between two writes must never run with a value wider than
the running one: a reload that drops a ``[daemon]`` key, or a ``[prompt]``
limit an override may only lower, that the running file set is refused as
partial (docs/OPERATIONS.md, "Reloading"). And a value that is not UTF-8 text
(an undecodable byte of the environment or of the command line) is refused by
name like any other bad value, never an internal error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import scoutd
from scoutd import protocol
from scoutd.config import TIGHTEN_ONLY, Config, DaemonConfig, resolve_config, with_overrides
from scoutd.errors import ConfigError
from scoutd.server.daemon_config import check_not_partial

from .support.daemon import Daemon, toml_text

ROOT = Path(__file__).resolve().parent.parent

# A value for every [daemon] key that differs from its default, and is valid.
DAEMON_VALUES: dict[str, object] = {
    "socket_path": "/tmp/x.sock",
    "socket_mode": 0o600,
    "socket_group": "root",
    "allowed_uids": [0],
    "allowed_gids": [0],
    "allowed_roots": ["/srv"],
    "max_request_bytes": 1000,
    "max_connections": 3,
    "idle_timeout": 1.0,
    "read_timeout": 1.0,
    "shutdown_timeout": 1.0,
    "rescan_interval": 0.5,
    "watch_mode": "poll",
    "abort_signal": "TERM",
    "log_level": "debug",
    "max_session_messages": 10,
    "max_session_bytes": 1000,
    "session_idle_timeout": 1.0,
    "max_connections_per_uid": 2,
    "max_queued_response_bytes": 1000,
    "max_pending_request_bytes": 1000,
    "max_sessions_per_uid": 1,
    "max_prepares_per_uid": 1,
    "max_queued_response_bytes_per_uid": 1000,
    "max_queued_response_bytes_total": 1000,
    "max_session_bytes_per_uid": 1000,
    "max_total_session_bytes": 1000,
}


def _config(path: Path, tables: dict[str, dict[str, object]]) -> Config:
    path.write_text(toml_text(tables), encoding="utf-8")
    return resolve_config(path, environ={})


def test_every_daemon_key_has_a_value_here() -> None:
    assert set(DAEMON_VALUES) == set(DaemonConfig.__struct_fields__)


@pytest.mark.parametrize(
    "table, key",
    [("daemon", key) for key in DAEMON_VALUES] + [("prompt", key) for key in sorted(TIGHTEN_ONLY)],
)
def test_a_reload_that_drops_a_limit_the_running_file_set_is_partial(
    tmp_path: Path, table: str, key: str
) -> None:
    """Before: only four access keys were kept; a file cut before, say,
    ``max_sessions_per_uid`` or ``abort_signal`` ran with the default (the widest
    limit, no signal to an aborted agent) until the next write was seen."""
    full: dict[str, dict[str, object]] = {"daemon": dict(DAEMON_VALUES), "prompt": {}}
    full["prompt"] = {"epoch_size": 3, **{name: 1000 for name in TIGHTEN_ONLY}}
    running = _config(tmp_path / "full.toml", full)
    del full[table][key]
    cut = _config(tmp_path / "cut.toml", full)
    with pytest.raises(ConfigError, match=rf"\[{table}\] {key} is no longer set in .*cut\.toml"):
        check_not_partial(running, cut)
    check_not_partial(running, running)  # the same keys again: a reload like any other
    check_not_partial(cut, running)  # a key added: never partial


def test_a_file_read_between_two_writes_never_widens_the_daemon() -> None:
    """The real daemon, its file written in place in two parts (closed in between,
    as ``cat a > f; cat b >> f`` does): before, the first part reloaded as
    generation 2, and a uid limited to one session opened three."""
    with Daemon(daemon={"max_sessions_per_uid": 1, "abort_signal": "TERM"}) as d:
        full = toml_text({"daemon": d.daemon})
        cut = full.index("max_sessions_per_uid")
        with open(d.config_path, "w", encoding="utf-8") as handle:
            handle.write(full[:cut])
        with d.client() as c:
            error = c.call("config.reload")["error"]
            assert error["code"] == protocol.CONFIG_INVALID
            assert "[daemon] abort_signal, max_sessions_per_uid are no" in error["message"]
            assert "partly written" in error["message"]
            opened = [
                c.call("session.open", {"save_file": os.path.join(d.dir, f"c{i}.json")})
                for i in range(2)
            ]
            assert "result" in opened[0]
            assert opened[1]["error"]["code"] == protocol.TOO_LARGE
            assert c.call("status")["result"]["config"]["generation"] == 1
            with open(d.config_path, "a", encoding="utf-8") as handle:
                handle.write(full[cut:])
            reloaded = c.call("config.reload")
            assert reloaded["result"]["generation"] >= 2, reloaded
            status = c.call("status")["result"]["config"]
            assert status["last_reload_error"] is None


def _variable(key: str) -> str:
    return "PROMPT_STRATEGY" if key == "prompt_strategies" else key.upper()


@pytest.mark.parametrize("key", ["recall", "context_window", "cache_pricing", "compaction_notice"])
def test_an_undecodable_environment_value_is_refused_by_name(key: str) -> None:
    """Before: ``RECALL=$'\\xff'`` raised UnicodeEncodeError ("unexpected error" on
    the command line, the daemon refused to start without naming the variable),
    and a notice or strategy name of such bytes was taken as it was."""
    name = _variable(key)
    with pytest.raises(ConfigError, match=rf"invalid environment variable {name}=.*not UTF-8"):
        resolve_config(None, environ={name: "a\udcffb"})


@pytest.mark.parametrize(
    "overrides",
    [
        {"\udcff": 1},
        {"context_window": "\udcff"},
        {"compaction_notice": "a\udcffb"},
        {"prompt_strategies": ["inbox", "\udcff"]},
    ],
)
def test_an_override_that_is_not_utf8_is_refused_by_name(overrides: dict[str, object]) -> None:
    """Before: UnicodeEncodeError from the library (``config=``) and from ``--set``."""
    with pytest.raises(ConfigError, match=r"per-call overrides, table \[prompt\]: .*not UTF-8"):
        with_overrides(Config(), overrides)


def test_set_with_undecodable_bytes_is_a_clear_error(tmp_path: Path) -> None:
    """``scoutd prepare --set $'\\xff=1'`` exited 1 with "unexpected error"."""
    chat = ROOT / "examples" / "chats" / "scout.json"
    argv = [sys.executable, "-m", "scoutd", "prepare", "--local", os.fsdecode(chat)]
    done = subprocess.run(
        [*argv, "--set", os.fsdecode(b"\xff=1")],
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "SCOUTD_CONFIG": ""},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert b"not UTF-8" in done.stderr and b"unexpected" not in done.stderr


def test_a_daemon_file_of_unchanged_keys_reloads(tmp_path: Path) -> None:
    """Partial means a key gone, not a value changed: a new value of every key reloads."""
    running = _config(tmp_path / "a.toml", {"daemon": DAEMON_VALUES})
    changed = dict(DAEMON_VALUES, max_sessions_per_uid=5, allowed_roots=["/"])
    check_not_partial(running, _config(tmp_path / "b.toml", {"daemon": changed}))


@pytest.mark.parametrize("overrides", [{"\udcff": 1}, {"compaction_notice": "a\udcffb"}])
def test_a_client_refuses_undecodable_overrides_before_sending(
    tmp_path: Path, overrides: dict[str, object]
) -> None:
    """Before: ``scoutd.Client`` (and ``scoutd prepare --set`` through a daemon)
    raised UnicodeEncodeError while encoding the request."""
    client = scoutd.Client(str(tmp_path / "no.sock"))  # refused before any connection
    with pytest.raises(ConfigError, match=r"per-call overrides, table \[prompt\]: .*not UTF-8"):
        client.prepare_prompt([{"role": "user", "content": "x"}], config=overrides)


@pytest.mark.parametrize("value", [-1, 2**32 - 1, 2**40])
@pytest.mark.parametrize("key", ["allowed_uids", "allowed_gids"])
def test_an_id_no_user_can_have_is_refused_by_name(tmp_path: Path, key: str, value: int) -> None:
    """Before: ``allowed_uids = [-1]`` (a typo for a user) was taken silently, and
    let no one in; a uid is 0 to 2**32 - 2 ((uid_t) -1 is "no uid")."""
    path = tmp_path / "c.toml"
    path.write_text(f"[daemon]\n{key} = [0, {value}]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"`daemon\.{key}\[1\]`"):
        resolve_config(path, environ={})
    path.write_text(f"[daemon]\n{key} = [0, {2**32 - 2}]\n", encoding="utf-8")
    assert getattr(resolve_config(path, environ={}).daemon, key) == (0, 2**32 - 2)


def test_a_reload_says_which_changes_wait_for_a_restart() -> None:
    """A changed restart-only ``[daemon]`` key and a ``[fleet]`` table added by a
    reload are logged as waiting for a restart (the table was taken silently)."""
    with Daemon() as d:
        d.write_config(
            toml_text({"daemon": {**d.daemon, "socket_mode": 0o600}, "fleet": {"host": "h1"}})
        )
        with d.client() as c:
            assert c.call("config.reload")["result"]["generation"] == 2
        log = d.log()
        assert "[daemon] socket_mode changed: takes effect after a restart" in log
        assert "[fleet] changed: takes effect after a restart" in log
