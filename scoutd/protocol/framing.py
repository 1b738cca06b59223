"""Line framing shared by the daemon and the clients (sans-io)."""

from __future__ import annotations

from typing import Final

OVERSIZED: Final = None  # LineReader.feed yields this for a line over the limit
GATHER: Final = 64 * 1024  # chunks of an unfinished line smaller than this are gathered


class LineReader:
    """Split received bytes into lines of at most ``limit`` bytes (sans-io).

    The daemon reads requests with it (``limit``: ``max_request_bytes``), the
    clients read answers with it (``limit`` None: the daemon's answers are
    trusted to be as long as the prompt they carry).

    :meth:`feed` returns complete lines (without ``\\n`` or a trailing ``\\r``;
    blank lines are skipped) and :data:`OVERSIZED` once for every line longer
    than ``limit``, as soon as the limit is passed; the rest of such a line is
    discarded up to its newline. ``started`` is the time the first byte of the
    current unfinished line arrived (None between lines), for the read timeout.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.started: float | None = None
        # The unfinished line, as received: joined once when its newline comes,
        # so a line of many megabytes is copied once, not at every chunk. Small
        # chunks gather in ``_tail`` first: a line trickled in one byte at a time
        # holds its bytes, not an object of 33 bytes more for each (what
        # ``pending`` counts is what is held).
        self._parts: list[bytes | bytearray] = []
        self._tail = bytearray()
        self._size = 0
        self._discarding = False  # pragma: no mutate (only truth-tested: None is the same)

    @property
    def partial(self) -> bool:
        return self.started is not None

    @property
    def pending(self) -> int:
        """Bytes of the unfinished line held now."""
        return self._size

    def feed(self, data: bytes, now: float) -> list[bytes | None]:
        out: list[bytes | None] = []
        pos = 0
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                return out
            self._discarding = False  # pragma: no mutate (only truth-tested: None is the same)
            self.started = None
            pos = end + 1
        while pos < len(data):
            end = data.find(b"\n", pos)
            if end < 0:
                if self.started is None:
                    self.started = now
                self._keep(data, pos)
                self._size += len(data) - pos
                # (+1: a trailing "\r" before the coming newline does not count)
                if self.limit is not None and self._size > self.limit + 1:
                    # at once: the client learns before sending it all (no mutate:
                    # OVERSIZED is None, so a mutant writing None is the same)
                    out.append(OVERSIZED)  # pragma: no mutate
                    self._parts.clear()
                    self._tail = bytearray()
                    self._size = 0
                    self._discarding = True
                break
            if self._size:
                self._parts += (self._tail, data[pos:end])
                line = b"".join(self._parts)
                self._parts.clear()
                self._tail = bytearray()
                self._size = 0
            else:
                line = data[pos:end]
            pos = end + 1
            self.started = None
            if line.endswith(b"\r"):
                line = line[:-1]
            if self.limit is not None and len(line) > self.limit:
                out.append(OVERSIZED)  # pragma: no mutate (OVERSIZED is None, as above)
            elif line.strip():
                out.append(line)
        return out

    def _keep(self, data: bytes, pos: int) -> None:
        """Hold ``data[pos:]``, the start of a line: a large chunk as it is, small
        ones gathered (each at most :data:`GATHER` bytes, copied once more)."""
        if len(data) - pos >= GATHER:
            if self._tail:
                self._parts.append(bytes(self._tail))
                self._tail = bytearray()
            # no mutate: data[0:] equals data (the test only saves a copy)
            self._parts.append(data[pos:] if pos else data)  # pragma: no mutate
            return
        self._tail += memoryview(data)[pos:]
        if len(self._tail) >= GATHER:
            self._parts.append(bytes(self._tail))
            self._tail = bytearray()
