"""Every verb finds the same daemon and its config, and says what it tried when it cannot.

A real daemon listens on the user's socket under a private ``$XDG_RUNTIME_DIR``
with its config where ``scripts/serve`` would write it; the commands are told
neither (no ``--socket``, ``--config``, ``$SCOUTD_SOCKET`` or ``$SCOUTD_CONFIG``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.daemon import Daemon
from .helpers import DAEMON_START_TIMEOUT, one_error_line, run

# No config named anywhere: SCOUTD_CONFIG empty counts as unset.
UNNAMED = {"SCOUTD_CONFIG": ""}


def _user_env(home: Path) -> dict[str, str]:
    return {**UNNAMED, "XDG_RUNTIME_DIR": str(home / "x"), "HOME": str(home)}


@pytest.fixture
def user_daemon(home: Path) -> Iterator[Daemon]:
    """A daemon on the user's socket, its config in ``home/r`` as scripts/serve lays it out."""
    (home / "x" / "scoutd").mkdir(parents=True, mode=0o700)
    (home / "x").chmod(0o700)
    (home / "r").mkdir()
    started = Daemon(
        directory=str(home / "r"),
        daemon={"allowed_roots": [str(home / "r"), str(home)], "shutdown_timeout": 2.0},
    )
    started.socket_path = str(home / "x" / "scoutd" / "scoutd.sock")
    started.daemon["socket_path"] = started.socket_path
    started.write_config()
    try:
        started.start(timeout=DAEMON_START_TIMEOUT)
        yield started
    finally:
        started.cleanup()


def test_config_show_finds_the_config_of_the_daemon_status_finds(
    home: Path, user_daemon: Daemon
) -> None:
    env = _user_env(home)
    status = run(home, "status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["config"]["path"] == user_daemon.config_path

    shown = run(home, "config", "show", env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == (
        f"# config file: {user_daemon.config_path}"
        f" (the config of the daemon at {user_daemon.socket_path})"
    )
    assert f'daemon.socket_path = "{user_daemon.socket_path}"  (file)' in lines
    roots = json.dumps([str(home / "r"), str(home)], separators=(",", ":"))
    assert f"daemon.allowed_roots = {roots}  (file)" in lines
    as_json = json.loads(run(home, "config", "show", "--json", env=env).stdout)
    assert as_json["path"] == user_daemon.config_path
    assert as_json["found"].startswith("the config of the daemon at ")


def test_status_prints_the_uptime_with_its_unit(home: Path, user_daemon: Daemon) -> None:
    result = run(home, "status", env=_user_env(home))
    assert result.returncode == 0, result.stderr
    assert re.search(r"^uptime\s+\d+\.\d s( \(.*\))?$", result.stdout, re.M), result.stdout


def test_without_a_daemon_every_verb_names_the_places_it_looked_at(home: Path) -> None:
    env = _user_env(home)
    user = str(home / "x" / "scoutd" / "scoutd.sock")
    for args in (("status",), ("metrics",), ("prepare", "-")):
        line = one_error_line(run(home, *args, input="[]", env=env))
        assert f"the user's socket {user} (no such file)" in line, line
        assert "then the system socket /run/scoutd/scoutd.sock" in line, line
        assert line.index(user) < line.index("/run/scoutd/scoutd.sock")
        assert "scripts/serve" in line, line
    prepare = one_error_line(run(home, "prepare", "-", input="[]", env=env))
    assert "--local" in prepare
    shown = run(home, "config", "show", env=env)
    assert shown.stdout.splitlines()[0].startswith("# config file: none (")


@pytest.mark.parametrize(
    ("target", "kind"), [("/etc/passwd", "a regular file"), ("/", "a directory")]
)
def test_a_socket_that_is_not_a_socket_is_named_so(home: Path, target: str, kind: str) -> None:
    result = run(home, "status", "--socket", target)
    assert result.returncode == 1
    line = one_error_line(result)
    assert line == f"scoutd: cannot connect to scoutd at {target}: not a socket: {kind}"
    assert "refused" not in line and "running" not in line
