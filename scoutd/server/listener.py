"""The listening socket: bind it safely, or take the one systemd passes.

Binding refuses to replace a live daemon's socket or anything that is not a
socket, removes a stale one, never leaves the file wider than its mode, never
follows a link put in its place, and refuses a directory another user may
write (docs/OPERATIONS.md, the socket). Under socket activation the passed socket is
used as it is and no file is ever removed by this process.
"""

from __future__ import annotations

import grp
import logging
import os
import re
import secrets
import socket
import stat
import time
from dataclasses import dataclass

from ..config import Config
from ..errors import StartupError
from ..paths import printable
from ..systemd import ActivationError, listen_socket

__all__ = ["SUN_PATH_MAX", "Listener", "StartupError", "bind_listener", "open_listener"]

log = logging.getLogger("scoutd.server")

SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
# A hidden name older than this that refuses connections was left by a daemon
# killed between its bind and its link. Bind to link takes microseconds: a
# starting daemon's own name is never that old.
STALE_ASIDE_SECONDS = 10.0


@dataclass(slots=True)
class Listener:
    """The listening socket, and its file identity if this process created it."""

    sock: socket.socket
    path: str | None
    created: tuple[int, int] | None  # (st_dev, st_ino) of the file we bound; None: not ours

    def remove_file(self) -> None:
        """Unlink the socket file, only if it is still the one this process created."""
        if self.path is None or self.created is None:
            return
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self.created:
                os.unlink(self.path)
        except OSError:
            pass

    def close(self) -> None:
        """Close the socket and remove the file this process created."""
        self.sock.close()
        self.remove_file()


def _probe_existing(path: str) -> None:
    """Remove a stale socket file, refuse a live one or anything that is not a socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise StartupError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        log.info("replacing stale socket %s", path)
        os.unlink(path)
        return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StartupError(f"cannot check the existing socket {path}: {exc}") from None
    finally:
        probe.close()
    raise StartupError(f"another scoutd is already serving on {path}; not starting")


def _check_directory(directory: str) -> None:
    """Refuse a socket directory that another user may write: whoever may rename
    entries there may replace the socket with one of their own and receive every
    agent's prompts, or swap it for a link while it is being bound. Writable by
    others is allowed with the sticky bit (``/tmp``): only the owner of the
    socket may then move it."""
    st = os.stat(directory)
    if st.st_uid not in (0, os.geteuid()):
        raise StartupError(
            f"socket directory {directory} belongs to uid {st.st_uid}, who could replace"
            " the socket; use a directory of this user or root"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise StartupError(
            f"socket directory {directory} is writable by other users (mode"
            f" {stat.S_IMODE(st.st_mode):#o}) without the sticky bit: they could replace"
            " the socket; use a directory only its owner may write"
        )


def _remove_stale_asides(path: str) -> None:
    """Remove the hidden names (:func:`_aside_name`) that daemons killed between
    their bind and their link left beside ``path``: sockets of this user, older
    than :data:`STALE_ASIDE_SECONDS`, that refuse connections. Anything else of
    that name (another user's, a file, a live socket) is left alone."""
    directory, base = os.path.split(path)
    pattern = re.compile(re.escape(f".{base}.") + "[0-9a-f]{8}")
    try:
        names = [n for n in os.listdir(directory or ".") if pattern.fullmatch(n)]
    except OSError:
        return  # a directory it cannot list: binding meets the error, in its own words
    for name in names:
        aside = os.path.join(directory, name)
        try:
            st = os.lstat(aside)
        except OSError:
            continue
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            continue
        if time.time() - st.st_mtime < STALE_ASIDE_SECONDS or _accepts(aside):
            continue
        try:
            os.unlink(aside)
        except OSError:
            continue
        log.info("removed %s, left by a daemon killed while binding", printable(aside))


def _accepts(path: str) -> bool:
    """Whether the socket at ``path`` takes a connection (a daemon listens on it)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _aside_name(path: str) -> str:
    """A fresh hidden name beside ``path`` to bind under, or ``path`` itself when
    no such name fits ``sun_path`` (a path within a few bytes of the limit)."""
    directory, base = os.path.split(path)
    aside = os.path.join(directory, f".{base}.{secrets.token_hex(4)}")
    return aside if len(os.fsencode(aside)) <= SUN_PATH_MAX else path


def _bind_aside(sock: socket.socket, path: str, mode: int, gid: int, backlog: int) -> Listener:
    """Bind ``sock`` under a hidden name, give it its group, listen, then link it
    to ``path``: the path appears only once it accepts connections, so a client
    (or a script waiting for the file) never meets a socket that refuses it. The
    link fails if anything took ``path`` meanwhile, where a rename would replace
    it."""
    bound = _aside_name(path)
    # Bind under the umask that gives the exact mode: nothing is changed through
    # the path afterwards but the group, without following a link. A chmod or
    # chown by path would follow a symlink put in the socket's place meanwhile.
    old_umask = os.umask(0o777 & ~mode)
    try:
        sock.bind(bound)
    finally:
        os.umask(old_umask)
    st = os.lstat(bound)
    listener = Listener(sock=sock, path=bound, created=(st.st_dev, st.st_ino))
    try:
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
            listener.created = None  # not ours: never removed by this process
            raise StartupError(f"{path} was replaced while binding; not starting")
        if gid >= 0:
            os.chown(bound, -1, gid, follow_symlinks=False)
            now = os.lstat(bound)
            if (now.st_dev, now.st_ino) != listener.created:
                listener.created = None
                raise StartupError(f"{path} was replaced while binding; not starting")
        sock.listen(backlog)
        if bound != path:
            try:
                os.link(bound, path, follow_symlinks=False)
            except FileExistsError:
                raise StartupError(f"{path} appeared while binding; not starting") from None
            listener.remove_file()  # the hidden name; the socket stays at ``path``
            listener.path = path
    except (OSError, StartupError):
        listener.remove_file()
        raise
    return listener


def open_listener(path: str, mode: int, group: str | None, backlog: int = 128) -> Listener:
    """Bind and listen on ``path`` with file mode ``mode`` and group ``group``.

    Raises:
        StartupError: the directory is missing, the path is too long, a live
            daemon owns the socket, another user may write its directory, or
            binding or chown failed (or the file was replaced meanwhile).
    """
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise StartupError(f"socket path is longer than {SUN_PATH_MAX} bytes: {path}")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise StartupError(f"socket directory {directory} does not exist")
    gid = -1
    if group:
        try:
            gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        except KeyError:
            raise StartupError(f"socket_group {group!r} does not exist") from None
    _check_directory(directory)
    _probe_existing(path)
    _remove_stale_asides(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener = _bind_aside(sock, path, mode, gid, backlog)
    except StartupError:
        sock.close()
        raise
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return listener


def bind_listener(config: Config, socket_path: str | None = None) -> Listener:
    """The socket systemd passed, else a new one at ``socket_path`` or the config's.

    Raises:
        StartupError: see :func:`open_listener`, or a malformed activation.
    """
    daemon = config.daemon
    try:
        activated = listen_socket()
    except ActivationError as exc:
        raise StartupError(str(exc)) from None
    if activated is not None:
        activated.setblocking(False)
        return Listener(sock=activated, path=None, created=None)
    return open_listener(
        socket_path or daemon.socket_path,
        daemon.socket_mode,
        daemon.socket_group,
        backlog=min(daemon.max_connections, socket.SOMAXCONN),
    )
