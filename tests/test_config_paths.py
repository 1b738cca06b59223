"""The light verbs' reading of the config file agrees with the daemon's.

:func:`scoutd.config_paths.read_daemon_paths` reads ``[daemon] socket_path``
and ``allowed_roots`` alone, with the standard library; the daemon reads the
whole file through msgspec (:func:`scoutd.config.resolve_config`). On a file
that holds nothing else, the two must accept and refuse the same files and
give the same values.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.config import DaemonConfig, resolve_config
from scoutd.config_paths import (
    DEFAULT_ALLOWED_ROOTS,
    DEFAULT_SOCKET_PATH,
    DaemonPaths,
    read_daemon_paths,
)
from scoutd.errors import ConfigError


def _toml_string(text: str) -> str:
    escaped = []
    for char in text:
        if char in '"\\' or ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    return "[" + ", ".join(_toml_value(item) for item in value) + "]"


_PATHS = st.sampled_from(["/", "/srv/chats", "/a b/ü", "relative", "./x", "", "/nul\0here"])
_ROOTS = st.lists(st.sampled_from(["/", "/srv/chats", "/a b/ü"]), min_size=1, max_size=3)
_VALUES = st.one_of(
    _PATHS,
    st.text(max_size=8),
    st.integers(-2, 2),
    st.booleans(),
    st.lists(_PATHS, max_size=3),
    st.lists(st.one_of(_PATHS, st.integers(0, 3)), min_size=1, max_size=3),
)


def _outcome(read: Any, path: str) -> tuple[str, tuple[str, tuple[str, ...]] | None]:
    try:
        found = read(path)
    except ConfigError:
        return "refused", None
    return "accepted", found


def _light(path: str) -> tuple[str, tuple[str, ...]]:
    paths = read_daemon_paths(path)
    return paths.socket_path, paths.allowed_roots


def _whole(path: str) -> tuple[str, tuple[str, ...]]:
    daemon = resolve_config(path, environ={}).daemon
    return daemon.socket_path, daemon.allowed_roots


def test_the_light_reader_accepts_and_refuses_what_the_daemon_does(tmp_path: Path) -> None:
    """Files of random ``socket_path`` and ``allowed_roots`` values (either absent, a
    table or dotted keys): the same outcome and values from both readers; then the
    floor of what the property reached, so that it cannot pass by testing nothing."""
    reached: Counter[str] = Counter()
    config = tmp_path / "scoutd.toml"

    @settings(max_examples=300, derandomize=True, deadline=None)
    @given(
        socket=st.one_of(st.none(), _PATHS, _VALUES),
        roots=st.one_of(st.none(), _ROOTS, _VALUES),
        table=st.booleans(),
    )
    def same_outcome(socket: Any, roots: Any, table: bool) -> None:
        lines = []
        if socket is not None:
            lines.append(f"socket_path = {_toml_value(socket)}")
        if roots is not None:
            lines.append(f"allowed_roots = {_toml_value(roots)}")
        lines = ["[daemon]", *lines] if table else [f"daemon.{line}" for line in lines]
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        kind, found = _outcome(_light, str(config))
        assert (kind, found) == _outcome(_whole, str(config)), config.read_text()
        reached[kind] += 1

    same_outcome()
    assert reached["accepted"] >= 30 and reached["refused"] >= 100, reached


def test_defaults_are_the_daemons() -> None:
    assert DaemonConfig().socket_path == DEFAULT_SOCKET_PATH
    assert DaemonConfig().allowed_roots == DEFAULT_ALLOWED_ROOTS


def test_what_the_file_sets_and_what_it_leaves(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("\n")
    assert read_daemon_paths(str(empty)) == DaemonPaths(
        DEFAULT_SOCKET_PATH, DEFAULT_ALLOWED_ROOTS, socket_set=False
    )
    only = tmp_path / "only.toml"
    only.write_text('[daemon]\nsocket_path = "/run/x.sock"\n[prompt]\nepoch_sise = 3\n')
    # the rest of the file is not looked at: the typo in [prompt] is not this reader's
    assert read_daemon_paths(str(only)) == DaemonPaths(
        "/run/x.sock", DEFAULT_ALLOWED_ROOTS, socket_set=True
    )
    with pytest.raises(ConfigError, match="epoch_sise"):
        resolve_config(str(only), environ={})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"daemon = 3\n", "`daemon` is not a table"),
        (b'[daemon]\nallowed_roots = ["/a"', "invalid config file"),
        (b"\xff\xfe", "invalid config file"),
        (b"[daemon]\nallowed_roots = []\n", "at least one directory"),
        (b'[daemon]\nallowed_roots = ["a"]\n', "'a' is not an absolute path"),
        (b'[daemon]\nallowed_roots = ["/a\\u0000b"]\n', "is not an absolute path"),
        (b"[daemon]\nsocket_path = 1\n", "`daemon.socket_path` is not a string"),
        (b'[daemon]\nsocket_path = "/a\\u0000b"\n', "is not a path"),
        (b"x = " + b"[" * 3000 + b"]" * 3000 + b"\n", "invalid config file"),
    ],
)
def test_a_file_it_refuses_is_named(tmp_path: Path, content: bytes, message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as caught:
        read_daemon_paths(str(config))
    assert str(config) in str(caught.value)
