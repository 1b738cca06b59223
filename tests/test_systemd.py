"""systemd integration: sd_notify on a fake NOTIFY_SOCKET, socket activation, journald logs."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoutd.systemd import Notifier, listen_socket, under_journald, watchdog_interval
from tests.support.daemon import Daemon, LineClient


class NotifyListener:
    """The test's side of $NOTIFY_SOCKET: a bound datagram socket collecting messages."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.messages: list[str] = []

    def collect(self, until: str, timeout: float = 10.0) -> list[str]:
        """Receive datagrams until one contains the line ``until``; return all so far."""
        deadline = time.monotonic() + timeout
        while not any(until in m.split("\n") for m in self.messages):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {until!r} among {self.messages}")
            self.sock.settimeout(remaining)
            self.messages.append(self.sock.recv(4096).decode())
        return self.messages

    def collect_count(self, line: str, count: int, timeout: float = 10.0) -> None:
        """Receive datagrams until ``count`` of them are exactly ``line``."""
        deadline = time.monotonic() + timeout
        while sum(m == line for m in self.messages) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"fewer than {count} {line!r} among {self.messages}")
            self.sock.settimeout(remaining)
            self.messages.append(self.sock.recv(4096).decode())

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def notify_daemon() -> Iterator[tuple[Daemon, NotifyListener]]:
    d = Daemon(env={"WATCHDOG_USEC": "200000"})
    listener = NotifyListener(os.path.join(d.dir, "notify"))
    d.env["NOTIFY_SOCKET"] = listener.sock.getsockname()
    try:
        with d:
            yield d, listener
    finally:
        listener.close()


def test_ready_reload_watchdog_and_stopping(notify_daemon: tuple[Daemon, NotifyListener]) -> None:
    d, notes = notify_daemon
    notes.collect("READY=1")
    ready = next(m for m in notes.messages if "READY=1" in m.split("\n"))
    assert "STATUS=serving on " + d.socket_path in ready
    notes.collect_count("WATCHDOG=1", 3)  # WATCHDOG_USEC=200000: a ping every 0.1 s
    notes.messages.clear()
    d.signal(signal.SIGHUP)
    notes.collect("READY=1")
    events = [m for m in notes.messages if m != "WATCHDOG=1"]
    assert len(events) == 2 and events[1] == ready  # the same status: all is well
    assert events[0].startswith("RELOADING=1\nMONOTONIC_USEC=")
    notes.messages.clear()
    d.signal(signal.SIGTERM)
    notes.collect("STOPPING=1")
    assert d.wait(15) == 0


def test_no_watchdog_pings_without_watchdog_usec() -> None:
    d = Daemon()
    listener = NotifyListener(os.path.join(d.dir, "notify"))
    d.env["NOTIFY_SOCKET"] = listener.sock.getsockname()
    try:
        with d:
            listener.collect("READY=1")
            with d.connect() as c:  # give a ping time to show up if one were sent
                c.call("status")
            listener.sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                listener.messages.append(listener.sock.recv(4096).decode())
            assert "WATCHDOG=1" not in listener.messages
    finally:
        listener.close()


