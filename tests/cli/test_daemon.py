"""``scoutd status``, ``scoutd simulate`` and ``scripts/serve``, with real daemons."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import scoutd
from scoutd.config import resolve_config
from scoutd.discovery import user_socket

from ..support.daemon import Daemon, wait_for
from .helpers import (
    _CONFIG_ENV,
    CLI_TIMEOUT,
    DAEMON_START_TIMEOUT,
    ROOT,
    one_error_line,
    run,
)


def test_simulate_hands_over_its_arguments(home: Path) -> None:
    """Every flag after ``simulate`` belongs to the simulator, --help included."""
    result = run(home, "simulate", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
    assert "scoutd prepare" not in result.stdout


def test_status(home: Path, daemon: Daemon) -> None:
    readable = run(home, "status", "--socket", daemon.socket_path)
    assert readable.returncode == 0, readable.stderr
    lines = readable.stdout.splitlines()
    assert any(re.fullmatch(rf"version\s+{re.escape(scoutd.__version__)}", ln) for ln in lines)
    assert any(line.startswith("counts.requests ") for line in lines), readable.stdout

    as_json = run(home, "status", "--json", "--socket", daemon.socket_path)
    assert as_json.returncode == 0, as_json.stderr
    status = json.loads(as_json.stdout)
    assert status["version"] == scoutd.__version__
    assert status["config"]["path"] == daemon.config_path


def test_status_reaches_the_daemon_whose_config_file_is_broken(home: Path, daemon: Daemon) -> None:
    """The daemon keeps its last good config and reports the reload error in ``status``:
    an unreadable file must not stop ``status`` (it exited 2), only the verbs it serves."""
    runtime = home / "x"
    (runtime / "scoutd").mkdir(parents=True, mode=0o700)
    os.link(daemon.socket_path, runtime / "scoutd" / "scoutd.sock")  # the user's socket, found
    with open(daemon.config_path, "a") as config:
        config.write("rescan_interval = 1\n")  # in [daemon], twice: not TOML
    wait_for(lambda: daemon.status()["config"]["last_reload_error"] is not None, 10, "a reload")
    env = {"SCOUTD_CONFIG": daemon.config_path, "XDG_RUNTIME_DIR": str(runtime)}
    shown = run(home, "status", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "Cannot overwrite" in json.loads(shown.stdout)["config"]["last_reload_error"]
    assert "looking for the daemon without it" in one_error_line(shown)
    # prepare is the daemon's configuration at work: it must not go to another daemon
    prepared = run(home, "prepare", input="[]", env=env)
    assert prepared.returncode == 2 and "Cannot overwrite" in prepared.stderr


def test_daemon_unavailable_exits_1(home: Path) -> None:
    for args in (("status",), ("prepare",)):
        result = run(home, *args, "--socket", str(home / "absent.sock"), input="[]")
        assert result.returncode == 1
        assert "absent.sock" in one_error_line(result)


def _serve_env(home: Path, **extra: str) -> dict[str, str]:
    """scripts/serve's environment: config in ``home/r``, socket under ``home/x`` (XDG)."""
    environ = {k: v for k, v in os.environ.items() if k not in _CONFIG_ENV}
    environ.update(SCOUTD_RUN_DIR=str(home / "r"), XDG_RUNTIME_DIR=str(home / "x"))
    environ.update(HOME=str(home), **extra)
    return environ


