"""Answers of prepare_prompt and prepare through a real daemon equal the library's."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

import scoutd
from scoutd.client import AsyncClient, Client
from scoutd.config import resolve_config

from ..strategies.conversations import agent_run
from ..strategies.vectors import vector_params
from ..support.daemon import Daemon
from .helpers import daemon_config


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