def test_socket_activation_serves_on_the_passed_socket() -> None:
    d = Daemon()
    activated_path = os.path.join(d.dir, "activated.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(activated_path)
    sock.listen(16)
    fd = sock.fileno()
    d.pass_fds = (fd,)
    d.argv_prefix = [
        "bash",
        "-c",
        f'exec 3<&{fd} {fd}<&-; export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@"',
        "sh",
    ]
    own_path = d.socket_path
    try:
        d.socket_path = activated_path  # where the helper waits and connects
        with d:
            sock.close()  # only the daemon holds the listening socket now
            with LineClient(activated_path) as c:
                assert "result" in c.call("status")
            assert not os.path.exists(own_path)  # --socket was not bound
            assert d.stop() == 0
            assert "serving on" in d.log() and "only fd 3" not in d.log()  # one socket
            assert os.path.exists(activated_path)  # not ours to remove
    finally:
        sock.close()
        d.cleanup()


def test_activation_rejects_a_non_listening_fd() -> None:
    d = Daemon()
    try:
        a, b = socket.socketpair()
        d.pass_fds = (a.fileno(),)
        d.argv_prefix = [
            "bash",
            "-c",
            f'exec 3<&{a.fileno()}; export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@"',
            "sh",
        ]
        d.start(wait=False)
        assert d.wait(30) == 1
        assert "not a listening AF_UNIX stream socket" in d.log()
        a.close()
        b.close()
    finally:
        d.cleanup()


ARABIC_INDIC = str.maketrans("0123456789", "".join(map(chr, range(0x660, 0x66A))))


def _stream_of(path: str) -> str:
    """``$JOURNAL_STREAM`` as systemd would write it for a stream onto ``path``."""
    found = os.stat(path)
    return f"{found.st_dev}:{found.st_ino}"


def test_logs_have_no_timestamps_under_journald() -> None:
    d = Daemon()
    try:
        open(d.log_path, "ab").close()  # the file the harness gives as its stderr
        d.env["JOURNAL_STREAM"] = _stream_of(d.log_path)
        with d:
            assert d.stop() == 0
            first = d.log().splitlines()[0]
    finally:
        d.cleanup()
    assert first.startswith("INFO scoutd.server: scoutd ")


def test_an_inherited_journal_stream_that_names_another_stream_keeps_the_times(
    tmp_path: Path,
) -> None:
    # a daemon started from a shell a service ran, or with its stderr sent to a
    # file: the variable is there, but it names another stream
    other = tmp_path / "elsewhere"
    other.touch()
    for value in (_stream_of(str(other)), "8:1234"):
        with Daemon(env={"JOURNAL_STREAM": value}) as d:
            assert d.stop() == 0
            first = d.log().splitlines()[0]
        assert first[:4].isdigit() and "INFO scoutd.server: scoutd " in first  # a timestamp first


def test_the_journal_stream_is_compared_with_the_stream(tmp_path: Path) -> None:
    path = tmp_path / "stream"
    with open(path, "wb") as stream:
        fd = stream.fileno()
        here = _stream_of(str(path))
        device, _, inode = here.partition(":")
        assert under_journald({"JOURNAL_STREAM": here}, fd)
        assert not under_journald({}, fd)
        wrong = (
            "",
            "8:1234",
            f"{device}:{int(inode) + 1}",
            f"{int(device) + 1}:{inode}",
            f"{device}:",
            f":{inode}",
            device,
            f"+{device}:{inode}",
            f"{device}:{inode}:0",
            f"{device}: {inode}",
            here.translate(ARABIC_INDIC),  # the same counts in another script's digits
            f"{device}:{'9' * 5000}",  # past int's digit limit: no stream, no error
        )
        for value in wrong:
            assert not under_journald({"JOURNAL_STREAM": value}, fd), value
    assert not under_journald({"JOURNAL_STREAM": here}, fd)  # closed: no stream at all


def test_notifier_units() -> None:
    assert not Notifier({}).notify("READY=1")
    assert not Notifier({"NOTIFY_SOCKET": "relative"}).enabled
    name = f"scoutd-test-{os.getpid()}"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind("\0" + name)
    try:
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready("up")
        receiver.settimeout(5)
        assert receiver.recv(100) == b"READY=1\nSTATUS=up"
        notifier.close()
    finally:
        receiver.close()
    missing = Notifier({"NOTIFY_SOCKET": "/nonexistent/notify"})
    assert not missing.stopping()  # logged, never raised
    missing.close()


def test_watchdog_interval_and_listen_env() -> None:
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "3000000"}) == 1.5
    assert watchdog_interval({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}) is None
    pid = str(os.getpid())
    assert watchdog_interval({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": pid}) == 0.5
    assert watchdog_interval({"WATCHDOG_USEC": "junk"}) is None
    env = {"LISTEN_PID": "1", "LISTEN_FDS": "1"}
    assert listen_socket(env) is None and env == {"LISTEN_PID": "1", "LISTEN_FDS": "1"}
    env = {"LISTEN_PID": pid, "LISTEN_FDS": "0", "LISTEN_FDNAMES": "x"}
    assert listen_socket(env) is None and env == {}  # ours: consumed even when empty
