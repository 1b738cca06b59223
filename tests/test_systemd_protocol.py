"""The sd_notify protocol as systemd sees it: a real datagram socket the test binds
is the peer, and the daemon is a real subprocess.

What systemd acts on is the order of the state messages (READY=1, RELOADING=1,
STOPPING=1): a lost READY=1 gets the service killed at its start timeout, and a
READY=1 after STOPPING=1 tells it a stopping daemon is serving again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time

from scoutd.systemd import NOTIFY_STATE_WAIT, Notifier
from tests.support.daemon import Daemon, wait_for
from tests.test_server import gated_daemon, release

STATE_LINES = ("READY=1", "RELOADING=1", "STOPPING=1")


class Peer:
    """The test's end of ``$NOTIFY_SOCKET``: every datagram received, in order."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.address = address
        self.messages: list[str] = []

    def first_lines(self) -> list[str]:
        """The state message of each datagram received (its first line), pings left out."""
        return [m.split("\n")[0] for m in self.messages if m != "WATCHDOG=1"]

    def until(self, first_line: str, count: int = 1, timeout: float = 10.0) -> list[str]:
        """Receive until ``count`` datagrams start with ``first_line``; TimeoutError if not."""
        deadline = time.monotonic() + timeout
        while sum(m.split("\n")[0] == first_line for m in self.messages) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {first_line!r} among {self.messages}")
            self.sock.settimeout(remaining)
            try:
                self.messages.append(self.sock.recv(65536).decode())
            except TimeoutError:
                continue
        return self.messages

    def drain(self, quiet: float = 0.3) -> None:
        """Receive until nothing came for ``quiet`` seconds."""
        self.sock.settimeout(quiet)
        with contextlib.suppress(TimeoutError):
            while True:
                self.messages.append(self.sock.recv(65536).decode())

    def close(self) -> None:
        self.sock.close()


def _fill(address: str) -> int:
    """Queue datagrams on ``address`` until its queue is full; how many it took."""
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    filler.setblocking(False)
    sent = 0
    try:
        while sent < 100_000:
            try:
                filler.sendto(b"X_FILLER=1", address)
            except BlockingIOError:
                return sent
            sent += 1
    finally:
        filler.close()
    raise AssertionError("the queue never filled")


def test_ready_survives_a_notify_queue_that_is_full_for_a_moment() -> None:
    """systemd reads its notify socket when it gets to it; libsystemd's sd_notify waits
    meanwhile. A READY=1 given up at the first EAGAIN was lost for good: the service
    never became active and systemd killed it at TimeoutStartSec. (It now waits a
    moment for room, and one still unsent goes out before the next watchdog ping.)"""
    d = Daemon(env={"WATCHDOG_USEC": "400000"})
    peer = Peer(os.path.join(d.dir, "notify"))
    d.env["NOTIFY_SOCKET"] = peer.address
    try:
        queued = _fill(peer.address)
        assert queued >= 1
        d.start(wait=False)
        # logged just before READY=1 is sent; systemd gets to its socket a moment later
        wait_for(lambda: "serving on" in d.log(), 20, "the daemon serving")
        time.sleep(0.2)
        peer.until("X_FILLER=1", count=queued)
        peer.until("READY=1", timeout=10)
        ready = next(m for m in peer.messages if m.startswith("READY=1"))
        assert "STATUS=serving on " in ready
    finally:
        d.cleanup()
        peer.close()


def test_no_ready_or_reloading_after_stopping() -> None:
    """A SIGHUP (or a config file write) while requests drain after SIGTERM reloaded and
    sent RELOADING=1 then READY=1 after STOPPING=1: systemd, told the daemon was
    stopping, heard it was ready again."""
    d = gated_daemon(daemon={"shutdown_timeout": 20})
    peer = Peer(os.path.join(d.dir, "notify"))
    d.env["NOTIFY_SOCKET"] = peer.address
    try:
        with d, d.connect() as c:
            peer.until("READY=1")
            slow = c.request(
                "prepare_prompt",
                {"messages": [{"role": "user", "content": "x"}], "strategies": ["gate"]},
            )
            wait_for(lambda: os.path.exists(os.path.join(d.dir, "gate.started")), 10, "the gate")
            d.signal(signal.SIGTERM)
            peer.until("STOPPING=1")
            d.signal(signal.SIGHUP)
            wait_for(lambda: "SIGHUP: reloading" in d.log(), 10, "the SIGHUP taken")
            peer.drain()
            release(d)
            assert "result" in c.response(slow, timeout=10)
            assert d.wait(15) == 0
            # nor is the configuration reloaded: the daemon is on its way out
            assert "shutting down: the reload is skipped" in d.log()
            assert "configuration reloaded" not in d.log()
        peer.drain()
        states = peer.first_lines()
        assert states.count("STOPPING=1") == 1, states
        after = states[states.index("STOPPING=1") + 1 :]
        assert not [s for s in after if s in STATE_LINES], states
    finally:
        d.cleanup()
        peer.close()


