"""systemd integration without libsystemd: sd_notify, socket activation, watchdog.

The protocols are tiny and stable: notifications are datagrams of
``KEY=VALUE`` lines sent to ``$NOTIFY_SOCKET``; socket activation passes
listening sockets from fd 3 (``SD_LISTEN_FDS_START``) and names the receiving
process in ``$LISTEN_PID``. Every function is a no-op outside systemd.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import socket
import stat
import struct
import time
from collections.abc import Mapping, MutableMapping

from .errors import ActivationError  # re-exported: it was defined here
from .paths import printable

__all__ = [
    "SD_LISTEN_FDS_START",
    "ActivationError",
    "Notifier",
    "listen_socket",
    "under_journald",
    "watchdog_interval",
]

log = logging.getLogger("scoutd.systemd")

SD_LISTEN_FDS_START = 3  # the first fd systemd passes (sd_listen_fds(3))
# The most descriptors looked at for a passed count, when the limit is "unlimited".
_MAX_PASSED_FDS = 65536
# Watchdog pings come at most this often, whatever $WATCHDOG_USEC asks: a tiny
# value (1 us) made the ping loop spin the event loop at full CPU.
WATCHDOG_MIN_INTERVAL = 0.01  # seconds
# ... and at least this often: a huge value is "never", not an overflow.
WATCHDOG_MAX_INTERVAL = 86400.0  # seconds
# How long a state message (READY=1, RELOADING=1, STOPPING=1) waits for room in a
# full notify queue: systemd reads it when it gets to it, and libsystemd's
# sd_notify waits meanwhile. A ping never waits (the next one comes soon).
NOTIFY_STATE_WAIT = 1.0  # seconds
STATE_KINDS = frozenset({"READY=1", "RELOADING=1", "STOPPING=1"})


class Notifier:
    """Sends sd_notify messages; silent when ``$NOTIFY_SOCKET`` is unset.

    Resource handling: one unconnected datagram socket, opened lazily, closed
    by :meth:`close`. Error handling: a send failure is never raised (a
    notification is advisory, serving goes on) and is logged once per kind of
    message until one of that kind is sent again: a socket that is missing or
    never reads must not write a line to the log at every watchdog ping.

    State messages are what systemd acts on, so they are kept true and in order:
    one waits up to :data:`NOTIFY_STATE_WAIT` for room in a full queue, one that
    still could not be sent goes out before the next message (a ping, say), and
    after STOPPING=1 no READY=1 or RELOADING=1 is sent: a daemon that said it is
    stopping does not tell systemd it serves again (a reload while draining).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        if address.startswith("@"):  # abstract namespace
            address = "\0" + address[1:]
        self._address = address if address.startswith(("/", "\0")) else ""
        self._sock: socket.socket | None = None
        self._failing: set[str] = set()  # kinds (first lines) whose last send failed
        self._unsent: tuple[str, ...] | None = None  # the last state message not sent
        self._stopping = False
        self._status: str | None = None  # what READY=1 says while all is well

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def notify(self, *lines: str) -> bool:
        """Send ``lines`` as one datagram; return whether it was sent."""
        if not self._address:
            return False
        kind = lines[0] if lines else ""
        if kind == "STOPPING=1":
            self._stopping = True
        elif self._stopping and kind in STATE_KINDS:
            return False
        if kind in STATE_KINDS:
            self._unsent = None  # the newer state says it all
        elif self._unsent is not None and self._send(self._unsent, wait=False):
            self._unsent = None
        sent = self._send(lines, wait=kind in STATE_KINDS)
        if not sent and kind in STATE_KINDS:
            self._unsent = lines
        return sent

    def _send(self, lines: tuple[str, ...], *, wait: bool) -> bool:
        """One datagram, waiting for room in a full queue if ``wait``; logged on failure."""
        kind = lines[0] if lines else ""
        # one line each, whatever they hold: a newline in a STATUS= would be a
        # message of its own to systemd (a WATCHDOG=trigger, a MAINPID=)
        payload = "\n".join(printable(line) for line in lines).encode()
        try:
            if self._sock is None:
                self._sock = _notify_socket()
            flags = 0 if wait else socket.MSG_DONTWAIT
            self._sock.sendto(payload, flags, self._address)
        except OSError as exc:
            if kind not in self._failing:
                self._failing.add(kind)
                log.warning("sd_notify %s failed (logged once until it works): %s", kind, exc)
            return False
        self._failing.discard(kind)
        return True

    def ready(self, status: str | None = None, *, trouble: str | None = None) -> bool:
        """READY=1 with a STATUS= line (any text: sent as one escaped line): ``trouble``
        this time only (a failed reload), else ``status``, remembered, else the last
        ``status`` given: a good reload after a failed one clears the failure."""
        if status is not None:
            self._status = status
        shown = trouble if trouble is not None else self._status
        return self.notify("READY=1", *([f"STATUS={shown}"] if shown else []))

    def reloading(self) -> bool:
        # MONOTONIC_USEC lets systemd match the RELOADING=1 to this reload (Type=notify-reload).
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _notify_socket() -> socket.socket:
    """A blocking datagram socket whose sends wait at most :data:`NOTIFY_STATE_WAIT`
    (the kernel's send timeout: it waits for room in the peer's queue, no polling)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    try:
        whole = int(NOTIFY_STATE_WAIT)
        micro = int((NOTIFY_STATE_WAIT - whole) * 1_000_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("@ll", whole, micro))
    except OSError:
        sock.close()
        raise
    return sock


def watchdog_interval(environ: Mapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of ``$WATCHDOG_USEC``), or None.

    None also for a value that is not a positive decimal count, or one meant for
    another process (``$WATCHDOG_PID``). The interval is held between
    :data:`WATCHDOG_MIN_INTERVAL` and :data:`WATCHDOG_MAX_INTERVAL`, so that no
    value of the variable can make the daemon spin or stop it at start.
    """
    env = os.environ if environ is None else environ
    text = env.get("WATCHDOG_USEC", "")
    if not _decimal(text):
        return None
    digits = text.lstrip("0")  # 19 digits and more are past the ceiling whatever they are
    usec = int(digits[:19]) if digits else 0
    if usec <= 0:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None
    return min(max(usec / 2_000_000, WATCHDOG_MIN_INTERVAL), WATCHDOG_MAX_INTERVAL)


