"""The sd_notify client and the watchdog's interval, in process, against a real
datagram socket: what each message says, what survives a failed send, and what
a stopping daemon no longer says (docs/OPERATIONS.md, "systemd")."""

from __future__ import annotations

import errno
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoutd import systemd
from scoutd.systemd import (
    NOTIFY_STATE_WAIT,
    WATCHDOG_MAX_INTERVAL,
    WATCHDOG_MIN_INTERVAL,
    Notifier,
    listen_socket,
    watchdog_interval,
)
from tests.test_systemd_protocol import _fill

RECV_TIMEOUT = 5.0  # seconds: a datagram sent is queued at once


class Peer:
    """systemd's end: a datagram socket bound at ``path``, read with a timeout."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(RECV_TIMEOUT)

    def next(self) -> str:
        return self.sock.recv(4096).decode()

    def nothing(self) -> bool:
        """Whether no datagram waits (the notifier sends synchronously)."""
        self.sock.setblocking(False)
        try:
            self.sock.recv(4096)
        except BlockingIOError:
            return True
        finally:
            self.sock.settimeout(RECV_TIMEOUT)
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def address(tmp_path: Path) -> str:
    """A path where systemd's socket may be bound (not yet)."""
    return str(tmp_path / "notify")


@pytest.fixture
def notified(address: str) -> Iterator[tuple[Notifier, Peer]]:
    peer = Peer(address)
    notifier = Notifier({"NOTIFY_SOCKET": address})
    try:
        yield notifier, peer
    finally:
        notifier.close()
        peer.close()


def test_only_an_absolute_or_abstract_address_is_used() -> None:
    assert not Notifier({}).enabled
    assert not Notifier({"NOTIFY_SOCKET": ""}).enabled
    assert not Notifier({"NOTIFY_SOCKET": "run/notify"}).enabled
    assert not Notifier({"NOTIFY_SOCKET": "relative"}).watchdog()
    assert Notifier({"NOTIFY_SOCKET": "/run/systemd/notify"}).enabled
    name = f"scoutd-notifier-{os.getpid()}-{time.monotonic_ns()}"
    peer = Peer("\0" + name)
    notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
    try:
        assert notifier.enabled and notifier.watchdog()
        assert peer.next() == "WATCHDOG=1"
    finally:
        notifier.close()
        peer.close()


def test_ready_says_its_status_and_a_trouble_only_once(notified: tuple[Notifier, Peer]) -> None:
    notifier, peer = notified
    assert notifier.ready()
    assert peer.next() == "READY=1"  # no status given yet: no STATUS= line
    assert notifier.ready("serving 3 roots")
    assert peer.next() == "READY=1\nSTATUS=serving 3 roots"
    assert notifier.ready(trouble="reload failed: bad config")
    assert peer.next() == "READY=1\nSTATUS=reload failed: bad config"
    assert notifier.ready()
    assert peer.next() == "READY=1\nSTATUS=serving 3 roots"  # the good status again
    assert notifier.ready("serving 4 roots", trouble="reload failed again")
    assert peer.next() == "READY=1\nSTATUS=reload failed again"
    assert notifier.ready()
    assert peer.next() == "READY=1\nSTATUS=serving 4 roots"
    assert notifier.ready("")  # an empty status is one: no STATUS= line from now on
    assert peer.next() == "READY=1"
    assert notifier.ready()
    assert peer.next() == "READY=1"


def test_every_line_stays_one_line(notified: tuple[Notifier, Peer]) -> None:
    """A newline in a status would be a message of its own to systemd."""
    notifier, peer = notified
    assert notifier.ready("up\nMAINPID=1\rWATCHDOG=trigger")
    lines = peer.next().split("\n")
    assert lines[0] == "READY=1" and len(lines) == 2
    assert lines[1].startswith("STATUS=up") and "\r" not in lines[1]
    assert "MAINPID=1" in lines[1]  # shown, escaped, not dropped


def test_a_reload_names_its_moment_on_the_monotonic_clock(notified: tuple[Notifier, Peer]) -> None:
    notifier, peer = notified
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert notifier.reloading()
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    first, second = peer.next().split("\n")
    assert first == "RELOADING=1"
    key, _, value = second.partition("=")
    assert key == "MONOTONIC_USEC" and before <= int(value) <= after


def test_a_stopping_daemon_no_longer_says_it_serves(notified: tuple[Notifier, Peer]) -> None:
    notifier, peer = notified
    assert notifier.stopping()
    assert peer.next() == "STOPPING=1"
    assert not notifier.ready("up") and not notifier.reloading()
    assert peer.nothing()
    assert notifier.watchdog()  # still alive while it drains
    assert peer.next() == "WATCHDOG=1"
    assert notifier.stopping()
    assert peer.next() == "STOPPING=1"


def test_a_state_not_sent_goes_out_before_the_next_message(address: str) -> None:
    notifier = Notifier({"NOTIFY_SOCKET": address})
    try:
        assert not notifier.ready("up")  # nobody listens yet
        assert not notifier.watchdog()  # nor now: the state stays waiting
        peer = Peer(address)
        try:
            assert notifier.watchdog()
            assert peer.next() == "READY=1\nSTATUS=up"
            assert peer.next() == "WATCHDOG=1"
            assert notifier.watchdog()  # sent once only
            assert peer.next() == "WATCHDOG=1"
            assert peer.nothing()
        finally:
            peer.close()
    finally:
        notifier.close()


