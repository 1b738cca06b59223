"""Socket discovery: the order of docs/OPERATIONS.md, with real sockets in real directories."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import scoutd
from scoutd.cli.config_file import discover_config
from scoutd.discovery import (
    SYSTEM_SOCKET,
    FoundSocket,
    discover_socket,
    socket_candidates,
    unreachable,
    user_socket,
)
from scoutd.errors import ConfigError, DaemonUnavailable

from .support.daemon import Daemon


def listen(path: Path) -> socket.socket:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    return server


def test_user_socket_follows_xdg_runtime_dir() -> None:
    assert user_socket({"XDG_RUNTIME_DIR": "/run/user/7"}) == "/run/user/7/scoutd/scoutd.sock"
    fallback = f"/tmp/scoutd-{os.getuid()}/scoutd.sock"
    assert user_socket({}) == fallback
    assert user_socket({"XDG_RUNTIME_DIR": "relative/dir"}) == fallback


def test_without_the_config_file_step_3_is_skipped(tmp: Path) -> None:
    """``read_config=False``: what a caller that could not read the file finds."""
    broken = tmp / "broken.toml"
    broken.write_text('[daemon]\nsocket_path = "/elsewhere/d.sock"\n[prompt]\nepoch_sise = 3\n')
    environ = {"XDG_RUNTIME_DIR": str(tmp / "xdg")}
    with pytest.raises(ConfigError, match="epoch_sise"):
        discover_socket(config_path=str(broken), environ=environ)
    found = socket_candidates(str(broken), environ, read_config=False)
    assert [where for _, where in found] == ["the user's socket", "the system socket"]
    assert discover_socket(config_path=str(broken), environ=environ, read_config=False) == (
        SYSTEM_SOCKET
    )
    with_env = {**environ, "SCOUTD_SOCKET": "/from/env.sock"}
    assert discover_socket(environ=with_env, read_config=False) == "/from/env.sock"


def test_order_explicit_env_config_user_system(tmp: Path) -> None:
    xdg = tmp / "xdg"
    environ = {"XDG_RUNTIME_DIR": str(xdg)}
    empty = tmp / "empty.toml"
    empty.write_text("")
    # Nothing there: the system socket, so that the error names where a daemon was expected.
    assert discover_socket(config_path=str(empty), environ=environ) == SYSTEM_SOCKET
    found = [where for _, where in socket_candidates(str(empty), environ)]
    assert found == ["the user's socket", "the system socket"]

    mine = listen(xdg / "scoutd" / "scoutd.sock")
    try:
        assert discover_socket(config_path=str(empty), environ=environ) == user_socket(environ)
        configured = tmp / "configured.toml"
        configured.write_text('[daemon]\nsocket_path = "/elsewhere/d.sock"\n')
        assert discover_socket(config_path=str(configured), environ=environ) == "/elsewhere/d.sock"
        with_env = {**environ, "SCOUTD_SOCKET": "/from/env.sock"}
        assert discover_socket(config_path=str(configured), environ=with_env) == "/from/env.sock"
        assert discover_socket("/given.sock", environ=with_env) == "/given.sock"
    finally:
        mine.close()


def test_a_user_socket_others_may_write_near_is_not_trusted(tmp: Path) -> None:
    """A directory writable by others could hold a planted socket: never discovered."""
    xdg = tmp / "xdg"
    environ = {"XDG_RUNTIME_DIR": str(xdg)}
    empty = tmp / "empty.toml"
    empty.write_text("")
    planted = listen(xdg / "scoutd" / "scoutd.sock")
    try:
        os.chmod(xdg / "scoutd", 0o777)
        assert discover_socket(config_path=str(empty), environ=environ) == SYSTEM_SOCKET
        os.chmod(xdg / "scoutd", 0o700)
        assert discover_socket(config_path=str(empty), environ=environ) == user_socket(environ)
    finally:
        planted.close()


def test_a_regular_file_is_not_a_socket(tmp: Path) -> None:
    xdg = tmp / "xdg"
    (xdg / "scoutd").mkdir(mode=0o700, parents=True)
    (xdg / "scoutd" / "scoutd.sock").write_text("not a socket")
    empty = tmp / "empty.toml"
    empty.write_text("")
    environ = {"XDG_RUNTIME_DIR": str(xdg)}
    assert discover_socket(config_path=str(empty), environ=environ) == SYSTEM_SOCKET


def test_a_found_socket_remembers_where_it_looked(tmp: Path) -> None:
    environ = {"XDG_RUNTIME_DIR": str(tmp / "xdg")}
    empty = tmp / "empty.toml"
    empty.write_text("")
    found = discover_socket(config_path=str(empty), environ=environ)
    assert isinstance(found, FoundSocket)
    assert found.tried == (
        (user_socket(environ), "the user's socket"),
        (SYSTEM_SOCKET, "the system socket"),
    )
    assert not isinstance(discover_socket("/given.sock"), FoundSocket)


def test_the_client_names_every_place_it_looked_at(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No daemon: the error lists the places in order and how to start one."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp / "xdg"))
    monkeypatch.delenv("SCOUTD_SOCKET", raising=False)
    (tmp / "xdg" / "scoutd").mkdir(parents=True, mode=0o777)
    os.chmod(tmp / "xdg" / "scoutd", 0o777)
    planted = listen(tmp / "xdg" / "scoutd" / "scoutd.sock")
    try:
        with pytest.raises(DaemonUnavailable) as caught:
            scoutd.Client(timeout=2).status()
    finally:
        planted.close()
    message = str(caught.value)
    mine = user_socket({"XDG_RUNTIME_DIR": str(tmp / "xdg")})
    assert f"the user's socket {mine} (in a directory that is not yours alone" in message
    assert f"then the system socket {SYSTEM_SOCKET} (" in message
    assert "scripts/serve" in message and "--socket" in message
    assert "\n" not in message


def test_a_path_that_is_not_a_socket_says_so(tmp: Path) -> None:
    regular = tmp / "file"
    regular.write_text("x")
    for path, kind in ((regular, "a regular file"), (tmp, "a directory")):
        with pytest.raises(DaemonUnavailable) as caught:
            scoutd.Client(str(path), timeout=2).status()
        assert str(caught.value) == f"cannot connect to scoutd at {path}: not a socket: {kind}"
    message = unreachable(str(tmp / "absent.sock"), FileNotFoundError(2, "No such file"))
    assert message.endswith("absent.sock: no such file (is the daemon running?)")


def test_config_is_found_in_order_and_last_from_the_daemon(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xdg = tmp / "xdg"
    environ = {"XDG_RUNTIME_DIR": str(xdg)}
    named = tmp / "named.toml"
    named.write_text("")
    assert discover_config(str(named), {**environ, "SCOUTD_CONFIG": "/env.toml"}) == (
        str(named),
        "--config",
    )
    assert discover_config(None, {**environ, "SCOUTD_CONFIG": "/env.toml"}) == (
        "/env.toml",
        "$SCOUTD_CONFIG",
    )
    assert discover_config(None, environ)[0] is None  # nothing there
    (xdg / "scoutd").mkdir(parents=True, mode=0o700)
    xdg.chmod(0o700)
    (tmp / "d").mkdir()
    daemon = Daemon(directory=str(tmp / "d"))
    daemon.socket_path = user_socket(environ)
    daemon.daemon["socket_path"] = daemon.socket_path
    daemon.write_config()
    try:
        daemon.start()
        assert discover_config(None, environ) == (
            daemon.config_path,
            f"the config of the daemon at {daemon.socket_path}",
        )
    finally:
        daemon.cleanup()
