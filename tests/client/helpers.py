"""What the client tests share: the daemon's [prompt] table and paths under its directory.

Each daemon runs ``python -m scoutd serve`` with its own config file and
socket in a short temp directory (Unix socket paths must stay under 108
bytes). The in-process library, given the same config file and environment,
is the reference for every answer.
"""

from __future__ import annotations

import os

from scoutd.config import Config, resolve_config

from ..support.daemon import Daemon

ABORT_WAIT = 10.0  # the daemon pushes aborts within milliseconds; this bounds a failure

# The daemon's [prompt] table: not the defaults, so that agreement with the
# library shows that the daemon applies its file.
PROMPT = {
    "epoch_tool_call_threshold": 30,
    "epoch_full_tool_calls": 8,
    "epoch_compacted_tool_calls": 30,
    "epoch_size": 10,
}


def daemon_config(daemon: Daemon) -> Config:
    """The daemon's configuration, computed in-process from its file and environment."""
    return resolve_config(daemon.config_path, environ={**os.environ, **daemon.env})


def chat_path(daemon: Daemon, name: str) -> str:
    """A save file named ``name`` in a directory the daemon may use."""
    os.makedirs(os.path.join(daemon.dir, "chats"), exist_ok=True)
    return os.path.join(daemon.dir, "chats", f"{name}.chat")


def refusals(daemon: Daemon) -> int:
    """The errors the daemon has answered so far (a request refused, or a retry's)."""
    errors: int = daemon.status()["counts"]["errors"]
    return errors
