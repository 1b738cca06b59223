"""scoutd.Client and scoutd.AsyncClient against a real daemon subprocess.

Each daemon runs ``python -m scoutd serve`` with its own config file and
socket in a short temp directory (Unix socket paths must stay under 108
bytes). The in-process library, given the same config file and environment,
is the reference for every answer.
"""

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
import msgspec
import pytest

import scoutd
from scoutd.client import AsyncClient, Client
from scoutd.config import Config, resolve_config
from scoutd.errors import DaemonTimeout, DaemonUnavailable, RemoteError
from scoutd.protocol import FORBIDDEN, TOO_LARGE, UNKNOWN_SESSION
from scoutd.strategies.inbox import inbox_removed_dir, write_abort, write_notice

from ..strategies.conversations import agent_run
from ..strategies.vectors import vector_params
from ..support.daemon import Daemon, wait_for

ABORT_WAIT = 10.0  # the daemon pushes aborts within milliseconds; this bounds a failure

# The daemon's [prompt] table: not the defaults, so that agreement with the
# library shows that the daemon applies its file.
PROMPT = {
    "epoch_tool_call_threshold": 30,
    "epoch_full_tool_calls": 8,
    "epoch_compacted_tool_calls": 30,
    "epoch_size": 10,
}


def daemon_config(daemon: Daemon) -> Config:
    """The daemon's configuration, computed in-process from its file and environment."""
    return resolve_config(daemon.config_path, environ={**os.environ, **daemon.env})


def chat_path(daemon: Daemon, name: str) -> str:
    os.makedirs(os.path.join(daemon.dir, "chats"), exist_ok=True)
    return os.path.join(daemon.dir, "chats", f"{name}.chat")


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon shared by the tests that do not change its state."""
    with Daemon(prompt=PROMPT) as running:
        yield running


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon for one test (it reloads, stops or limits it)."""
    with Daemon(prompt=PROMPT, daemon={"max_request_bytes": 262144}) as running:
        yield running


def vector_cases(limit: int) -> list[Any]:
    """A few golden-vector cases of every strategy file, as pytest params."""
    seen: dict[str, int] = {}
    chosen = []
    for param in vector_params("strategy"):
        case = param.values[0]
        family = case["id"].rsplit(".", 1)[0]
        if seen.get(family, 0) < limit:
            seen[family] = seen.get(family, 0) + 1
            chosen.append(param)
    return chosen


# ---------------------------------------------------------------- prepare_prompt


@pytest.mark.parametrize(
    "strategies",
    [None, "shorten_tools", "shorten_tools_epoch, shorten_tools", ["shorten_tools_epoch"], "none"],
)
@pytest.mark.parametrize("pairs", [0, 45, 130])
def test_prepare_prompt_equals_library(daemon: Daemon, strategies: Any, pairs: int) -> None:
    """The daemon's answer is the library's answer under the daemon's config file."""
    messages = agent_run(pairs, repeat_every=7)
    expected = scoutd.prepare_prompt(messages, strategies, config=daemon_config(daemon))
    with Client(daemon.socket_path) as client:
        assert client.prepare_prompt(messages, strategies) == expected


@pytest.mark.parametrize("case", vector_cases(2))
def test_prepare_prompt_vectors(daemon: Daemon, case: dict[str, Any]) -> None:
    """Golden vectors through the daemon, their config sent as per-call overrides."""
    snapshot = resolve_config(environ=case["config"])
    with Client(daemon.socket_path) as client:
        got = client.prepare_prompt(case["input"], case["strategy"], config=snapshot.prompt)
    assert got == scoutd.prepare_prompt(case["input"], case["strategy"], config=snapshot)
    assert got == case["expected"]


