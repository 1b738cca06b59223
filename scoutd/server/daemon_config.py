"""The configuration the daemon runs with: validation, generations, reload checks.

One place decides whether a file is good enough to run with
(:func:`load_daemon_config`, behind startup, every reload and ``scoutd config
check``) and what a reload may and may not change (docs/OPERATIONS.md, reload).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio

from .. import protocol
from ..config import (
    TIGHTEN_ONLY,
    Config,
    DaemonConfig,
    PromptConfig,
    config_file_path,
    resolve_config,
)
from ..config_rules import untrusted_writer
from ..errors import ConfigError
from ..paths import printable
from ..security import Forbidden, PeerCred, check_peer, inside_roots, resolve_roots
from .abort_signal import parse_signal

__all__ = [
    "KEPT_KEYS",
    "RESTART_KEYS",
    "Snapshot",
    "check_not_partial",
    "load_daemon_config",
    "missing_roots",
    "restart_changes",
    "warn_missing_roots",
]

log = logging.getLogger("scoutd.server")

RESTART_KEYS = ("socket_path", "socket_mode", "socket_group", "watch_mode")
# Keys whose default is at least as wide as any value a file sets: every [daemon]
# key (who may connect, what a request or a uid may hold, how an abort is
# signalled) and the [prompt] limits an override may only lower. A reload in which
# one of them, set by the running file, falls back to its default is taken for a
# partly written file: a file caught between two writes parses as a shorter one.
KEPT_KEYS = (
    *(f"daemon.{key}" for key in DaemonConfig.__struct_fields__),
    *(f"prompt.{key}" for key in PromptConfig.__struct_fields__ if key in TIGHTEN_ONLY),
)


# A config file changed this recently may be caught between two writes (``cat a > f;
# cat b >> f``): it is read once it has been quiet this long, which a reload's
# debounce gives it too (server.RELOAD_DEBOUNCE). At most SETTLE_TRIES looks: a
# file rewritten without a pause for two seconds is read as it is then.
SETTLE_SECONDS = 0.1
SETTLE_TRIES = 20


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One configuration generation and what is derived from it.

    ``superseded`` is set when a reload puts the next generation in force, so
    that a loop sleeping one of this generation's durations wakes to read the
    new one (:meth:`sleep`). Build it on the event loop.
    """

    config: Config
    generation: int
    roots: tuple[str, ...]
    abort_signal: signal.Signals | None
    superseded: anyio.Event = field(default_factory=anyio.Event, compare=False)

    def refusal(self, peer: PeerCred, own_uid: int, resolved: str | None = None) -> str | None:
        """Why this generation refuses ``peer`` (or its chat ``resolved``), None if not.

        What a reload may take away from state made before it: a connection
        admitted, a session opened, under a rule that is gone. Pure: ``resolved``
        is the save file as checked when the session opened (a round checks its
        path again on disk).
        """
        try:
            check_peer(peer, self.config.daemon, own_uid)
        except Forbidden as exc:
            return str(exc)
        if resolved is not None and not inside_roots(resolved, self.roots):
            served = ", ".join(self.roots) or "none"
            return f"save file {resolved!r} is outside allowed_roots ({served})"
        return None

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when a reload supersedes this generation: a
        duration the new file shortens applies at once, not once the old one ran out."""
        with anyio.move_on_after(seconds):
            await self.superseded.wait()

    def admit(
        self, peer: PeerCred, own_uid: int, resolved: str, rid: protocol.RequestId = None
    ) -> None:
        """Refuse (``-32003``) a session this generation would not let ``peer`` open on
        ``resolved``: a reload may have come since its path was checked."""
        why = self.refusal(peer, own_uid, resolved)
        if why is not None:
            data = protocol.ForbiddenData(reason=why)
            raise protocol.ProtocolError(protocol.FORBIDDEN, f"forbidden: {why}", data, id=rid)


def load_daemon_config(
    path: str | None, environ: Mapping[str, str] | None = None, *, settle: bool = False
) -> tuple[Config, tuple[str, ...], signal.Signals | None]:
    """Read and fully validate what the daemon runs with (ConfigError otherwise).

    The one validation behind startup, every reload and ``scoutd config check``;
    ``settle`` (startup) reads a file changed less than ``SETTLE_SECONDS`` before
    once it is quiet (:func:`_quiet_read`).
    A file that anyone but root and the daemon's user could change is refused
    (``config_rules.untrusted_writer``): it names code the daemon imports and
    who may connect, so its writers would run code as the daemon.
    """
    environ = os.environ if environ is None else environ
    # At startup no running file tells a partly written one apart: read it once quiet.
    # A reload has that file (check_not_partial), and a watched write its debounce.
    if settle:
        config = _quiet_read(path, environ)
    else:
        config = resolve_config(path, environ=environ, allow_empty=False)
    if config.path is not None:
        why = untrusted_writer(config.path)
        if why is not None:
            raise ConfigError(
                f"config file {printable(config.path)} is not used: {why}; only root and"
                " the daemon's user may be able to change it (it names code to run)"
            )
    try:
        signum = parse_signal(config.daemon.abort_signal)
    except ValueError as exc:
        raise ConfigError(f"invalid [daemon] abort_signal: {exc}") from None
    return config, resolve_roots(config.daemon.allowed_roots), signum


def _quiet_read(path: str | None, environ: Mapping[str, str]) -> Config:
    """The configuration, read when its file has been quiet ``SETTLE_SECONDS``.

    At startup no running file tells a partly written one apart (check_not_partial
    does at a reload): a file cut after its ``[prompt]`` table would start the
    daemon with ``allowed_roots = ["/"]``. A file changed less than
    ``SETTLE_SECONDS`` ago, or that changed while it was read, is read again once
    it is quiet; one that fails to parse while fresh is waited for the same way.
    """
    named = config_file_path(path, environ)
    for _ in range(SETTLE_TRIES):
        before = _changed_at(named)
        try:
            config = resolve_config(path, environ=environ, allow_empty=False)
        except ConfigError:
            if before is None or time.time() - before[0] >= SETTLE_SECONDS:
                raise  # not a file being written: its error stands
            config = None
        after = _changed_at(named)
        if config is not None and after == before:
            quiet = time.time() - after[0] if after is not None else SETTLE_SECONDS
            if quiet >= SETTLE_SECONDS:
                return config
        time.sleep(SETTLE_SECONDS)
    log.warning(
        "config file %s changed within %s s at every look (or is dated in the future):"
        " read as it is now",
        printable(named or ""),
        SETTLE_SECONDS,
    )
    return resolve_config(path, environ=environ, allow_empty=False)


def _changed_at(path: str | None) -> tuple[float, int, int, int] | None:
    """When ``path`` last changed (seconds), with what else a write changes; None:
    no file to look at."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime, st.st_mtime_ns, st.st_size, st.st_ino)


