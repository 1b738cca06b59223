"""Where a client finds the local daemon's socket when it is not told.

The order, first match wins (docs/OPERATIONS.md, "Finding the daemon"):

1. the socket given explicitly (``--socket``, ``Client(path)``);
2. ``$SCOUTD_SOCKET``;
3. ``[daemon] socket_path`` set in the config file (``--config``,
   ``$SCOUTD_CONFIG``, else ``/etc/scoutd/scoutd.toml`` if it exists);
4. the first of these that is a socket: the user's own socket,
   ``$XDG_RUNTIME_DIR/scoutd/scoutd.sock`` (or, without ``$XDG_RUNTIME_DIR``,
   ``/tmp/scoutd-<uid>/scoutd.sock``), where ``scripts/serve`` listens by
   default, then the system socket ``/run/scoutd/scoutd.sock`` (systemd);
5. else the system socket, so that the error names where the daemon was
   expected.

A user socket counts only in a directory owned by the caller that nobody else
may write to, so another account cannot plant a socket there to impersonate
the daemon.

The path found is a :class:`FoundSocket`, a ``str`` that remembers every place
looked at: when no daemon answers there, the error names them all, in order
(:func:`unreachable`), instead of only the last fallback.

The command line finds its configuration file through the socket found here
(:func:`scoutd.cli.config_file.discover_config`, which asks that daemon); this
module asks no daemon, so the client can use it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping

from .config_paths import DEFAULT_SOCKET_PATH, config_file_path, read_daemon_paths
from .paths import file_kind

__all__ = [
    "SOCKET_ENV",
    "SYSTEM_SOCKET",
    "FoundSocket",
    "discover_socket",
    "path_state",
    "socket_candidates",
    "unreachable",
    "user_socket",
]

SOCKET_ENV = "SCOUTD_SOCKET"
SYSTEM_SOCKET = DEFAULT_SOCKET_PATH
SOCKET_NAME = "scoutd.sock"


def user_socket(environ: Mapping[str, str] | None = None) -> str:
    """The current user's own socket path: under ``$XDG_RUNTIME_DIR``, else under /tmp."""
    environ = os.environ if environ is None else environ
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        return os.path.join(runtime, "scoutd", SOCKET_NAME)
    return os.path.join("/tmp", f"scoutd-{os.getuid()}", SOCKET_NAME)


def _private_socket(path: str) -> bool:
    """Whether ``path`` is a socket in a directory of ours that no one else may write."""
    try:
        directory = os.lstat(os.path.dirname(path))
        entry = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(directory.st_mode)
        and directory.st_uid == os.getuid()
        and not directory.st_mode & 0o022
        and stat.S_ISSOCK(entry.st_mode)
    )


def socket_candidates(
    config_path: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    read_config: bool = True,
    paths_only: bool = False,
) -> list[tuple[str, str]]:
    """Every place looked at, in order, as ``(path, where it comes from)``.

    Reads the config file (raising ConfigError if it is invalid) only when no
    earlier source names the socket, and never when ``read_config`` is false
    (step 3 skipped: for a caller that could not read the file). ``paths_only``:
    only the file's ``socket_path`` and ``allowed_roots`` are read and checked
    (:func:`scoutd.config_paths.read_daemon_paths`, the light verbs'), not the
    whole configuration.
    """
    environ = os.environ if environ is None else environ
    found: list[tuple[str, str]] = []
    if environ.get(SOCKET_ENV):
        found.append((environ[SOCKET_ENV], f"${SOCKET_ENV}"))
        return found
    if read_config:
        configured = _configured_socket(config_path, environ, paths_only=paths_only)
        if configured is not None:
            found.append(configured)
            return found
    found.append((user_socket(environ), "the user's socket"))
    found.append((SYSTEM_SOCKET, "the system socket"))
    return found


def _configured_socket(
    config_path: str | None, environ: Mapping[str, str], *, paths_only: bool
) -> tuple[str, str] | None:
    """``socket_path`` as the config file sets it, and where; None: it does not."""
    if paths_only:
        path = config_file_path(config_path, environ)
        if path is None:
            return None
        paths = read_daemon_paths(path)
        return (paths.socket_path, f"socket_path in {path}") if paths.socket_set else None
    from .config import resolve_config  # msgspec: the client has it already

    config = resolve_config(config_path, environ=environ)
    if config.origins.get("daemon.socket_path") != "file":
        return None
    return config.daemon.socket_path, f"socket_path in {config.path}"


class FoundSocket(str):
    """A socket path found by discovery, with the places looked at (``tried``), in order."""

    tried: tuple[tuple[str, str], ...]

    def __new__(cls, path: str, tried: tuple[tuple[str, str], ...]) -> FoundSocket:
        found = super().__new__(cls, path)
        found.tried = tried
        return found


def discover_socket(
    explicit: str | None = None,
    *,
    config_path: str | None = None,
    environ: Mapping[str, str] | None = None,
    read_config: bool = True,
    paths_only: bool = False,
) -> str:
    """The socket a client should connect to, found in the order of this module's doc
    (without step 3 when ``read_config`` is false; ``paths_only``: as for
    :func:`socket_candidates`).

    An explicit path comes back as it is; a path found is a :class:`FoundSocket`.
    """
    if explicit:
        return explicit
    candidates = tuple(
        socket_candidates(config_path, environ, read_config=read_config, paths_only=paths_only)
    )
    if len(candidates) == 1:
        return FoundSocket(candidates[0][0], candidates)
    user, system = candidates[0][0], candidates[1][0]
    return FoundSocket(user if _private_socket(user) else system, candidates)


def path_state(path: str) -> str:
    """Why nothing was reached at ``path``, judged from the file system alone."""
    try:
        entry = os.lstat(path)
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    if not stat.S_ISSOCK(entry.st_mode):
        return f"not a socket: {file_kind(entry.st_mode)}"
    if not _private_socket(path) and path != SYSTEM_SOCKET:
        return "in a directory that is not yours alone: not trusted"
    return "a socket"


def unreachable(path: str, exc: BaseException) -> str:
    """What to tell a user whose client could not connect to ``path``, in one line.

    Names what ``path`` is when it is not a socket at all, every place discovery
    looked at (a :class:`FoundSocket`), and how to start a local daemon.
    """
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or "timed out"
    state = path_state(path)
    if state.startswith("not a socket"):
        reason = state
    elif isinstance(exc, OSError) and exc.errno == errno.ENOENT:
        reason = "no such file"
    tried = getattr(path, "tried", None)
    if not tried:
        hint = "" if reason.startswith("not a socket") else " (is the daemon running?)"
        return f"cannot connect to scoutd at {path}: {reason}{hint}"
    if len(tried) == 1:
        where = tried[0][1]
        return f"cannot connect to scoutd at {path} ({where}): {reason} (is the daemon running?)"
    looked = [
        f"{where} {candidate} ({reason if candidate == path else path_state(candidate)})"
        for candidate, where in tried
    ]
    return (
        f"cannot connect to scoutd: looked at {', then '.join(looked)}; start a daemon with"
        " scripts/serve (from a checkout) or systemctl start scoutd, or name its socket"
        f" with --socket or ${SOCKET_ENV}"
    )
