"""Which daemon serves a chat, and whether it can see the chat's inbox.

``scoutd notify`` and ``scoutd abort`` write files the daemon must find. Two
things can defeat them without any error of their own: a chat outside the
daemon's ``allowed_roots`` (it is never served), and an inbox the daemon's
account cannot list (its chat fails closed: every prepare is refused until an
operator repairs it, and no reason or notice gets through). Both are checked
against the daemon that serves the chat, as cheaply as one ``status`` call
(docs/OPERATIONS.md, "Notices and aborts"):

* a config file named (``--config``, ``$SCOUTD_CONFIG``, the system config)
  and run by the daemon found gives nothing to read: that daemon's ``status``
  gives its identity and the roots it serves (with a mistake in the file it
  kept those of its last good load, and its reload error is said). The
  status is asked with the standard library (:mod:`scoutd.client.probe`);
* a config file named but not run by the daemon found gives the roots. With
  no daemon answering, only the file's ``[daemon]`` paths are read
  (:func:`scoutd.config_paths.read_daemon_paths`: no msgspec for a light
  verb); with a daemon of another file answering, the whole file is checked,
  as a daemon would check it;
* otherwise the daemon found by discovery gives both (``status``: uid,
  groups, resolved roots);
* no daemon answering costs nothing more: the built-in roots, no identity
  check, and the file is written all the same.

A config file that cannot be read (with a daemon of another file answering, a
``[prompt]`` environment variable too) never stops the file (docs/OPERATIONS.md, "Notices
and aborts"): an unrelated typo, a file caught mid-write or one the operator
may not read must not block an abort. The daemon found without it gives the
roots, or none are known; either way :meth:`Serving.doubt` says so.
"""

from __future__ import annotations

import argparse
import os
import stat
from typing import NamedTuple

from ..errors import Forbidden
from ..paths import printable
from .common import config_path, find_socket

__all__ = ["STATUS_TIMEOUT", "Serving", "serving"]

# The most a notify or abort waits for the daemon's status: a hung daemon must not
# hold up an operator's notice for long (an abort is written before it is asked).
STATUS_TIMEOUT = 2.0


class Serving(NamedTuple):
    """What is known of the daemon that serves a chat."""

    where: str  # the config file or the daemon the roots come from (or the socket tried)
    roots: tuple[str, ...] | None  # resolved; None: not known
    raw_roots: tuple[str, ...]  # as configured, for messages
    uid: int | None = None  # None: its account is not known
    groups: frozenset[int] = frozenset()
    unread: str | None = None  # why the configuration could not be read, if it could not

    def doubt(self) -> str | None:
        """What an unreadable configuration left unchecked, for a warning; None: nothing."""
        if self.unread is None:
            return None
        if self.roots is None:
            return (
                f"{self.unread}; no daemon answered at {self.where}, so whether one would"
                " serve this chat was not checked"
            )
        return f"{self.unread}; the chat was checked against the {self.where} instead"

    def outside(self, save_file: str) -> str | None:
        """Why ``save_file`` is never served by this daemon (outside its roots); None: it is,
        or its roots are not known."""
        if self.roots is None:
            return None
        from ..security import check_save_file

        try:
            check_save_file(save_file, self.roots)
        except Forbidden as exc:
            return f"{exc} ({self.where}: {', '.join(self.raw_roots)})"
        return None

    def cannot_list(self, inbox: str) -> str | None:
        """Why the daemon's account cannot list the (real path of the) inbox; None: it can.

        None too when the daemon's account is not known.
        """
        if self.uid is None:
            return None
        from ..security import reach_problem

        problem = reach_problem(inbox, self.uid, self.groups)
        return None if problem is None else f"the daemon runs as uid {self.uid}: {problem}"

    def cannot_read(self, path: str) -> bool:
        """Whether the daemon's account could not read the regular file ``path``."""
        if self.uid is None or self.uid == 0:
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        if st.st_uid == self.uid:
            bits = st.st_mode >> 6
        elif st.st_gid in self.groups:
            bits = st.st_mode >> 3
        else:
            bits = st.st_mode
        return not bits & 4


def _configured_roots(path: str, *, whole: bool) -> tuple[str, ...]:
    """``allowed_roots`` of the config file at ``path`` (ConfigError if it cannot be read).

    ``whole`` (a daemon that runs another file answered): the whole
    configuration is checked, as a daemon checks it on a reload. Otherwise only
    ``[daemon]``'s paths are read (:func:`scoutd.config_paths.read_daemon_paths`):
    a light verb loads no msgspec.
    """
    if whole:
        from ..config import resolve_config

        return resolve_config(path).daemon.allowed_roots
    from ..config_paths import read_daemon_paths

    return read_daemon_paths(path).allowed_roots


def _same_file(a: object, b: str) -> bool:
    try:
        return isinstance(a, str) and os.path.samefile(a, b)
    except OSError:
        return False


def serving(args: argparse.Namespace) -> Serving:
    """The daemon that serves the chats of this command line (see the module's order).

    Never raises for a configuration that cannot be read: the daemon's own
    roots stand in, or none (``Serving.unread`` says why).
    """
    # imported here: the parser and --help need neither (docs/ARCHITECTURE.md, "Layers")
    from ..client.probe import probe_status
    from ..config_paths import DEFAULT_ALLOWED_ROOTS, config_file_path
    from ..errors import ConfigError
    from ..security import resolve_roots

    unread: str | None = None
    try:
        socket_path = find_socket(args, paths_only=True)
    except ConfigError as exc:
        unread = str(exc)
        socket_path = find_socket(args, read_config=False)
    status = probe_status(socket_path, STATUS_TIMEOUT)
    info = status.get("daemon") if status is not None else None
    identity: tuple[int, frozenset[int]] | None = None
    roots: list[str] | None = None
    if isinstance(info, dict):
        uid, gid, groups = info.get("uid"), info.get("gid"), info.get("groups")
        if isinstance(uid, int) and isinstance(gid, int) and isinstance(groups, list):
            identity = (uid, frozenset([gid, *(g for g in groups if isinstance(g, int))]))
        found = info.get("allowed_roots")
        if isinstance(found, list) and all(isinstance(root, str) for root in found):
            roots = found
    named = config_file_path(config_path(args), os.environ)
    config = status.get("config") if status is not None else None
    config = config if isinstance(config, dict) else {}
    same = named is not None and _same_file(config.get("path"), named)
    if named is not None and same and roots is not None:
        # the daemon runs the file named: the roots it serves are the ones that count
        # (with a mistake in the file, it kept those of its last good load)
        error = config.get("last_reload_error")
        if isinstance(error, str) and unread is None:
            unread = f"the daemon could not load {printable(named)} again: {error}"
    elif named is not None and unread is None:
        try:
            configured = _configured_roots(named, whole=status is not None)
        except ConfigError as exc:
            unread = str(exc)
        else:
            uid, groups = identity if same and identity is not None else (None, frozenset())
            where = f"allowed_roots of {printable(named)}"
            return Serving(where, resolve_roots(configured), tuple(configured), uid, groups)
    if roots is not None:
        uid, groups = identity if identity is not None else (None, frozenset())
        where = f"allowed_roots of the daemon at {printable(socket_path)}"
        return Serving(where, tuple(roots), tuple(roots), uid, groups, unread)
    if unread is not None:
        return Serving(printable(socket_path), None, (), unread=unread)
    configured = DEFAULT_ALLOWED_ROOTS  # no file named: the built-in ones
    return Serving("the built-in allowed_roots", resolve_roots(configured), configured)