def test_a_failed_reload_is_reloading_then_ready() -> None:
    """A reload that finds the file broken still ends with READY=1 (systemd would hold the
    unit in "reloading" otherwise), and the MONOTONIC_USEC it carries is now's. Its
    STATUS= says the reload failed (``systemctl status`` showed "serving on" still);
    the next good reload says "serving on" again."""
    d = Daemon()
    peer = Peer(os.path.join(d.dir, "notify"))
    d.env["NOTIFY_SOCKET"] = peer.address
    try:
        with d:
            peer.until("READY=1")
            with open(d.config_path, "a", encoding="utf-8") as handle:
                handle.write("\n[daemon\n")  # not TOML
            before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
            d.signal(signal.SIGHUP)
            peer.until("READY=1", count=2)
            after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
            wait_for(lambda: "reload failed" in d.log(), 10, "the failed reload logged")
            states = peer.first_lines()
            assert states[-2:] == ["RELOADING=1", "READY=1"], states
            reloading = next(m for m in peer.messages if m.startswith("RELOADING=1"))
            usec = int(reloading.split("\n")[1].removeprefix("MONOTONIC_USEC="))
            assert before <= usec <= after
            with d.connect() as c:
                assert "result" in c.call("status")
            readies = [m for m in peer.messages if m.startswith("READY=1")]
            assert readies[0].split("\n")[1].startswith("STATUS=serving on "), readies
            assert (
                readies[1].split("\n")[1].startswith("STATUS=reload failed, keeping generation 1: ")
            ), readies
            d.write_config()  # good again
            d.signal(signal.SIGHUP)
            peer.until("READY=1", count=3)
            assert peer.messages[-1].split("\n")[1] == readies[0].split("\n")[1], peer.messages
    finally:
        d.cleanup()
        peer.close()


def test_an_abstract_notify_socket_and_pings_for_this_process_only() -> None:
    """``@name`` is the abstract namespace; WATCHDOG_PID naming another process means the
    watchdog is not this daemon's: no pings, READY=1 still sent."""
    name = f"scoutd-notify-{os.getpid()}-{time.monotonic_ns()}"
    peer = Peer("\0" + name)
    d = Daemon(env={"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "20000", "WATCHDOG_PID": "1"})
    try:
        with d:
            peer.until("READY=1")
            peer.drain(quiet=0.3)  # a ping every 0.01 s would be about 30 here
            assert "WATCHDOG=1" not in peer.messages
    finally:
        d.cleanup()
        peer.close()


def test_the_notifier_bounds_its_wait_and_sends_a_lost_state_later() -> None:
    """A peer that does not read costs a state message a bounded wait, a ping none,
    and nothing is raised; the state message that did not fit goes out before the
    next message once there is room."""
    name = f"scoutd-full-{os.getpid()}-{time.monotonic_ns()}"
    peer = Peer("\0" + name)
    notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
    try:
        queued = _fill("\0" + name)
        started = time.monotonic()
        assert not notifier.watchdog()
        assert time.monotonic() - started < 0.1
        started = time.monotonic()
        assert not notifier.ready("up")
        waited = time.monotonic() - started
        assert NOTIFY_STATE_WAIT * 0.5 <= waited < NOTIFY_STATE_WAIT + 2, waited
        peer.until("X_FILLER=1", count=queued)
        assert notifier.watchdog()
        peer.until("WATCHDOG=1")
        assert peer.messages[queued:] == ["READY=1\nSTATUS=up", "WATCHDOG=1"]
        assert notifier.stopping() and not notifier.ready() and not notifier.reloading()
        peer.drain(quiet=0.1)
        assert peer.messages[-1] == "STOPPING=1"
    finally:
        notifier.close()
        peer.close()


def test_a_notify_socket_that_is_gone_refuses_or_is_too_long_never_raises() -> None:
    """Each failure is an answer (False), logged once per kind, never an exception."""
    directory = tempfile.mkdtemp(prefix="sdn", dir="/tmp")
    try:
        refusing = os.path.join(directory, "refusing")
        bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        bound.bind(refusing)
        bound.close()  # the file stays, nobody reads: ECONNREFUSED
        for address in (refusing, os.path.join(directory, "gone"), "/" + "x" * 200):
            notifier = Notifier({"NOTIFY_SOCKET": address})
            assert notifier.enabled
            started = time.monotonic()
            assert not notifier.ready("up\nMAINPID=1")
            assert not notifier.watchdog()
            assert time.monotonic() - started < 0.5  # no wait for a peer that is not there
            notifier.close()
    finally:
        shutil.rmtree(directory)


def _activated(listen_fds: str, fd3: str) -> Daemon:
    """A daemon started as systemd would with ``LISTEN_FDS=listen_fds``; ``fd3`` is the
    shell redirection that makes its fd 3 (``3<&-``: none)."""
    d = Daemon()
    d.argv_prefix = [
        "bash",
        "-c",
        f'exec {fd3}; export LISTEN_PID=$$ LISTEN_FDS="$1"; shift; exec "$@"',
        "sh",
        listen_fds,
    ]
    return d


def test_hostile_listen_fds_values() -> None:
    """A count past any int, a negative one, or fd 3 missing: the daemon serves on the
    passed socket, on its own, or says in one line why it cannot start."""
    # a huge count: fd 3 is used, the count only warned about
    d = _activated("9" * 40, "3<&-")
    path = os.path.join(d.dir, "passed.sock")
    passed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    passed.bind(path)
    passed.listen(8)
    d.pass_fds = (passed.fileno(),)
    d.argv_prefix[2] = d.argv_prefix[2].replace("3<&-", f"3<&{passed.fileno()}")
    own = d.socket_path
    try:
        d.socket_path = path
        with d:
            passed.close()
            with d.connect() as c:
                assert "result" in c.call("status")
            assert not os.path.exists(own)
            warned = f": socket activation passed {'9' * 40} sockets; only fd 3 is used\n"
            assert warned in d.log()
    finally:
        passed.close()
        d.cleanup()
    # a negative count: not activated, the daemon binds its own socket
    with _activated("-5", "3<&-") as d, d.connect() as c:
        assert "result" in c.call("status")
    # fd 3 not open: refused at start, one line
    d = _activated("1", "3<&-")
    try:
        d.start(wait=False)
        assert d.wait(30) == 1
        assert "fd 3 passed by socket activation is unusable" in d.log()
        assert "Traceback" not in d.log()
    finally:
        d.cleanup()
