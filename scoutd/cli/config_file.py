"""The configuration file a ``scoutd`` verb reads, found the same way for every verb.

``--config``, ``$SCOUTD_CONFIG``, ``/etc/scoutd/scoutd.toml`` if it exists,
else the file of the daemon that socket discovery finds (its ``status``), so
that ``scoutd config show`` and ``scoutd explain`` describe the daemon
``scoutd status`` talks to (docs/OPERATIONS.md, "Finding the daemon"). Here,
above the client it asks with, not in :mod:`scoutd.discovery`, which the
client itself uses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .. import config_paths
from ..discovery import discover_socket, path_state
from ..errors import ScoutdError

__all__ = ["discover_config"]


def _daemon_config(socket_path: str) -> str | None:
    """The config file of the daemon answering at ``socket_path``, None if none answers."""
    if path_state(socket_path) != "a socket":
        return None
    from ..client import Client  # only when a daemon may answer: not for every verb

    try:
        with Client(socket_path, timeout=2.0) as client:
            path = client.status().get("config", {}).get("path")
    except (ScoutdError, OSError):
        return None
    return path if isinstance(path, str) and os.path.isfile(path) else None


def discover_config(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str]:
    """The config file every verb reads, and where it was found, in this module's order.

    ``(None, ...)`` means built-in defaults: no file named, none at
    ``/etc/scoutd/scoutd.toml``, and no daemon found that reports one.
    """
    environ = os.environ if environ is None else environ
    if explicit:
        return explicit, "--config"
    if environ.get("SCOUTD_CONFIG"):
        return environ["SCOUTD_CONFIG"], "$SCOUTD_CONFIG"
    if os.path.isfile(config_paths.DEFAULT_CONFIG_PATH):
        return config_paths.DEFAULT_CONFIG_PATH, "the system config"
    # no file named: there is no socket_path to read from one (nor an environment
    # variable of [prompt] to trip over)
    socket_path = discover_socket(environ=environ, read_config=False)
    path = _daemon_config(socket_path)
    if path is not None:
        return path, f"the config of the daemon at {socket_path}"
    return None, "no config file, and no daemon that reports one"
