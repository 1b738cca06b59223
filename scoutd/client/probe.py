"""One ``status`` request with the standard library alone, for the light verbs.

``scoutd notify`` and ``scoutd abort`` ask the daemon that serves a chat who it
runs as and which roots it serves (:mod:`scoutd.cli.serving`). An operator
runs them over many chats, so they must cost little more than an interpreter
start (docs/PERFORMANCE.md): :class:`scoutd.Client` loads msgspec, the typed
configuration, the protocol's codec and logging, some 40 ms more than the
verb's own start, for one question. This asks it as the protocol's own
example client does (docs/PROTOCOL.md, "A client in a few lines of Python"):
one request line, the answer read line by line with the protocol's framing,
in at most ``timeout`` seconds in all.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Any

from ..protocol.framing import OVERSIZED, LineReader

__all__ = ["STATUS_MAX_BYTES", "probe_status"]

# The longest answer line read: a status is a few hundred bytes (a fleet's
# last error included); a peer that sends more is no daemon worth believing.
STATUS_MAX_BYTES = 1024 * 1024
_REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"status"}\n'


def probe_status(socket_path: str, timeout: float) -> dict[str, Any] | None:
    """The ``status`` result of the daemon at ``socket_path``; None when none answers
    with one in ``timeout`` seconds (never raises for what the peer does)."""
    try:
        if not stat.S_ISSOCK(os.stat(socket_path).st_mode):
            return None
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    # The C module under ``socket``, imported here: with no daemon the verb loads
    # neither, and ``socket``'s enums and selectors cost as much as all of this.
    import _socket

    deadline = time.monotonic() + timeout
    reader = LineReader(STATUS_MAX_BYTES)
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        sock.sendall(_REQUEST)
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = sock.recv(64 * 1024)
            if not chunk:
                return None  # closed without an answer (refused, or no daemon)
            for line in reader.feed(chunk, time.monotonic()):
                if line is OVERSIZED:
                    return None
                answer = _answer(line)
                if answer is not None:  # the answer to the request: a result or not
                    return answer if isinstance(answer, dict) else None
    except (OSError, ValueError):  # refused, reset, timed out; a path too long
        return None
    finally:
        sock.close()
    return None


def _answer(line: bytes) -> object:
    """The ``result`` of the answer to the request (False for an error or a result that
    is no object); None for another line: a notification, an answer to no request
    (a refused peer's), a line that is no JSON object."""
    import json

    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(message, dict) or type(message.get("id")) is not int or message["id"] != 1:
        return None
    result = message.get("result")
    return result if isinstance(result, dict) else False
