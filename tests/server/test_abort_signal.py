"""``abort_signal``: the names a configuration may give it, and the one process it reaches."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from scoutd.server.abort_signal import parse_signal, send_abort_signal


@pytest.mark.parametrize("name", [None, "", "   "])
def test_no_name_is_no_signal(name: str | None) -> None:
    assert parse_signal(name) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("TERM", signal.SIGTERM),
        ("term", signal.SIGTERM),
        ("SIGTERM", signal.SIGTERM),
        (" sigterm ", signal.SIGTERM),
        ("15", signal.SIGTERM),
        ("KILL", signal.SIGKILL),
        ("9", signal.SIGKILL),
        ("SIGUSR1", signal.SIGUSR1),
    ],
)
def test_a_signal_is_named_by_name_with_or_without_sig_or_by_number(
    name: str, expected: signal.Signals
) -> None:
    assert parse_signal(name) is expected


@pytest.mark.parametrize("name", ["NOPE", "SIGNOPE", "999", "0", "-1", "1.5", "TERM KILL"])
def test_what_names_no_signal_is_refused_in_words(name: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_signal(name)
    assert str(raised.value) == f"abort_signal {name!r} is not a signal name"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=30)


def test_the_sessions_process_gets_the_signal_and_it_is_logged(
    child: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="scoutd.sessions"):
        send_abort_signal(child.pid, os.geteuid(), signal.SIGTERM, "s1")
    assert child.wait(timeout=30) == -signal.SIGTERM
    assert caplog.messages == [f"sent SIGTERM to pid {child.pid} (session s1)"]


def test_a_process_of_another_uid_is_left_alone_and_it_is_logged(
    child: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    other = os.geteuid() + 1
    with caplog.at_level(logging.INFO, logger="scoutd.sessions"):
        send_abort_signal(child.pid, other, signal.SIGTERM, "s1")
    assert child.poll() is None  # still running
    assert caplog.messages == [
        f"not signalling pid {child.pid} of session s1: not a process of uid {other}"
    ]
