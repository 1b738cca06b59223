"""``scoutd status`` and ``scoutd metrics`` against whatever answers on the socket: an
answer of the wrong shape, one too deep, one that trickles in or never ends. Each is
exit 1 with one line on stderr, within the ``--timeout`` asked for, never a traceback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import one_error_line, run

TIMEOUT = 2.0  # the --timeout of each run, in seconds


def _answer(result: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":' + result + b"}\n"


SCRIPTS: dict[str, list[tuple[bytes, float]]] = {
    "a list": [(_answer(b"[1,2]"), 0)],
    "null": [(_answer(b"null"), 0)],
    "text not a string": [(_answer(b'{"text":{"a":1}}'), 0)],
    "too deep": [(_answer(b'{"a":' * 5000 + b"1" + b"}" * 5000), 0)],
    "not JSON": [(b"\x1b[2J\xff\xfe garbage\n", 0)],
    "silent": [(b"", 30)],
    "trickling": [(b" ", 0.1)] * 300,
    "no line end": [(_answer(b'{"text":"a 1\\n"}')[:-1], 30)],
    "closed": [],
}


class _Peer:
    """A fake daemon on a real Unix socket: reads one request line, then plays its script."""

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        self.name = name
        self.script = SCRIPTS[name]  # (bytes to send, seconds to wait after), in order
        self.stop = threading.Event()
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(path)
        self.server.listen(4)
        self.server.settimeout(30.0)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn, conn.makefile("rb") as lines:
            lines.readline()
            for data, pause in self.script:
                try:
                    conn.sendall(data)
                except OSError:
                    return
                if self.stop.wait(pause):
                    return

    def close(self) -> None:
        self.stop.set()
        self.server.close()
        self.thread.join(timeout=10.0)


@pytest.fixture(params=sorted(SCRIPTS))
def peer(request: pytest.FixtureRequest, home: Path) -> Iterator[_Peer]:
    server = _Peer(str(home / "peer.sock"), request.param)
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("verb", ["status", "metrics"])
def test_a_hostile_answer_is_one_line_and_exit_1_in_time(
    home: Path, peer: _Peer, verb: str
) -> None:
    started = time.monotonic()
    result = run(home, verb, "--socket", peer.path, "--timeout", str(TIMEOUT))
    elapsed = time.monotonic() - started
    if verb == "status" and peer.name == "text not a string":  # an object: a status
        assert result.returncode == 0 and result.stdout == "text.a  1\n", result
        return
    assert result.returncode == 1, (result.stdout[:200], result.stderr)
    line = one_error_line(result)
    assert line.isprintable(), line
    assert elapsed < TIMEOUT + 15, elapsed  # the interpreter's start, then the timeout
