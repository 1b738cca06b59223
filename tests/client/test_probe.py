"""``probe_status``: the light verbs' one ``status`` request, against a real daemon
and against peers that are none (:mod:`.peers`)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scoutd.client import Client
from scoutd.client.probe import STATUS_MAX_BYTES, probe_status

from ..support.daemon import Daemon
from .peers import Peer, endless_line

STATUS = b'{"jsonrpc":"2.0","id":%d,"result":{"daemon":{"uid":7,"gid":8,"groups":[],"allowed_roots":["/srv"]}}}\n'  # noqa: E501
EXPECTED = {"daemon": {"uid": 7, "gid": 8, "groups": [], "allowed_roots": ["/srv"]}}


def test_a_running_daemon_answers_as_it_answers_the_client(daemon: Daemon) -> None:
    probed = probe_status(daemon.socket_path, 10.0)
    with Client(daemon.socket_path, timeout=10) as client:
        status = client.status()
    assert probed is not None
    assert probed["daemon"] == status["daemon"]
    assert probed["daemon"]["uid"] == os.getuid()
    assert probed["config"]["path"] == status["config"]["path"]
    assert probed["version"] == status["version"]


def test_where_no_socket_is_nothing_answers(tmp_path: Path) -> None:
    regular = tmp_path / "file.sock"
    regular.write_text("")
    for path in (
        str(tmp_path / "absent.sock"),
        str(regular),
        str(tmp_path),
        str(tmp_path / "nul\0.sock"),
        str(tmp_path / ("x" * 200)),
    ):
        assert probe_status(path, 1.0) is None, path


def test_a_socket_no_one_listens_on_answers_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "dead.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(path)  # bound, never listening: connect is refused
        assert probe_status(path, 1.0) is None


def _answer_after(*lines: bytes) -> Callable[[Peer, socket.socket, int], None]:
    def script(peer: Peer, sock: socket.socket, request_id: int) -> None:
        for line in lines:
            peer.write(sock, line.replace(b"%d", b"%d" % request_id))
        peer.write(sock, STATUS % request_id)

    return script


@pytest.mark.parametrize(
    "before",
    [
        (),
        (b'{"jsonrpc":"2.0","method":"session.aborted","params":{}}\n',),  # a notification
        (b"not json\n", b"\xff\xfe\n", b"[1, 2]\n", b'"a string"\n'),
        (b"[" * 100_000 + b"\n",),  # nested past the decoder's depth
        (b'{"jsonrpc":"2.0","id":null,"result":{"x":1}}\n',),  # an answer to no request
        (b'{"jsonrpc":"2.0","id":true,"result":{"x":1}}\n',),  # true is no id 1
        (b'{"jsonrpc":"2.0","id":"1","result":{"x":1}}\n',),
        (b'{"jsonrpc":"2.0","id":1.0,"result":{"x":1}}\n',),  # 1.0 is no id 1 either
    ],
    ids=["plain", "notification", "garbage", "deep", "null-id", "true-id", "str-id", "float-id"],
)
def test_the_answer_is_found_among_other_lines(
    make_peer: Callable[..., Peer], before: tuple[bytes, ...]
) -> None:
    peer = make_peer(_answer_after(*before))
    assert probe_status(peer.path, 10.0) == EXPECTED


def test_an_answer_trickled_a_byte_at_a_time_is_read_whole(make_peer: Callable[..., Peer]) -> None:
    def trickle(peer: Peer, sock: socket.socket, request_id: int) -> None:
        for byte in STATUS % request_id:
            peer.write(sock, bytes([byte]))

    assert probe_status(make_peer(trickle).path, 10.0) == EXPECTED


@pytest.mark.parametrize(
    "answer",
    [
        b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"no"}}\n',
        b'{"jsonrpc":"2.0","id":%d,"result":[1]}\n',
        b'{"jsonrpc":"2.0","id":%d,"result":null}\n',
    ],
    ids=["error", "list", "null"],
)
def test_an_answer_that_is_no_status_ends_the_wait(
    make_peer: Callable[..., Peer], answer: bytes
) -> None:
    def script(peer: Peer, sock: socket.socket, request_id: int) -> None:
        peer.write(sock, answer % request_id)  # and then the line stays open

    started = time.monotonic()
    assert probe_status(make_peer(script).path, 10.0) is None
    assert time.monotonic() - started < 5.0  # the answer, not the timeout, ended it


def test_a_peer_that_hangs_up_answers_nothing(make_peer: Callable[..., Peer]) -> None:
    def hang_up(peer: Peer, sock: socket.socket, request_id: int) -> None:
        sock.shutdown(socket.SHUT_RDWR)

    started = time.monotonic()
    assert probe_status(make_peer(hang_up).path, 10.0) is None
    assert time.monotonic() - started < 5.0


def test_a_silent_peer_is_waited_for_no_longer_than_the_timeout(
    make_peer: Callable[..., Peer],
) -> None:
    def silent(peer: Peer, sock: socket.socket, request_id: int) -> None:
        peer.write(sock, b'{"jsonrpc":"2.0",')  # half a line, then nothing

    started = time.monotonic()
    assert probe_status(make_peer(silent).path, 0.5) is None
    assert 0.45 <= time.monotonic() - started < 3.0


def test_an_endless_line_is_cut_at_the_bound(make_peer: Callable[..., Peer]) -> None:
    peer = make_peer(endless_line)
    started = time.monotonic()
    assert probe_status(peer.path, 10.0) is None
    assert time.monotonic() - started < 5.0
    # what it took is the bound and what the socket held aside
    assert peer.sent < STATUS_MAX_BYTES + 4 * 1024 * 1024
