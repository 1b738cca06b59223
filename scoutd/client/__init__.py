"""Clients of the scoutd daemon: :class:`Client` (blocking) and :class:`AsyncClient` (anyio).

Both speak the line-delimited JSON-RPC 2.0 protocol of docs/PROTOCOL.md over the
daemon's Unix socket and mirror the library: ``prepare_prompt`` and ``prepare``
take the arguments of :func:`scoutd.prepare_prompt` (strategy *names* only: no
code goes over the wire) and raise the same errors (:class:`~scoutd.Aborted`,
:class:`~scoutd.UnknownStrategy`, :class:`~scoutd.ConfigError`). Anything else the
daemon refuses is a :class:`~scoutd.errors.RemoteError`; a daemon that cannot be
reached is :class:`~scoutd.errors.DaemonUnavailable`, one that does not answer in
time :class:`~scoutd.errors.DaemonTimeout`.

``_async.py`` is the source of both; ``_sync.py`` is generated from it by
``scripts/unasync`` (docs/ARCHITECTURE.md, "The client and the protocol").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ..discovery import SOCKET_ENV
    from ._async import AsyncClient, AsyncSession
    from ._common import default_socket_path
    from ._reconnect import RECONNECT_ERRNOS, RECONNECT_INITIAL_DELAY, RECONNECT_MAX_DELAY
    from ._sync import Client, Session

# Imported on first use: the blocking client never loads anyio (docs/ARCHITECTURE.md).
__getattr__ = lazy_attributes(
    __name__,
    {
        "AsyncClient": "._async",
        "AsyncSession": "._async",
        "Client": "._sync",
        "Session": "._sync",
        "default_socket_path": "._common",
        "RECONNECT_ERRNOS": "._reconnect",
        "RECONNECT_INITIAL_DELAY": "._reconnect",
        "RECONNECT_MAX_DELAY": "._reconnect",
        "SOCKET_ENV": "..discovery",
    },
)

__all__ = [
    "AsyncClient",
    "AsyncSession",
    "Client",
    "Session",
    "default_socket_path",
    # settings
    "RECONNECT_ERRNOS",
    "RECONNECT_INITIAL_DELAY",
    "RECONNECT_MAX_DELAY",
    "SOCKET_ENV",
]
