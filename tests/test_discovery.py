"""Socket discovery: the order of docs/OPERATIONS.md, with real sockets in real directories."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoutd.discovery import SYSTEM_SOCKET, discover_socket, socket_candidates, user_socket


@pytest.fixture
def tmp() -> Iterator[Path]:
    """A short private directory (Unix socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="sd"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


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