def listen_socket(environ: MutableMapping[str, str] | None = None) -> socket.socket | None:
    """The socket passed by systemd socket activation, or None.

    Taken only when ``$LISTEN_PID`` is this process and ``$LISTEN_FDS`` >= 1;
    the variables are then removed so that child processes do not inherit
    them. Only the first passed socket is used; the others are made
    close-on-exec, as it is.

    Raises:
        ActivationError: fd 3 is not a listening AF_UNIX SOCK_STREAM socket.
    """
    env = os.environ if environ is None else environ
    if env.get("LISTEN_PID") != str(os.getpid()):
        return None
    try:
        count = int(env.get("LISTEN_FDS", "0"))
    except ValueError:
        count = 0
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        env.pop(name, None)
    if count < 1:
        return None
    if count > 1:
        log.warning("socket activation passed %d sockets; only fd 3 is used", count)
        _keep_from_children(count)
    fd = SD_LISTEN_FDS_START
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise ActivationError(f"fd {fd} passed by socket activation is not a socket")
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise ActivationError(f"fd {fd} passed by socket activation is unusable: {exc}") from exc
    try:
        listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    except OSError as exc:
        listening = 0 if exc.errno == errno.ENOPROTOOPT else -1
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM or listening != 1:
        sock.detach()
        raise ActivationError(
            f"fd {fd} passed by socket activation is not a listening AF_UNIX stream socket"
        )
    os.set_inheritable(fd, False)
    return sock


def _keep_from_children(count: int) -> None:
    """Make the passed descriptors after fd 3 close-on-exec, as sd_listen_fds(3) does.

    The daemon serves none of them; a plugin's child process must not inherit a
    socket systemd listens on for it. Bounded by the process's descriptor limit,
    whatever the count says; a number that names no open descriptor is skipped.
    """
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY or limit > _MAX_PASSED_FDS:
        limit = _MAX_PASSED_FDS
    for fd in range(SD_LISTEN_FDS_START + 1, min(SD_LISTEN_FDS_START + count, limit)):
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)


def under_journald(environ: Mapping[str, str] | None = None, fd: int = 2) -> bool:
    """Whether stderr (``fd``) goes to the journal, which timestamps lines itself.

    ``$JOURNAL_STREAM`` names the device and inode of the stream systemd gave
    the service (systemd.exec(5)), and it is inherited: a shell a service
    started, or the service's stderr sent to a file, still has it. So it counts
    only when it names this very stream; otherwise the lines keep their times.
    """
    env = os.environ if environ is None else environ
    device, colon, inode = env.get("JOURNAL_STREAM", "").partition(":")
    # each a 64-bit count: a longer text names no stream (nor reaches int's digit limit)
    if not (colon and _decimal(device) and _decimal(inode)) or len(device) + len(inode) > 40:
        return False
    try:
        found = os.fstat(fd)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (int(device), int(inode))


def _decimal(text: str) -> bool:
    """A plain decimal count (``int`` would also take ``+1``, ``1_0`` and other digits)."""
    return text.isascii() and text.isdigit()