def missing_roots(config: Config) -> list[str]:
    """The ``allowed_roots`` entries that are not an existing directory.

    Allowed (a root may be mounted later), but almost always a typo: startup,
    reload and ``scoutd config check`` warn about each.
    """
    return [root for root in config.daemon.allowed_roots if not os.path.isdir(root)]


def warn_missing_roots(config: Config) -> None:
    """Log one warning per ``allowed_roots`` entry that is not a directory."""
    for root in missing_roots(config):
        log.warning("[daemon] allowed_roots entry %s is not an existing directory", printable(root))


def restart_changes(in_use: DaemonConfig, new: DaemonConfig) -> list[str]:
    """The restart-only keys whose new value differs from the one in use.

    ``in_use`` is the configuration the daemon started with, not the last file
    read: changing a key and changing it back warns once, not twice.
    """
    return [key for key in RESTART_KEYS if getattr(in_use, key) != getattr(new, key)]


def check_not_partial(running: Config, new: Config) -> None:
    """Refuse a reload that drops a :data:`KEPT_KEYS` key the running file set
    (ConfigError naming each, by table).

    A file caught in the middle of a write (``cat a > f; cat b >> f``, or a
    reload asked for meanwhile) parses as a shorter, valid file; its missing
    keys would fall back to their defaults, the widest. Removing such a key on
    purpose takes a restart (or set it to its default). So does removing the
    file itself (the default path, found no more).
    """
    gone: dict[str, list[str]] = {}
    for origin in KEPT_KEYS:
        if running.origins.get(origin) == "file" and new.origins.get(origin) != "file":
            table, key = origin.split(".", 1)
            gone.setdefault(table, []).append(key)
    if not gone:
        return
    if new.path is None:
        was = printable(running.path or "")
        raise ConfigError(
            f"no config file is found any more (the running one is {was}): keeping the"
            " running configuration (restart to run without a file)"
        )
    named = "; ".join(f"[{table}] {', '.join(keys)}" for table, keys in gone.items())
    verb = "is" if sum(map(len, gone.values())) == 1 else "are"
    raise ConfigError(
        f"{named} {verb} no longer set in {printable(new.path)}: the file looks"
        " partly written; keeping the running configuration (restart to remove a key,"
        " or set it to its default)"
    )
