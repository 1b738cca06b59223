"""``scoutd.server.serve``: a whole daemon inside the test's own event loop."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator

import anyio
import pytest

from scoutd import AsyncClient
from scoutd.config import Config, resolve_config
from scoutd.server import Server, serve
from scoutd.testing import toml_text

pytestmark = pytest.mark.anyio


def _config(directory: str) -> Config:
    """A config file in ``directory``: its socket there, and the only allowed root."""
    config_path = os.path.join(directory, "scoutd.toml")
    daemon = {"socket_path": os.path.join(directory, "s.sock"), "allowed_roots": [directory]}
    with open(config_path, "w", encoding="utf-8") as handle:
        handle.write(toml_text({"daemon": daemon}))
    return resolve_config(config_path)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    """A daemon served by this event loop on a socket in a short temp dir."""
    directory = tempfile.mkdtemp(prefix="sd", dir="/tmp")
    try:
        config = _config(directory)
        async with anyio.create_task_group() as tg:
            running: Server = await tg.start(serve, config)
            yield running
            running.stop()
        assert not await anyio.Path(config.daemon.socket_path).exists()  # removed on the way out
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def test_an_async_client_talks_to_the_in_process_daemon(server: Server) -> None:
    assert server.listener.path is not None
    async with AsyncClient(server.listener.path, timeout=10) as client:
        status = await client.status()
        assert status["config"]["generation"] == 1
        prepared = await client.prepare([{"role": "user", "content": "hello"}])
        assert prepared.messages == [{"role": "user", "content": "hello"}]
        assert "scoutd_requests_total" in await client.metrics()
    assert server.metrics.requests_by_method["prepare_prompt"] == 1


async def test_an_embedded_daemon_leaves_no_file_descriptor_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Served and stopped in this process with a ``$NOTIFY_SOCKET``, the daemon closes
    everything it opened: before, its notifier's datagram socket stayed open."""
    directory = tempfile.mkdtemp(prefix="sd", dir="/tmp")
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        peer.bind(os.path.join(directory, "notify"))
        monkeypatch.setenv("NOTIFY_SOCKET", os.path.join(directory, "notify"))
        config = _config(directory)
        before = set(os.listdir("/proc/self/fd"))
        async with anyio.create_task_group() as tg:
            running: Server = await tg.start(serve, config)
            running.stop()
        peer.settimeout(5)
        assert peer.recv(4096).startswith(b"READY=1")  # the notifier was used
        assert set(os.listdir("/proc/self/fd")) <= before
    finally:
        peer.close()
        shutil.rmtree(directory, ignore_errors=True)
