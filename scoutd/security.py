"""Who may talk to the daemon, and which save files it may touch (SPEC section 10).

Pure checks over data the kernel vouches for: SO_PEERCRED credentials and
paths resolved with ``os.path.realpath``. The server calls them at accept time
and per request; nothing here raises for a malformed input other than
:class:`Forbidden`.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from .config import DaemonConfig

__all__ = [
    "Forbidden",
    "PeerCred",
    "check_peer",
    "check_save_file",
    "peer_credentials",
    "process_owned_by",
    "resolve_roots",
]

_UCRED = struct.Struct("3i")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}


class Forbidden(Exception):
    """A peer or a path the configuration does not allow; ``str()`` is the reason."""


@dataclass(frozen=True, slots=True)
class PeerCred:
    """The connecting process as the kernel saw it at ``connect()``."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> PeerCred:
    """Read SO_PEERCRED from a connected AF_UNIX socket (raises OSError)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCred(pid=pid, uid=uid, gid=gid)


def check_peer(peer: PeerCred, config: DaemonConfig, own_uid: int | None = None) -> None:
    """Raise :class:`Forbidden` unless ``peer`` may use the daemon.

    ``allowed_uids`` unset means the daemon's own uid only. Root gets no
    special treatment: uid 0 is let in only when listed or when the daemon
    itself runs as root. A peer whose primary gid is in ``allowed_gids`` is let
    in too (the socket file's group and mode gate who can connect at all).
    """
    own = os.getuid() if own_uid is None else own_uid
    uids = (own,) if config.allowed_uids is None else config.allowed_uids
    if peer.uid in uids or peer.gid in config.allowed_gids:
        return
    raise Forbidden(f"peer uid {peer.uid} (gid {peer.gid}, pid {peer.pid}) is not allowed")


def resolve_roots(roots: Iterable[str]) -> tuple[str, ...]:
    """The allowed roots with their symlinks resolved, as compared by :func:`check_save_file`."""
    return tuple(os.path.realpath(root) for root in roots if os.path.isabs(root))


def check_save_file(save_file: str, roots: Iterable[str]) -> str:
    """Return ``save_file`` with its directory resolved, or raise :class:`Forbidden`.

    The path must be absolute and NUL-free; its directory is resolved with
    ``realpath`` (so ``..`` and symlinked directories cannot escape) and the
    result must lie under one of ``roots`` (already resolved, see
    :func:`resolve_roots`). The file itself need not exist; a symlink as the
    last component is not followed (the inbox is a sibling, never the target).
    """
    if not isinstance(save_file, str) or not save_file:
        raise Forbidden("save_file must be a non-empty string")
    if "\0" in save_file:
        raise Forbidden("save_file contains a NUL byte")
    if not os.path.isabs(save_file):
        raise Forbidden(f"save_file must be an absolute path: {save_file!r}")
    directory, base = os.path.split(save_file)
    if base in ("", ".", ".."):
        raise Forbidden(f"save_file must name a file: {save_file!r}")
    resolved = os.path.join(os.path.realpath(directory), base)
    for root in roots:
        try:
            if os.path.commonpath([root, resolved]) == root:
                return resolved
        except ValueError:
            continue
    raise Forbidden(f"save_file {save_file!r} resolves to {resolved!r}, outside allowed_roots")


def process_owned_by(pid: int, uid: int) -> bool:
    """Whether ``/proc/<pid>`` exists and belongs to ``uid`` (never raises)."""
    if pid < 2 or pid == os.getpid():
        return False
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False
