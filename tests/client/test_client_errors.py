"""How the clients report errors: refusals, a daemon absent, silent, lost or limiting."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import scoutd
from scoutd.client import AsyncClient, Client
from scoutd.errors import DaemonTimeout, DaemonUnavailable, RemoteError
from scoutd.protocol import FORBIDDEN, TOO_LARGE
from scoutd.strategies.inbox import inbox_removed_dir, write_abort

from ..strategies.conversations import agent_run
from ..support.daemon import Daemon
from .helpers import ABORT_WAIT, chat_path

# ---------------------------------------------------------------- errors


def test_aborted(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "aborted")
    write_abort(save_file, "  operator says stop\n")
    with Client(daemon.socket_path) as client, pytest.raises(scoutd.Aborted) as caught:
        client.prepare_prompt(agent_run(3), save_file=save_file)
    assert caught.value.reason == "operator says stop"
    assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]


@pytest.mark.anyio
async def test_async_aborted_leaves_async_with_unwrapped(daemon: Daemon) -> None:
    """An error raised in the block comes out as itself, not in an ExceptionGroup."""
    save_file = chat_path(daemon, "async-aborted")
    write_abort(save_file, "halt")
    with pytest.raises(scoutd.Aborted) as caught:
        async with AsyncClient(daemon.socket_path) as client:
            await client.prepare_prompt(agent_run(2), ["inbox"], save_file=save_file)
    assert caught.value.reason == "halt"


def test_unknown_strategy(daemon: Daemon) -> None:
    with Client(daemon.socket_path) as client, pytest.raises(scoutd.UnknownStrategy) as caught:
        client.prepare_prompt(agent_run(1), "shorten_tools,no_such_strategy")
    assert caught.value.name == "no_such_strategy"
    assert "shorten_tools_epoch_increment" in caught.value.available
    assert "no_such_strategy" in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"epoch_size": -1}, "epoch_size"),
        ({"epoch_sise": 3}, "epoch_sise"),
        ({"full_tool_calls": "many"}, "full_tool_calls"),
    ],
)
def test_invalid_override_is_config_error(
    daemon: Daemon, overrides: dict[str, Any], key: str
) -> None:
    with Client(daemon.socket_path) as client, pytest.raises(scoutd.ConfigError) as caught:
        client.prepare_prompt(agent_run(1), config=overrides)
    assert key in str(caught.value)


@pytest.mark.anyio
async def test_async_errors(daemon: Daemon) -> None:
    async with AsyncClient(daemon.socket_path) as client:
        with pytest.raises(scoutd.UnknownStrategy):
            await client.prepare_prompt([], ["nope"])
        with pytest.raises(scoutd.ConfigError, match="epoch_size"):
            await client.prepare_prompt([], config={"epoch_size": -3})
        with pytest.raises(RemoteError) as caught:
            await client.prepare_prompt([], save_file="/outside/the/roots.chat")
        assert caught.value.code == FORBIDDEN
        # the connection goes on after errors
        assert await client.prepare_prompt([{"role": "user", "content": "hi"}], "none") == [
            {"role": "user", "content": "hi"}
        ]


def test_callable_strategy_is_refused_before_sending(daemon: Daemon) -> None:
    with Client(daemon.socket_path) as client, pytest.raises(TypeError, match="callable"):
        client.prepare_prompt([], lambda messages: messages)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_save_file_that_is_not_utf8_is_refused_with_why(daemon: Daemon) -> None:
    """The protocol carries UTF-8 text: such a path is refused before anything is sent,
    by name, in every way a client names a chat (not a UnicodeEncodeError)."""
    save_file = os.path.join(daemon.dir, os.fsdecode(b"run-\xff.chat"))
    why = r"save_file .*run-\\xff\.chat is not UTF-8"
    with Client(daemon.socket_path) as client:
        with pytest.raises(ValueError, match=why):
            client.prepare_prompt([], save_file=save_file)
        with pytest.raises(ValueError, match=why), client.session(save_file):
            pass
        assert client.status()["counts"]["connections"] >= 1  # the connection still serves
    async with AsyncClient(daemon.socket_path) as aclient:
        with pytest.raises(ValueError, match=why):
            async with aclient.session(save_file):
                pass


def test_daemon_not_running() -> None:
    root = tempfile.mkdtemp(prefix="sd")
    try:
        path = os.path.join(root, "missing.sock")
        client = Client(path, timeout=5.0)
        with pytest.raises(DaemonUnavailable) as caught:
            client.prepare_prompt([])
        assert path in str(caught.value)
        assert isinstance(caught.value, ConnectionError)
        assert isinstance(caught.value, scoutd.ScoutdError)
    finally:
        shutil.rmtree(root)


@pytest.mark.anyio
async def test_async_daemon_not_running() -> None:
    root = tempfile.mkdtemp(prefix="sd")
    try:
        path = os.path.join(root, "missing.sock")
        with pytest.raises(DaemonUnavailable, match=path):
            async with AsyncClient(path, timeout=5.0):
                pass
    finally:
        shutil.rmtree(root)


def test_default_socket_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCOUTD_SOCKET", "/tmp/sd-env/x.sock")
    assert Client().socket_path == "/tmp/sd-env/x.sock"
    monkeypatch.delenv("SCOUTD_SOCKET")
    root = tempfile.mkdtemp(prefix="sd")
    try:
        config = os.path.join(root, "c.toml")
        Path(config).write_text('[daemon]\nsocket_path = "/tmp/sd-conf/y.sock"\n')
        monkeypatch.setenv("SCOUTD_CONFIG", config)
        assert Client().socket_path == "/tmp/sd-conf/y.sock"
        assert AsyncClient().socket_path == "/tmp/sd-conf/y.sock"
    finally:
        shutil.rmtree(root)


class SilentPeer:
    """A real Unix socket that accepts connections and never answers."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="sd")
        self.path = os.path.join(self.root, "silent.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen()
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(5.0)
        for connection in self.accepted:
            connection.close()
        shutil.rmtree(self.root)


@pytest.fixture
def silent() -> Iterator[SilentPeer]:
    peer = SilentPeer()
    try:
        yield peer
    finally:
        peer.close()


def test_timeout(silent: SilentPeer) -> None:
    client = Client(silent.path, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(DaemonTimeout, match="status"):
        client.status()
    assert time.monotonic() - started >= 0.25  # it did wait for the answer
    client.close()


@pytest.mark.anyio
async def test_async_timeout(silent: SilentPeer) -> None:
    async with AsyncClient(silent.path, timeout=0.3) as client:
        with pytest.raises(DaemonTimeout):
            await client.status()


# ---------------------------------------------------------------- connection faults


def test_too_large_request_keeps_the_connection(own_daemon: Daemon) -> None:
    with Client(own_daemon.socket_path) as client:
        with pytest.raises(RemoteError) as caught:
            client.prepare_prompt([{"role": "user", "content": "x" * 400_000}], "none")
        assert caught.value.code == TOO_LARGE
        assert client.prepare_prompt([{"role": "user", "content": "y"}], "none")


@pytest.mark.anyio
async def test_async_too_large_goes_to_the_long_request(own_daemon: Daemon) -> None:
    """An error without id about a long line fails that request, not its neighbours."""
    small = [{"role": "user", "content": "small"}]
    outcomes: dict[str, Any] = {}
    async with AsyncClient(own_daemon.socket_path) as client:

        async def run(name: str, messages: list[Any]) -> None:
            try:
                outcomes[name] = await client.prepare_prompt(messages, "none")
            except RemoteError as exc:
                outcomes[name] = exc.code

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run, "big", [{"role": "user", "content": "x" * 400_000}])
            for n in range(5):
                tasks.start_soon(run, f"small{n}", small)
    assert outcomes.pop("big") == TOO_LARGE
    assert outcomes == {f"small{n}": small for n in range(5)}


def test_lost_daemon_then_reconnect(own_daemon: Daemon) -> None:
    save_file = chat_path(own_daemon, "lost")
    client = Client(own_daemon.socket_path, timeout=10.0)
    try:
        session = client.open_session(save_file)
        own_daemon.stop()
        with pytest.raises(DaemonUnavailable, match=own_daemon.socket_path):
            session.wait_aborted(ABORT_WAIT)
        assert session.lost and not session.aborted
        with pytest.raises(DaemonUnavailable):
            client.status()
        own_daemon.start()
        assert client.status()["counts"]["sessions"] == 0  # a new connection
        session.close()  # the daemon already closed it with the connection
    finally:
        client.close()


@pytest.mark.anyio
async def test_async_lost_daemon_fails_waiters(own_daemon: Daemon) -> None:
    async with AsyncClient(own_daemon.socket_path, timeout=10.0) as client:
        async with client.session(chat_path(own_daemon, "async-lost")) as session:
            await anyio.to_thread.run_sync(own_daemon.stop)
            with pytest.raises(DaemonUnavailable):
                await session.wait_aborted(ABORT_WAIT)
            assert session.lost
        await anyio.to_thread.run_sync(own_daemon.start)
        assert (await client.status())["counts"]["sessions"] == 0


def test_a_refusal_written_before_the_close_is_reported(tmp_path: Path) -> None:
    # A daemon that refuses a peer writes one error line and closes. The request,
    # written after the close, fails with a broken pipe: the caller must still
    # learn why it was refused, not that the connection broke.
    path = str(tmp_path / "refusing.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    refusal = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"forbidden: no"}}\n'
    closed = threading.Event()

    def refuse() -> None:
        peer, _ = listener.accept()
        peer.sendall(refusal)
        peer.shutdown(socket.SHUT_RDWR)
        peer.close()
        closed.set()

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    try:
        with Client(path, timeout=5) as client:
            assert closed.wait(5)
            with pytest.raises(RemoteError) as caught:
                client.status()
        assert caught.value.code == FORBIDDEN
    finally:
        thread.join(5)
        listener.close()


# ---------------------------------------------------------------- a peer that is no daemon

DEEP = b"[" * 100_000 + b"]" * 100_000
LAYOUT = b'{"layout":[99],"report":[]}}'  # an index past the one message sent
# What an impostor on the socket path (or a daemon of another protocol) answers:
# the request's id goes where ``%d`` is.
UNREADABLE = {
    "result of another type": b'{"jsonrpc":"2.0","id":%d,"result":42}',
    "neither result nor error": b'{"jsonrpc":"2.0","id":%d}',
    "result nested too deeply": b'{"jsonrpc":"2.0","id":%d,"result":' + DEEP + b"}",
    "error data nested too deeply": (
        b'{"jsonrpc":"2.0","id":%d,"error":{"code":1,"message":"x","data":' + DEEP + b"}}"
    ),
    "push nested too deeply": b'{"jsonrpc":"2.0","method":"session.aborted","params":'
    + DEEP
    + b"}",
    "layout outside the messages": b'{"jsonrpc":"2.0","id":%d,"result":' + LAYOUT,
}


def _impostor(path: str, answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A peer on ``path`` that reads one request line and answers ``answer`` with its id."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        peer, _ = listener.accept()
        with peer, peer.makefile("rb") as lines:
            request = lines.readline()
            rid = int(request.split(b'"id":')[1].split(b",")[0])
            peer.sendall((answer % rid if b"%d" in answer else answer) + b"\n")
            lines.readline()  # until the client closes

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_an_answer_that_is_not_the_protocol_is_daemon_unavailable(
    case: str, tmp_path: Path
) -> None:
    """A client raises its own error for what it cannot read, never msgspec's errors,
    a ``RecursionError`` or the layout's ``ValueError``, and gives up the connection."""
    path = str(tmp_path / "impostor.sock")
    listener, thread = _impostor(path, UNREADABLE[case])
    try:
        with Client(path, timeout=5) as client, pytest.raises(DaemonUnavailable, match="unread"):
            if "layout" in case:
                client.prepare_prompt([{"role": "user", "content": "hi"}])
            else:
                client.status()
    finally:
        thread.join(5)
        listener.close()


@pytest.mark.anyio
@pytest.mark.parametrize("case", sorted(UNREADABLE))
async def test_async_an_answer_that_is_not_the_protocol_is_daemon_unavailable(
    case: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "impostor.sock")
    listener, thread = _impostor(path, UNREADABLE[case])
    try:
        async with AsyncClient(path, timeout=5) as client:
            with pytest.raises(DaemonUnavailable, match="unreadable"):
                if "layout" in case:
                    await client.prepare_prompt([{"role": "user", "content": "hi"}])
                else:
                    await client.status()
    finally:
        await anyio.to_thread.run_sync(thread.join, 5)
        listener.close()
