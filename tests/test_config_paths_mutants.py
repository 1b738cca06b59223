"""The config file's bounded read and the light reader's refusals, at their edges
(scoutd.config_paths), as its mutants showed them untested.

The read takes a regular file of at most ``MAX_CONFIG_BYTES`` bytes whole and
never reads more than one byte past that bound, however the file system hands
the bytes over (all at once, as a local disk does, or in pieces); its
descriptor is non-blocking and closed on exec; an error while reading is
named with the file. The light reader's refusals are written out whole.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoutd.config_paths import MAX_CONFIG_BYTES, read_config_bytes, read_daemon_paths
from scoutd.errors import ConfigError

# bytes a piecewise file system hands over per read, at most: the bound is a whole
# number of pieces, so that a read may end exactly on it
_PIECE = MAX_CONFIG_BYTES // 4


class _Reads:
    """``os.read`` of the watched file as a file system that answers in pieces
    would: the real read, of at most ``piece`` bytes; it counts the bytes handed
    over and records the descriptor's flags as the reader sees them. Reads of
    any other file pass through untouched."""

    def __init__(self, piece: int) -> None:
        self.piece = piece
        self.handed = 0
        self.calls = 0
        self.flags: set[tuple[bool, bool]] = set()
        self._watched = (-1, -1)
        self._real = os.read

    def watch(self, path: str) -> str:
        found = os.stat(path)
        self._watched = (found.st_dev, found.st_ino)
        return path

    def __call__(self, fd: int, count: int) -> bytes:
        found = os.fstat(fd)
        if (found.st_dev, found.st_ino) != self._watched:
            return self._real(fd, count)
        self.calls += 1
        self.flags.add((os.get_blocking(fd), os.get_inheritable(fd)))
        chunk = self._real(fd, min(count, self.piece))
        self.handed += len(chunk)
        return chunk


@pytest.fixture(params=[MAX_CONFIG_BYTES + 1, _PIECE], ids=["whole", "in-pieces"])
def reads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Reads]:
    spy = _Reads(request.param)
    monkeypatch.setattr(os, "read", spy)
    yield spy


def _file_of(path: Path, size: int) -> str:
    # numbered lines: no two pieces of the file alike
    line = b"# a config comment line of the test\n"
    body = b"".join(b"%08d" % n + line for n in range(size // (len(line) + 8) + 1))
    path.write_bytes(body[:size])
    return str(path)


@pytest.mark.parametrize("size", [0, 1, MAX_CONFIG_BYTES - 1, MAX_CONFIG_BYTES])
def test_a_file_up_to_the_bound_is_read_whole(tmp_path: Path, reads: _Reads, size: int) -> None:
    path = reads.watch(_file_of(tmp_path / "scoutd.toml", size))
    assert read_config_bytes(path) == Path(path).read_bytes()
    assert reads.handed == size
    if reads.piece < size:
        assert reads.calls > 2  # the pieces were joined
    assert reads.flags == {(False, False)}  # non-blocking, closed on exec


@pytest.mark.parametrize("size", [MAX_CONFIG_BYTES + 1, MAX_CONFIG_BYTES + 2, 3 * MAX_CONFIG_BYTES])
def test_a_file_past_the_bound_is_refused_unread(tmp_path: Path, reads: _Reads, size: int) -> None:
    path = reads.watch(_file_of(tmp_path / "scoutd.toml", size))
    refused = f"^cannot read config file {re.escape(path)}: over 1048576 bytes$"
    with pytest.raises(ConfigError, match=refused):
        read_config_bytes(path)
    assert reads.handed == MAX_CONFIG_BYTES + 1  # one byte past the bound tells, no more


def test_an_error_while_reading_is_named_with_the_file() -> None:
    """``/proc/self/mem`` is a regular file whose read at offset 0 fails (EIO): the
    error past the open is the reader's too."""
    with pytest.raises(ConfigError) as caught:
        read_config_bytes("/proc/self/mem")
    assert str(caught.value) == "cannot read config file /proc/self/mem: Input/output error"


_NOT_ARRAY = "`daemon.allowed_roots` is not an array of strings"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"[daemon]\nsocket_path = 1\n", "`daemon.socket_path` is not a string"),
        (b"[daemon]\nallowed_roots = 1\n", _NOT_ARRAY),
        (b"[daemon]\nallowed_roots = [1]\n", _NOT_ARRAY),
        (b'[daemon]\nallowed_roots = ["/", 1]\n', _NOT_ARRAY),
        (b"[daemon]\nsocket_path = ''\n", "socket_path '' is not a path"),
        (b"[daemon]\nallowed_roots = []\n", "allowed_roots must list at least one directory"),
    ],
)
def test_a_refusal_is_written_whole(tmp_path: Path, content: bytes, problem: str) -> None:
    config = tmp_path / "scoutd.toml"
    config.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        read_daemon_paths(str(config))
    where = f"invalid configuration in config file {config}, table [daemon]: "
    assert str(caught.value) == where + problem


def _has_terminal() -> bool:
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
    except OSError:
        return False
    return True


# the child only reads a file and exits; the waiting below is bounded
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_terminal_given_as_the_file_never_becomes_the_readers() -> None:
    """A daemon is a session leader without a terminal: opening a terminal without
    ``O_NOCTTY`` would make it the session's, for good. The terminal of a new
    pseudo-terminal pair is refused as no regular file, here and in a forked child
    that is such a leader, and the child still has no terminal after."""
    master, terminal = os.openpty()
    name = os.ttyname(terminal)
    try:
        with pytest.raises(ConfigError, match="not a regular file"):
            read_config_bytes(name)
        pid = os.fork()
        if pid == 0:  # the child: its verdict is its exit status
            status = 9
            try:
                os.setsid()
                before = _has_terminal()
                try:
                    read_config_bytes(name)
                except ConfigError as exc:
                    status = 0 if "not a regular file" in str(exc) else 3
                if before or _has_terminal():
                    status = 4
            finally:
                os._exit(status)
        # waited for at its exit; a child that never ends is killed (exit -9: failed)
        killer = threading.Timer(10, os.kill, (pid, signal.SIGKILL))
        killer.start()
        try:
            _, status = os.waitpid(pid, 0)
        finally:
            killer.cancel()
    finally:
        os.close(terminal)
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 0
