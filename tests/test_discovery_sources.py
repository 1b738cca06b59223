"""Where discovery reads the socket from (the light verbs' reading of the config file,
the environment it is handed) and what a failed connection says, sentence by sentence."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest

from scoutd.discovery import (
    SYSTEM_SOCKET,
    FoundSocket,
    discover_socket,
    path_state,
    socket_candidates,
    unreachable,
    user_socket,
)
from scoutd.errors import ConfigError
from scoutd.pricing import DEFAULT_PRESET, preset_for_format


def configured(tmp: Path, extra: str = "") -> tuple[Path, str]:
    """A config file that sets the socket (and maybe more); the socket it names."""
    sock = str(tmp / "named.sock")
    config = tmp / "scoutd.toml"
    config.write_text(f'[daemon]\nsocket_path = "{sock}"\n{extra}')
    return config, sock


def test_the_light_verbs_read_only_the_socket_from_the_config_file(tmp: Path) -> None:
    """``paths_only``: a mistake elsewhere in the file does not stop a notify; the
    whole reading refuses it."""
    config, sock = configured(tmp, "[prompt]\nepoch_sise = 3\n")
    environ = {"XDG_RUNTIME_DIR": str(tmp / "xdg")}
    where = f"socket_path in {config}"
    assert socket_candidates(str(config), environ, paths_only=True) == [(sock, where)]
    found = discover_socket(config_path=str(config), environ=environ, paths_only=True)
    assert isinstance(found, FoundSocket)
    assert (found, found.tried) == (sock, ((sock, where),))
    with pytest.raises(ConfigError, match="epoch_sise"):
        socket_candidates(str(config), environ)


def test_the_config_file_is_named_by_the_environment_handed_over(tmp: Path) -> None:
    """``$SCOUTD_CONFIG`` of the mapping given, not of this process, in both readings."""
    config, sock = configured(tmp)
    environ = {"SCOUTD_CONFIG": str(config), "XDG_RUNTIME_DIR": str(tmp / "xdg")}
    assert "SCOUTD_CONFIG" not in os.environ or os.environ["SCOUTD_CONFIG"] != str(config)
    for paths_only in (False, True):
        found = socket_candidates(None, environ, paths_only=paths_only)
        assert found == [(sock, f"socket_path in {config}")]


def test_a_config_file_without_the_socket_leaves_the_user_and_system_sockets(
    tmp: Path,
) -> None:
    plain = tmp / "plain.toml"
    plain.write_text("[daemon]\nrescan_interval = 30.0\n")
    environ = {"XDG_RUNTIME_DIR": str(tmp / "xdg")}
    expected = [(user_socket(environ), "the user's socket"), (SYSTEM_SOCKET, "the system socket")]
    for paths_only in (False, True):
        assert socket_candidates(str(plain), environ, paths_only=paths_only) == expected


def test_the_users_socket_is_read_from_the_mapping_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/elsewhere")
    assert user_socket({"XDG_RUNTIME_DIR": "/run/user/7"}) == "/run/user/7/scoutd/scoutd.sock"
    assert user_socket() == "/run/user/elsewhere/scoutd/scoutd.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert user_socket() == f"/tmp/scoutd-{os.getuid()}/scoutd.sock"


def test_a_private_directory_may_let_others_in_but_not_write(tmp: Path) -> None:
    """Mode 0711 (others may pass, not list nor write) is still the user's alone."""
    environ = {"XDG_RUNTIME_DIR": str(tmp / "xdg")}
    (tmp / "xdg" / "scoutd").mkdir(parents=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(user_socket(environ))
        for mode, found in ((0o711, user_socket(environ)), (0o731, SYSTEM_SOCKET)):
            os.chmod(tmp / "xdg" / "scoutd", mode)
            assert discover_socket(environ=environ, read_config=False) == found
            assert path_state(user_socket(environ)) == (
                "a socket"
                if mode == 0o711
                else "in a directory that is not yours alone: not trusted"
            )
    finally:
        server.close()


def test_path_state_says_what_stands_at_a_path(tmp: Path) -> None:
    (tmp / "file").write_text("")
    assert path_state(str(tmp / "absent")) == "no such file"
    assert path_state(str(tmp / "file" / "below")) == "not a directory"
    assert path_state(str(tmp / "file")) == "not a socket: a regular file"


def test_a_failed_connection_is_told_in_one_sentence_of_each_shape(tmp: Path) -> None:
    absent = str(tmp / "absent.sock")
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    assert unreachable(absent, TimeoutError()) == (
        f"cannot connect to scoutd at {absent}: timed out (is the daemon running?)"
    )
    assert unreachable(absent, FileNotFoundError(errno.ENOENT, "")) == (
        f"cannot connect to scoutd at {absent}: no such file (is the daemon running?)"
    )
    assert unreachable(absent, refused) == (
        f"cannot connect to scoutd at {absent}: Connection refused (is the daemon running?)"
    )
    assert unreachable(absent, ValueError("odd")) == (
        f"cannot connect to scoutd at {absent}: odd (is the daemon running?)"
    )
    one = FoundSocket(absent, ((absent, "$SCOUTD_SOCKET"),))
    assert unreachable(one, refused) == (
        f"cannot connect to scoutd at {absent} ($SCOUTD_SOCKET): Connection refused"
        " (is the daemon running?)"
    )
    other = str(tmp / "other.sock")
    two = FoundSocket(absent, ((other, "the user's socket"), (absent, "the system socket")))
    assert unreachable(two, refused) == (
        f"cannot connect to scoutd: looked at the user's socket {other} (no such file),"
        f" then the system socket {absent} (Connection refused); start a daemon with"
        " scripts/serve (from a checkout) or systemctl start scoutd, or name its socket"
        " with --socket or $SCOUTD_SOCKET"
    )


def test_an_unknown_format_is_priced_as_the_default() -> None:
    assert preset_for_format("no-such-format") == DEFAULT_PRESET