def test_overrides_mapping_equals_library(daemon: Daemon) -> None:
    messages = agent_run(90)
    overrides = {"epoch_tool_call_threshold": 20, "epoch_size": 5, "compaction_notice": "cut"}
    snapshot = msgspec.structs.replace(
        daemon_config(daemon),
        prompt=msgspec.structs.replace(daemon_config(daemon).prompt, **overrides),
    )
    with Client(daemon.socket_path) as client:
        got = client.prepare_prompt(messages, ["shorten_tools_epoch"], config=overrides)
    assert got == scoutd.prepare_prompt(messages, ["shorten_tools_epoch"], config=snapshot)
    assert {"role": "user", "content": "cut"} in got


def test_prepare_report_equals_library(daemon: Daemon) -> None:
    messages = agent_run(120, repeat_every=9)
    strategies = "shorten_tools_epoch_increment,shorten_tools"
    expected = scoutd.prepare(messages, strategies, config=daemon_config(daemon))
    with Client(daemon.socket_path) as client:
        got = client.prepare(messages, strategies)
    assert isinstance(got, scoutd.Prepared)
    assert got.messages == expected.messages
    assert [r.strategy for r in got.report] == ["shorten_tools_epoch_increment", "shorten_tools"]
    assert got.report == expected.report
    assert got.report[0].notice and got.report[0].outputs_truncated > 0


@pytest.mark.anyio
async def test_async_prepare_and_report_equal_library(daemon: Daemon) -> None:
    messages = agent_run(110, repeat_every=5)
    expected = scoutd.prepare(messages, None, config=daemon_config(daemon))
    async with AsyncClient(daemon.socket_path) as client:
        assert await client.prepare_prompt(messages) == expected.messages
        prepared = await client.prepare(messages)
    assert prepared.messages == expected.messages
    assert prepared.report == expected.report


@pytest.mark.anyio
async def test_async_concurrent_requests_on_one_connection(daemon: Daemon) -> None:
    """20 requests in flight on one connection each get their own answer."""
    conversations = [agent_run(30 + 7 * n, repeat_every=n % 4 + 2) for n in range(20)]
    snapshot = daemon_config(daemon)
    expected = [
        scoutd.prepare_prompt(m, "shorten_tools_epoch", config=snapshot) for m in conversations
    ]
    assert len({len(e) for e in expected}) > 1  # answers that were swapped would show
    results: dict[int, list[Any]] = {}
    async with AsyncClient(daemon.socket_path) as client:
        before = (await client.status())["counts"]["requests"]

        async def one(n: int) -> None:
            results[n] = await client.prepare_prompt(conversations[n], "shorten_tools_epoch")

        async with anyio.create_task_group() as tasks:
            for n in range(20):
                tasks.start_soon(one, n)
        status = await client.status()
    assert [results[n] for n in range(20)] == expected
    assert status["counts"]["requests"] >= before + 21


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


# ---------------------------------------------------------------- sessions


def test_session_abort_is_pushed(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "session")
    with Client(daemon.socket_path) as client, client.session(save_file) as session:
        assert isinstance(session.id, str) and session.id
        assert not session.aborted and session.reason is None
        assert session.wait_aborted(0.2) is False
        write_abort(save_file, "stop the run")
        assert session.wait_aborted(ABORT_WAIT) is True
        assert session.aborted and session.reason == "stop the run"
        with pytest.raises(scoutd.Aborted, match="stop the run"):
            session.prepare_prompt(agent_run(2))
        assert client.status()["counts"]["sessions"] >= 1


def test_abort_noticed_between_responses(daemon: Daemon) -> None:
    """A notification read while waiting for another answer is recorded, not lost."""
    save_file = chat_path(daemon, "interleaved")
    with Client(daemon.socket_path) as client, client.session(save_file) as session:
        write_abort(save_file, "seen in passing")
        deadline = time.monotonic() + ABORT_WAIT
        while not session.aborted and time.monotonic() < deadline:
            assert client.prepare_prompt([{"role": "user", "content": "x"}], "none")
            time.sleep(0.01)
        assert session.aborted and session.reason == "seen in passing"