def test_a_newer_state_replaces_one_not_sent(address: str) -> None:
    notifier = Notifier({"NOTIFY_SOCKET": address})
    try:
        assert not notifier.ready("up")
        peer = Peer(address)
        try:
            assert notifier.reloading()
            assert peer.next().startswith("RELOADING=1\n")
            assert notifier.watchdog()
            assert peer.next() == "WATCHDOG=1"  # the old READY=1 is not sent after it
            assert peer.nothing()
        finally:
            peer.close()
    finally:
        notifier.close()


def test_a_state_waits_for_room_in_a_full_queue_a_ping_does_not(
    notified: tuple[Notifier, Peer], address: str
) -> None:
    """systemd reads its queue when it gets to it: READY=1 waits for the room a read
    makes (up to NOTIFY_STATE_WAIT), a ping gives up at once (the next one comes)."""
    notifier, peer = notified
    queued = _fill(address)
    drain = threading.Timer(NOTIFY_STATE_WAIT / 4, peer.next)  # one read, a moment later
    drain.start()
    try:
        assert not notifier.watchdog()  # before the read: a ping that waited would be sent
        assert notifier.ready("up")  # sent once the read made room
    finally:
        drain.join(RECV_TIMEOUT)
    assert [peer.next() for _ in range(queued)][-1] == "READY=1\nSTATUS=up"
    assert peer.nothing()


def test_a_failing_kind_is_logged_once_until_it_works(
    address: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="scoutd.systemd")
    notifier = Notifier({"NOTIFY_SOCKET": address})

    def warned() -> list[str]:
        return [r.getMessage().split()[1] for r in caplog.records if r.name == "scoutd.systemd"]

    try:
        for _ in range(3):
            assert not notifier.watchdog()
        assert warned() == ["WATCHDOG=1"]
        assert not notifier.stopping()
        assert warned() == ["WATCHDOG=1", "STOPPING=1"]  # another kind: its own line
        peer = Peer(address)
        assert notifier.watchdog()
        peer.close()
        os.unlink(address)
        assert not notifier.watchdog()
        assert not notifier.watchdog()
        # sent once in between: failing again is news, once
        assert warned() == ["WATCHDOG=1", "STOPPING=1", "WATCHDOG=1"]
        [last] = [r.getMessage() for r in caplog.records if r.name == "scoutd.systemd"][-1:]
        assert last == (
            "sd_notify WATCHDOG=1 failed (logged once until it works):"
            f" [Errno {errno.ENOENT}] {os.strerror(errno.ENOENT)}"
        ), last
    finally:
        notifier.close()


def test_a_closed_notifier_opens_its_socket_again_when_it_sends(
    notified: tuple[Notifier, Peer],
) -> None:
    """close() ends the socket; a later message (a shutdown's STOPPING=1 after
    close, say) opens another rather than raising."""
    notifier, peer = notified
    assert notifier.watchdog() and peer.next() == "WATCHDOG=1"
    notifier.close()
    assert notifier.stopping() and peer.next() == "STOPPING=1"


def test_the_socket_waits_for_room_at_most_the_state_wait() -> None:
    sock = systemd._notify_socket()
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.calcsize("@ll"))
        seconds, micro = struct.unpack("@ll", raw)
        assert seconds + micro / 1e6 == pytest.approx(NOTIFY_STATE_WAIT, abs=0.001)
        assert sock.type == socket.SOCK_DGRAM and sock.family == socket.AF_UNIX
        assert not sock.get_inheritable()
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("usec", "interval"),
    [
        ("3000000", 1.5),
        ("0003000000", 1.5),  # leading zeros are not a different number
        ("19999", WATCHDOG_MIN_INTERVAL),  # 0.0099995 s would spin
        ("20000", WATCHDOG_MIN_INTERVAL),
        ("20002", 0.010001),
        ("1", WATCHDOG_MIN_INTERVAL),
        ("172800000000", WATCHDOG_MAX_INTERVAL),  # two days: the ceiling exactly
        ("172800000002", WATCHDOG_MAX_INTERVAL),
        ("172799999998", 86399.999999),
        ("9" * 19, WATCHDOG_MAX_INTERVAL),
        ("0" * 30 + "4000000", 2.0),
        ("1" + "0" * 30, WATCHDOG_MAX_INTERVAL),
    ],
)
def test_the_watchdog_interval_is_half_the_timeout_within_bounds(
    usec: str, interval: float
) -> None:
    assert watchdog_interval({"WATCHDOG_USEC": usec}) == pytest.approx(interval, rel=1e-12)


@pytest.mark.parametrize("usec", ["", "0", "000", "-3000000", "+3000000", "3e6", "٣٠٠٠٠٠٠", "1.5"])
def test_a_timeout_that_is_not_a_positive_count_means_no_watchdog(usec: str) -> None:
    assert watchdog_interval({"WATCHDOG_USEC": usec}) is None


def test_the_watchdog_of_this_process_only() -> None:
    pid = str(os.getpid())
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": pid}) == 1.0
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": ""}) == 1.0
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": pid + "0"}) is None


def test_activation_variables_of_another_process_are_left() -> None:
    env = {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "x"}
    assert listen_socket(env) is None and env == {"LISTEN_FDS": "1", "LISTEN_FDNAMES": "x"}
    env = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "junk", "LISTEN_FDNAMES": "x"}
    assert listen_socket(env) is None and env == {}  # ours, unusable: consumed all the same
    env = {"LISTEN_PID": str(os.getpid())}  # ours, no count: no socket
    assert listen_socket(env) is None and env == {}
