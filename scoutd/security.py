"""Who may talk to the daemon, and which save files it may touch (docs/OPERATIONS.md).

Pure checks over data the kernel vouches for: SO_PEERCRED credentials and
paths resolved with ``os.path.realpath``. The server calls them at accept time
and per request; nothing here raises for a malformed input other than
:class:`Forbidden`.
"""

from __future__ import annotations

import os
import pwd
import stat
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from .errors import Forbidden  # re-exported: it was defined here
from .inbox.names import inbox_dir
from .paths import display_path

if TYPE_CHECKING:
    import socket

    from .config import DaemonConfig

__all__ = [
    "Forbidden",
    "PeerCred",
    "check_access",
    "check_peer",
    "check_save_file",
    "groups_of",
    "inside_roots",
    "may_take_abort",
    "peer_credentials",
    "process_owned_by",
    "reach_problem",
    "resolve_roots",
]

_UCRED = struct.Struct("3i")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
# SO_PEERGROUPS (Linux 4.13; Python's socket module does not name it): the peer's
# supplementary groups at connect(), gid_t each. getsockopt reads at most 1,024 bytes:
# 256 groups.
_SO_PEERGROUPS = 59
_PEERGROUPS_BYTES = 1024


class PeerCred(NamedTuple):
    """The connecting process as the kernel saw it at ``connect()``."""

    pid: int
    uid: int
    gid: int
    # The process's own supplementary groups (SO_PEERGROUPS); None: not known, the
    # user database's are used (a record not made from a socket).
    groups: frozenset[int] | None = None


def peer_credentials(sock: socket.socket) -> PeerCred:
    """Read SO_PEERCRED and SO_PEERGROUPS from a connected AF_UNIX socket (raises OSError).

    The groups are the process's own, as the kernel holds them, never the user
    database's: a client that dropped a group (``setpriv --clear-groups``, a
    sandbox) must not get the daemon to use it. When the kernel cannot tell
    them (more than 256, an old kernel), the primary gid alone counts: fewer
    rights, never more.
    """
    import socket  # the daemon's: the CLI's light verbs check paths only

    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    try:
        listed = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, _PEERGROUPS_BYTES)
    except OSError:
        listed = b""
    count = len(listed) // 4
    supplementary = struct.unpack(f"{count}I", listed[: count * 4])
    return PeerCred(pid=pid, uid=uid, gid=gid, groups=frozenset((gid, *supplementary)))


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


# Resolutions retried when a component changes under realpath (a link renamed away
# between its lstat and its readlink), as the walk retries swaps (inbox/walk.py).
_RESOLVE_TRIES = 8


def _realpath(directory: str, save_file: str) -> str:
    """``realpath(directory)``, or :class:`Forbidden` when it cannot be resolved.

    ``realpath`` raises when a symlink on the way is swapped while it reads it
    (``FileNotFoundError`` and the like: retried) and ``RecursionError`` on a
    chain of about a thousand symlinks (the kernel stops at 40): a client names
    the path, so both are a refusal, never an internal error.
    """
    for _ in range(_RESOLVE_TRIES):
        try:
            return os.path.realpath(directory)
        except OSError:
            continue
        except RecursionError:
            raise Forbidden(f"save_file {save_file!r}: too many symbolic links") from None
    raise Forbidden(f"save_file {save_file!r} kept changing while it was resolved")


def inside_roots(resolved: str, roots: Iterable[str]) -> bool:
    """Whether the resolved path ``resolved`` lies strictly inside one of ``roots``
    (resolved too), without a look at the disk. Strictly: the inbox and its record
    are siblings of the save file, so a root itself is no save file."""
    for root in roots:
        try:
            if resolved != root and os.path.commonpath([root, resolved]) == root:
                return True
        except ValueError:  # one absolute, one not: not inside
            continue
    return False


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
    try:
        os.fsencode(save_file)  # a lone surrogate names no file: refused, not a crash
    except UnicodeEncodeError:
        raise Forbidden(f"save_file cannot be encoded as a file name: {save_file!r}") from None
    if not os.path.isabs(save_file):
        raise Forbidden(f"save_file must be an absolute path: {save_file!r}")
    directory, base = os.path.split(save_file)
    if base in ("", ".", ".."):
        raise Forbidden(f"save_file must name a file: {save_file!r}")
    resolved = os.path.join(_realpath(directory, save_file), base)
    roots = tuple(roots)
    if inside_roots(resolved, roots):
        return resolved
    served = ", ".join(roots) or "none"
    raise Forbidden(
        f"save_file {save_file!r} resolves to {resolved!r}, outside allowed_roots ({served})"
    )


def process_owned_by(pid: int, uid: int) -> bool:
    """Whether ``/proc/<pid>`` exists and belongs to ``uid`` (never raises)."""
    # not mutated: whether pid 2 exists is not a test's to arrange (pids 0 and 1 never count)
    if pid < 2 or pid == os.getpid():  # pragma: no mutate
        return False
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False


def groups_of(uid: int, gid: int) -> frozenset[int]:
    """A user's primary gid ``gid`` and its supplementary groups from the user database."""
    try:
        name = pwd.getpwuid(uid).pw_name
        return frozenset((gid, *os.getgrouplist(name, gid)))
    except (KeyError, OSError):
        return frozenset((gid,))


def _groups(peer: PeerCred) -> frozenset[int]:
    """The peer's primary gid and supplementary groups: its own when known, else the database's."""
    if peer.groups is not None:
        return peer.groups | {peer.gid}
    return groups_of(peer.uid, peer.gid)