def test_session_delivers_notices_to_its_save_file(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "notices")
    write_notice(save_file, "Please also update the docs.")
    with Client(daemon.socket_path) as client, client.session(save_file, pid=os.getpid()) as s:
        prepared = s.prepare([{"role": "user", "content": "task"}], ["inbox"])
    assert prepared.messages[-1] == {"role": "user", "content": "Please also update the docs."}
    assert prepared.report[0].inbox_delivered == 1
    assert not s.aborted


def test_session_resends_a_conversation_changed_behind_its_back(daemon: Daemon) -> None:
    """An earlier message replaced or reassigned in place: the daemon gets it all again."""
    config = daemon_config(daemon)
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    with Client(daemon.socket_path) as client, client.session(chat_path(daemon, "stale")) as s:
        assert s.prepare_prompt(messages, "none") == messages
        messages[0]["content"] = "a different task"  # same dict, new value
        messages.append({"role": "user", "content": "next"})
        assert s.prepare_prompt(messages, "none") == scoutd.prepare_prompt(
            messages, "none", config=config
        )
        messages[1] = {"role": "assistant", "content": "replaced"}  # same length
        messages.append({"role": "user", "content": "again"})
        assert s.prepare_prompt(messages, "none") == messages
        assert s.prepare_prompt(messages, "none") == messages  # unchanged: appends nothing


def test_session_close_is_sent(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "closing")
    with Client(daemon.socket_path) as client:
        with client.session(save_file) as session:
            pass
        with pytest.raises(RemoteError) as caught:
            client.prepare_prompt([], session=session.id)
        assert caught.value.code == UNKNOWN_SESSION


@pytest.mark.anyio
async def test_async_session_abort_is_pushed(daemon: Daemon) -> None:
    save_file = chat_path(daemon, "async-session")
    async with AsyncClient(daemon.socket_path) as client, client.session(save_file) as session:
        assert await session.wait_aborted(0.2) is False
        write_abort(save_file, "")
        assert await session.wait_aborted(ABORT_WAIT) is True
        assert session.reason is not None and "abort" in session.reason
        with pytest.raises(scoutd.Aborted):
            await session.prepare_prompt([])


# ---------------------------------------------------------------- status, reload


def test_status(daemon: Daemon) -> None:
    with Client(daemon.socket_path) as client:
        first = client.status()
        client.prepare_prompt([], "none")
        second = client.status()
        with Client(daemon.socket_path) as other:
            other.status()
            # both open connections, and only they (a closed one may take a moment)
            wait_for(lambda: client.status()["counts"]["connections"] == 2, 10, "2 connections")
    assert first["version"] == scoutd.__version__
    assert first["config"]["path"] == daemon.config_path
    assert second["counts"]["requests"] >= first["counts"]["requests"] + 2
    assert set(second["latency"]) >= {"count", "p50_ms", "p99_ms", "max_ms"}


def test_reload_config(own_daemon: Daemon) -> None:
    messages = agent_run(60)
    with Client(own_daemon.socket_path) as client:
        generation = client.status()["config"]["generation"]
        own_daemon.prompt["epoch_tool_call_threshold"] = 55
        own_daemon.write_config()
        new = client.reload_config()
        assert new > generation
        assert client.status()["config"]["generation"] >= new
        expected = scoutd.prepare_prompt(messages, None, config=daemon_config(own_daemon))
        assert client.prepare_prompt(messages) == expected

        own_daemon.prompt["epoch_size"] = -1
        own_daemon.write_config()
        with pytest.raises(scoutd.ConfigError, match="epoch_size"):
            client.reload_config()
        assert client.prepare_prompt(messages) == expected  # the last good config stays


@pytest.mark.anyio
async def test_async_status_and_reload(own_daemon: Daemon) -> None:
    async with AsyncClient(own_daemon.socket_path) as client:
        status = await client.status()
        assert status["version"] == scoutd.__version__
        assert await client.reload_config() > status["config"]["generation"]


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