def test_serve_script_config_is_valid(home: Path) -> None:
    """The written config is valid, and its socket is the one clients find by themselves."""
    result = subprocess.run(
        [str(ROOT / "scripts" / "serve"), "--print-config"],
        capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False, env=_serve_env(home),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = home / "written.toml"
    written.write_text(result.stdout)
    config = resolve_config(written, environ={})
    assert config.daemon.socket_path == str(home / "x" / "scoutd" / "scoutd.sock")
    assert config.daemon.socket_path == user_socket({"XDG_RUNTIME_DIR": str(home / "x")})
    assert config.daemon.allowed_roots == (str(home / "r"), str(home))
    assert config.daemon.log_level == "info"
    without_xdg = {k: v for k, v in _serve_env(home).items() if k != "XDG_RUNTIME_DIR"}
    fallback = subprocess.run(
        [str(ROOT / "scripts" / "serve"), "--print-config"],
        capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False, env=without_xdg,
    )  # fmt: skip
    assert f'socket_path = "{user_socket({})}"' in fallback.stdout


@pytest.mark.parametrize(("args", "code"), [(("--help",), 0), (("-h",), 0), (("--bogus",), 2)])
def test_serve_script_help_and_usage(home: Path, args: tuple[str, ...], code: int) -> None:
    result = subprocess.run(
        [str(ROOT / "scripts" / "serve"), *args],
        capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False, env=_serve_env(home),
    )  # fmt: skip
    assert result.returncode == code, result.stderr
    if code == 0:
        assert "--print-config" in result.stdout and "SCOUTD_SOCKET" in result.stdout
    else:
        assert "usage: scripts/serve" in result.stderr and result.stdout == ""
    assert not (home / "r").exists()  # neither help nor a mistake writes anything


def _checkout_venv_ready() -> bool:
    """Whether scripts/serve would run without installing anything (no network)."""
    python = ROOT / ".venv" / "bin" / "python"
    if not (ROOT / ".venv" / "bin" / "scoutd").exists() or not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", "import scoutd, anyio, watchdog, msgspec; "
         "print(scoutd.__file__)"],
        capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    return probe.returncode == 0 and probe.stdout.strip().startswith(str(ROOT))


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # exec'd: this is the daemon itself
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=15)


def test_serve_script_runs_the_daemon(home: Path) -> None:
    """scripts/serve serves on the user's socket, which `scoutd status` finds by itself.

    A second scripts/serve refuses before printing anything of its banner.
    """
    if not (ROOT / "scoutd" / "server" / "__init__.py").exists():
        pytest.fail("the daemon's module is missing: scripts/serve cannot serve")
    if not _checkout_venv_ready():
        pytest.skip("the checkout's .venv does not hold this checkout: the script would install")
    sock = home / "x" / "scoutd" / "scoutd.sock"
    found = {"XDG_RUNTIME_DIR": str(home / "x")}
    out = (home / "serve.out").open("w+")
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "serve")],
        stdout=out, stderr=subprocess.STDOUT, text=True, env=_serve_env(home),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            if sock.exists():
                # No --socket, no $SCOUTD_SOCKET, a config without socket_path: discovered.
                status = run(home, "status", "--json", env=found)
                if status.returncode == 0:
                    break
            time.sleep(0.1)
        assert status is not None and status.returncode == 0, (home / "serve.out").read_text()
        assert json.loads(status.stdout)["config"]["path"] == str(home / "r" / "scoutd.toml")
        assert (sock.parent.stat().st_mode & 0o777) == 0o700

        second = subprocess.run(
            [str(ROOT / "scripts" / "serve")],
            capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
            env=_serve_env(home),
        )  # fmt: skip
        assert second.returncode == 1
        assert second.stdout == ""  # no banner
        assert f"a daemon already serves on {sock}" in second.stderr
        assert proc.poll() is None  # the first one still serves
    finally:
        code = _stop(proc)
        out.seek(0)
        printed = out.read()
        out.close()
    assert f"scoutd: socket {sock}" in printed
    assert f'export PATH="{ROOT / ".venv" / "bin"}:$PATH"' in printed
    assert "\n  scoutd status\n" in printed
    assert code == 0, printed
    assert not sock.exists()  # removed on graceful shutdown


def test_status_print_socket_follows_the_discovery_order(home: Path) -> None:
    """--socket, $SCOUTD_SOCKET, the config's socket_path, the user's socket, /run/scoutd."""
    xdg = {"XDG_RUNTIME_DIR": str(home / "x")}
    config = home / "with_socket.toml"
    config.write_text('[daemon]\nsocket_path = "/from/config.sock"\n')

    def printed(*args: str, **env: str) -> str:
        result = run(home, "status", "--print-socket", *args, env={**xdg, **env})
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert printed() == "/run/scoutd/scoutd.sock"  # nothing found: where systemd puts it
    (home / "x" / "scoutd").mkdir(parents=True, mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(home / "x" / "scoutd" / "scoutd.sock"))
        assert printed() == str(home / "x" / "scoutd" / "scoutd.sock")
        assert printed("--config", str(config)) == "/from/config.sock"
        assert printed(SCOUTD_CONFIG=str(config)) == "/from/config.sock"
        assert printed("--config", str(config), SCOUTD_SOCKET="/env.sock") == "/env.sock"
        assert printed("--socket", "/given.sock", SCOUTD_SOCKET="/env.sock") == "/given.sock"
    finally:
        listener.close()