def _allowed(st: os.stat_result, uid: int, groups: frozenset[int], want: int) -> bool:
    """Whether the mode bits grant ``want`` (an ``os.R_OK | ...`` mask) as the kernel does.

    Owner bits for the owner, else group bits for a member, else other bits:
    the kernel picks one class and never falls through to the next.
    """
    if st.st_uid == uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid in groups:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits & want == want


def _ancestors(directory: str) -> list[str]:
    """``directory`` and every directory above it, from ``/`` down."""
    found = [directory]
    while (up := os.path.dirname(found[-1])) != found[-1]:
        found.append(up)
    found.reverse()
    return found


def reach_problem(
    directory: str, uid: int, groups: frozenset[int], want: int = os.R_OK | os.X_OK
) -> str | None:
    """Why a process of ``uid`` and ``groups`` could not use ``directory``; None: it could.

    Search permission on every ancestor, ``want`` on ``directory`` itself, by
    the mode bits (ACLs are not consulted); uid 0 passes. ``directory`` is a
    real path (its symlinks resolved). ``scoutd notify`` and ``scoutd abort``
    ask it for the daemon's identity: an inbox the daemon cannot list makes
    its chat fail closed.
    """
    if uid == 0:
        return None
    above = _ancestors(directory)[:-1]
    for path, rights in [*((path, os.X_OK) for path in above), (directory, want)]:
        try:
            st = os.stat(path)
        except OSError as exc:
            return f"{display_path(path)} cannot be examined: {exc.strerror or exc}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{display_path(path)} is not a directory"
        if not _allowed(st, uid, groups, rights):
            mode = st.st_mode & 0o7777
            return f"uid {uid} may not {_words(rights)} {display_path(path)} (mode {mode:o})"
    return None


def _words(rights: int) -> str:
    return " and ".join(
        word
        for bit, word in ((os.R_OK, "list"), (os.W_OK, "write"), (os.X_OK, "search"))
        if rights & bit
    )


def _sticky_problem(inbox: str, uid: int, entry_uid: int | None = None) -> str | None:
    """Why, in a sticky inbox, ``uid`` could not take its entries (or the one of ``entry_uid``).

    In a directory with the sticky bit only the entry's owner, the
    directory's owner and root may rename or remove an entry (the kernel's
    rule): the daemon, which may have more rights, takes an entry for a peer
    only where the peer could. None: not sticky, missing, or allowed. Root is
    never asked about: the callers let uid 0 pass first.
    """
    try:
        st = os.stat(inbox)
    except OSError:
        return None
    if not st.st_mode & stat.S_ISVTX or uid == st.st_uid or entry_uid == uid:
        return None
    return (
        f"{display_path(inbox)} has the sticky bit and belongs to uid {st.st_uid}: uid {uid}"
        " may not take entries it does not own there"
    )


def may_take_abort(resolved: str, uid: int, gid: int, groups: frozenset[int] | None = None) -> bool:
    """Whether a session of ``uid`` could take the ``abort`` of ``resolved``'s inbox itself.

    Asked when the daemon claims an abort for its sessions (docs/RELIABILITY.md,
    "An abort fails closed"): the same rights as :func:`check_access` (the
    inbox may have appeared, or changed, since the session opened), and, in
    a sticky inbox, owning the abort entry or the inbox. uid 0 passes.
    ``groups``: the session's own (:attr:`PeerCred.groups`); None, the database's.
    """
    if uid == 0:
        return True
    # not mutated: the pid is not read, and every_entry is only truth-tested
    peer = PeerCred(0, uid, gid, groups)  # pragma: no mutate
    try:
        check_access(resolved, peer, every_entry=False)  # pragma: no mutate
    except Forbidden:
        return False
    inbox = inbox_dir(resolved)
    try:
        owner: int | None = os.lstat(os.path.join(inbox, "abort")).st_uid
    except OSError:
        owner = None  # pragma: no mutate (compared with a uid only: any non-int is the same)
    return _sticky_problem(inbox, uid, owner) is None


def check_access(resolved: str, peer: PeerCred, *, every_entry: bool = True) -> None:
    """Raise :class:`Forbidden` unless ``peer`` could use ``resolved``'s directory itself.

    The daemon reads and moves inbox files with its own rights, so a peer of
    another uid must not reach a save file it could not reach alone: it needs
    search permission on every ancestor directory and read, write and search
    permission on the save file's directory and, if present, its inbox; an
    inbox with the sticky bit must be its own (there it could take only its
    own entries, and a pickup takes them all; ``every_entry=False`` leaves
    that to a caller taking one entry). Mode bits only (ACLs are not
    consulted); uid 0 passes, as in the kernel (docs/OPERATIONS.md, access
    model).
    """
    if peer.uid == 0:
        return
    groups = _groups(peer)
    directory, inbox = os.path.dirname(resolved), inbox_dir(resolved)
    rwx = os.R_OK | os.W_OK | os.X_OK
    above = _ancestors(directory)[:-1]
    checks = [*((path, os.X_OK) for path in above), (directory, rwx), (inbox, rwx)]
    for path, want in checks:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if path == inbox:  # no inbox yet: the directory's rights decide
                continue  # pragma: no mutate (the last check: break would end it the same)
            raise Forbidden(f"{display_path(path)} does not exist") from None
        except OSError as exc:
            raise Forbidden(f"cannot check {display_path(path)}: {exc.strerror}") from None
        if stat.S_ISDIR(st.st_mode) and _allowed(st, peer.uid, groups, want):
            continue
        raise Forbidden(
            f"uid {peer.uid} may not access {display_path(path)} (the save file's directory"
            " or one above it); the daemon acts only where the caller could"
        )
    sticky = _sticky_problem(inbox, peer.uid) if every_entry else None
    if sticky is not None:
        raise Forbidden(f"{sticky}; the daemon acts only where the caller could")
