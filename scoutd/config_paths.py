"""The config file as the light verbs read it: where the daemon listens, what it serves.

``scoutd notify`` and ``scoutd abort`` need two keys of the configuration,
``[daemon] socket_path`` and ``allowed_roots``, and an operator runs them over
many chats: msgspec, which every other reader validates the configuration
with, costs more to import than the interpreter takes to start
(docs/PERFORMANCE.md). This module holds what those two keys are (their
defaults and their rules, which :class:`scoutd.config.DaemonConfig` applies
too), the one way the file is read and parsed (a bounded regular file, TOML;
:mod:`scoutd.config` converts what :func:`load_config_file` returns), and
:func:`read_daemon_paths`, which takes the two keys alone from it. The rest of
the file goes unchecked on that path (docs/OPERATIONS.md, "Notices and
aborts"). Standard library only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any, NamedTuple

from .errors import ConfigError
from .paths import file_kind, printable

__all__ = [
    "DEFAULT_ALLOWED_ROOTS",
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_SOCKET_PATH",
    "MAX_CONFIG_BYTES",
    "DaemonPaths",
    "allowed_roots_problem",
    "config_file_path",
    "load_config_file",
    "read_config_bytes",
    "read_daemon_paths",
    "socket_path_problem",
]

DEFAULT_CONFIG_PATH = "/etc/scoutd/scoutd.toml"
DEFAULT_SOCKET_PATH = "/run/scoutd/scoutd.sock"  # the systemd units'
DEFAULT_ALLOWED_ROOTS: tuple[str, ...] = ("/",)
# A config file is a few KiB (the longest value, the compaction notice, is 64 KiB):
# anything larger is a mistake, never read whole into memory.
MAX_CONFIG_BYTES = 1024 * 1024


class DaemonPaths(NamedTuple):
    """The two keys of ``[daemon]`` the light verbs use, defaults filled in."""

    socket_path: str
    allowed_roots: tuple[str, ...]
    socket_set: bool  # whether the file sets socket_path (docs/OPERATIONS.md, step 3)


def config_file_path(path: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str | None:
    """The config file to read: ``path``, else ``$SCOUTD_CONFIG``, else
    :data:`DEFAULT_CONFIG_PATH` if it is a file; None: none."""
    if path is not None:
        return os.fspath(path)
    if environ.get("SCOUTD_CONFIG"):
        return environ["SCOUTD_CONFIG"]
    if os.path.isfile(DEFAULT_CONFIG_PATH):
        return DEFAULT_CONFIG_PATH
    return None


def read_config_bytes(path: str) -> bytes:
    """The bytes of the config file at ``path``: a regular file of at most
    :data:`MAX_CONFIG_BYTES`, opened without blocking (a FIFO never holds the
    reader, a 1 GB file is never read whole). ConfigError otherwise."""
    shown = printable(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {shown}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            why = f"it is {file_kind(mode)}, not a regular file"
            raise ConfigError(f"cannot read config file {shown}: {why}")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"cannot read config file {shown}: over {MAX_CONFIG_BYTES} bytes")
    return b"".join(chunks)


def load_config_file(path: str, *, allow_empty: bool) -> dict[str, Any]:
    """The config file at ``path``, parsed as TOML, its tables not yet checked.

    An empty file is refused unless ``allow_empty``: it is what the daemon sees
    in the middle of many writes, and never to be taken for "all defaults",
    which would widen ``allowed_roots`` to ``/``. ConfigError for a file that
    cannot be read, is not UTF-8 or is not TOML.
    """
    import tomllib  # the light verbs' --help reads no file

    raw = read_config_bytes(path)
    shown = printable(path)
    if not allow_empty and not raw.strip():
        raise ConfigError(f"config file {shown} is empty")
    try:
        return tomllib.loads(raw.decode("utf-8"))  # pragma: no mutate (codec names are case-blind)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"invalid config file {shown}: {printable(str(exc))}") from None
    except RecursionError:  # tables or arrays nested past what the parser walks
        raise ConfigError(f"invalid config file {shown}: nested too deeply") from None


def allowed_roots_problem(roots: tuple[str, ...]) -> str | None:
    """Why ``allowed_roots`` cannot be used (each entry an absolute path); None: it can."""
    if not roots:
        return "allowed_roots must list at least one directory"
    for root in roots:
        if "\0" in root or not os.path.isabs(root):
            return f"allowed_roots entry {root!r} is not an absolute path"
    return None


def socket_path_problem(path: str) -> str | None:
    """Why ``socket_path`` cannot be used; None: it can."""
    if "\0" in path or not path:
        return f"socket_path {path!r} is not a path"
    return None


def read_daemon_paths(path: str) -> DaemonPaths:
    """``[daemon] socket_path`` and ``allowed_roots`` of the config file at ``path``,
    checked as :class:`scoutd.config.DaemonConfig` checks them; the rest of the
    file is not looked at. An empty file gives the defaults, as it does to
    every reader but the daemon. ConfigError naming the key otherwise.
    """
    shown = printable(path)
    daemon = load_config_file(path, allow_empty=True).get("daemon", {})
    if not isinstance(daemon, dict):
        raise ConfigError(f"invalid config file {shown}: `daemon` is not a table")
    socket_path = daemon.get("socket_path", DEFAULT_SOCKET_PATH)
    roots = daemon.get("allowed_roots", DEFAULT_ALLOWED_ROOTS)
    problem: str | None
    if not isinstance(socket_path, str):
        problem = "`daemon.socket_path` is not a string"
    elif not isinstance(roots, (list, tuple)) or not all(isinstance(r, str) for r in roots):
        problem = "`daemon.allowed_roots` is not an array of strings"
    else:
        roots = tuple(roots)
        problem = socket_path_problem(socket_path) or allowed_roots_problem(roots)
    if problem is not None:
        raise ConfigError(
            f"invalid configuration in config file {shown}, table [daemon]: {printable(problem)}"
        )
    return DaemonPaths(socket_path, roots, "socket_path" in daemon)
