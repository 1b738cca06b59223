"""A raw JSON-lines client, bounded waits and config files for the daemon harness."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["LineClient", "toml_text", "wait_for"]


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.01) -> Any:
    """Poll ``predicate()`` until it returns a truthy value; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def toml_text(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """A TOML document of flat tables (enough for scoutd's config file)."""
    lines: list[str] = []
    for table, keys in tables.items():
        lines.append(f"[{table}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in keys.items())
        lines.append("")
    return "\n".join(lines)


class LineClient:
    """A blocking JSON-lines client on a raw socket, for tests.

    Responses are matched by ``id``; notifications received meanwhile are kept
    in ``notifications``.
    """

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except BaseException:
            self.sock.close()
            raise
        self.timeout = timeout
        self._buffer = b""
        self._next_id = 0
        self.notifications: list[dict[str, Any]] = []
        self.responses: dict[Any, dict[str, Any]] = {}

    def __enter__(self) -> LineClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: Mapping[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: Any = None, id: Any = None) -> Any:
        """Send a request without waiting; return its id."""
        if id is None:
            self._next_id += 1
            id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return id

    def read_line(self, timeout: float | None = None) -> bytes:
        """The next raw line; b"" when the daemon closed the connection."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no complete line from the daemon")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError:
                raise TimeoutError("no complete line from the daemon") from None
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message (response or notification)."""
        line = self.read_line(timeout)
        if not line:
            raise EOFError("the daemon closed the connection")
        message: dict[str, Any] = json.loads(line)
        return message

    def response(self, id: Any, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the response with ``id`` (other messages are kept aside)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while id not in self.responses:
            message = self.recv(max(0.0, deadline - time.monotonic()))
            if "id" in message:
                self.responses[message["id"]] = message
            else:
                self.notifications.append(message)
        return self.responses.pop(id)

    def call(self, method: str, params: Any = None, timeout: float | None = None) -> dict[str, Any]:
        """Send a request and return its whole response object."""
        return self.response(self.request(method, params), timeout)

    def notification(self, method: str, timeout: float) -> dict[str, Any]:
        """Wait for a notification named ``method``."""
        deadline = time.monotonic() + timeout
        while True:
            for i, message in enumerate(self.notifications):
                if message.get("method") == method:
                    return self.notifications.pop(i)
            message = self.recv(max(0.0, deadline - time.monotonic()))
            if "id" in message:
                self.responses[message["id"]] = message
            else:
                self.notifications.append(message)
