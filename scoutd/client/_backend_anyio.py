"""The I/O the async client needs, on anyio: a lock, a Unix stream, sleep.

``scoutd/client/_async.py`` is written against these names; the blocking
client generated from it uses the same names from ``_backend_socket.py``.
Every wait takes a deadline (a :func:`time.monotonic` instant, None: none)
and reports an expired one as a value or :class:`TimeoutError`, the same way
in both backends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import anyio
import anyio.abc

from ._reconnect import remaining
from ._sockets import RECV_SIZE, SEND_GRACE, closed_by_peer, read_nowait


class Lock:
    """A lock whose waits end at a deadline."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()

    async def acquire(self, deadline: float | None) -> bool:
        """Wait for the lock until ``deadline``; whether it was acquired."""
        with anyio.move_on_after(remaining(deadline)):
            await self._lock.acquire()
            return True
        return False

    def try_acquire(self) -> bool:
        """Take the lock if it is free now (never waits)."""
        try:
            self._lock.acquire_nowait()
        except (anyio.WouldBlock, RuntimeError):  # taken, or no event loop running
            return False
        return True

    def release(self) -> None:
        self._lock.release()


def guard() -> contextlib.nullcontext[None]:
    """The protocol state's mutex (see ``_backend_socket.py``): none is needed here,
    where every task runs on one thread and nothing awaits while holding it."""
    return contextlib.nullcontext()


class ReadLock:
    """Who reads the connection: one caller at a time, and the others wake at every
    chunk read (:meth:`release`), so a caller whose answer another one read
    stops waiting at once instead of queueing for the socket."""

    def __init__(self) -> None:
        self._held = False
        self._changed: anyio.Event | None = None

    async def acquire(self, deadline: float | None, done: Callable[[], bool]) -> bool:
        """Take the lock to read; False when ``done()`` first, or at the deadline."""
        with anyio.move_on_after(remaining(deadline)):
            while self._held and not done():
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
            if done():
                return False
            self._held = True
            return True
        return False

    @property
    def held(self) -> bool:
        """Whether a caller is reading now."""
        return self._held

    def try_acquire(self) -> bool:
        """Take the lock if it is free now (never waits)."""
        if self._held:
            return False
        self._held = True
        return True

    def release(self) -> None:
        """Let go, and wake every waiter to look at what was read."""
        self._held = False
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()


class Stream:
    """A connected Unix stream socket to the daemon."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self._stream = stream
        self._sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)

    async def receive(self, deadline: float | None) -> bytes | None:
        """The next bytes; ``b""`` at the end of the stream; None at the deadline.

        Raises:
            OSError: the connection broke.
        """
        with anyio.move_on_after(remaining(deadline)):
            try:
                return await self._stream.receive(RECV_SIZE)
            except anyio.EndOfStream:
                return b""
            except anyio.BrokenResourceError as exc:
                raise ConnectionError(str(exc.__cause__ or exc) or "connection reset") from exc
            except anyio.ClosedResourceError as exc:
                raise ConnectionError("the connection was closed") from exc
        return None

    def receive_nowait(self) -> bytes | None:
        """Bytes already received (``b""``: end of stream), None when there are none."""
        return read_nowait(self._sock)

    async def send_all(
        self, data: bytes | bytearray, deadline: float | None
    ) -> BaseException | None:
        """Write all of ``data``; a cancelled caller waits for it (a cut line would
        corrupt the stream for every request on the connection, which then has to
        be dropped with all its sessions).

        The bytes go out a ``send`` at a time, so that what is left is known: an
        asyncio ``Task.cancel()`` (``asyncio.timeout``, ``wait_for``), which no
        cancel scope shields from, is held until the line is out, then returned
        for the caller to raise.

        Raises:
            TimeoutError: not all written by the deadline (or SEND_GRACE without one).
            OSError: the connection broke.
        """
        left = remaining(deadline)
        view = memoryview(data)
        interrupted: BaseException | None = None
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + (SEND_GRACE if left is None else left)
            while view:
                try:
                    view = view[self._sock.send(view) :]
                    continue
                except BlockingIOError:
                    pass
                try:
                    await wait_writable(self._sock)
                except anyio.get_cancelled_exc_class() as exc:
                    if scope.cancel_called:
                        raise  # the deadline: the scope ends the send
                    interrupted = exc  # the caller's: finish the line first
                except anyio.ClosedResourceError as exc:
                    raise ConnectionError("the connection was closed") from exc
        if scope.cancelled_caught:
            raise TimeoutError("the daemon took no request")
        return interrupted

    def closed_by_peer(self) -> bool:
        return closed_by_peer(self._sock)

    def detach(self) -> None:
        """Close this process's descriptor only: a forked child lets go of the
        socket it shares with its parent without shutting the parent's connection."""
        with contextlib.suppress(OSError):
            self._sock.close()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()


async def connect_unix(path: str, deadline: float | None) -> Stream:
    """Connect to the daemon's socket.

    Raises:
        OSError: no daemon there (or not allowed).
        TimeoutError: no answer by the deadline.
    """
    with anyio.fail_after(remaining(deadline)):
        return Stream(await anyio.connect_unix(path))


sleep = anyio.sleep

wait_writable = anyio.wait_writable


def close_scope(seconds: float) -> anyio.CancelScope:
    """Bounds closing a session to ``seconds``, even when the caller was cancelled."""
    return anyio.CancelScope(shield=True, deadline=anyio.current_time() + seconds)
