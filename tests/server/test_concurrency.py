"""Many prepares in parallel through one daemon, each answer checked byte for byte.

A real daemon subprocess serves several clients at once, some connections
shared by two threads; every request is a different real conversation
(tests/data/real, or the full set where it is) in a different format and
strategy. Each answer must be byte-identical to a single-threaded in-process
:func:`scoutd.prepare` of the same input: the prompt and the report. Worker
threads of the daemon share nothing a prepare could leak into another one.
"""

from __future__ import annotations

import gzip
import itertools
import json
import threading
from collections.abc import Callable
from typing import Any

import msgspec

import scoutd
from scoutd.config import PromptConfig
from scoutd.formats import scout_view
from scoutd.testing import Daemon
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.real_runs import FILES, real_dir

# Small enough that the compacting strategies change the real runs.
CONFIG = PromptConfig(context_window=12_000, cost_full_tool_outputs=4)
STRATEGIES = (
    "shorten_tools_cost_aware",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "none",
)
DERIVED: dict[str, Callable[[list[Any]], list[Any]]] = {
    "openai-chat": lambda m: m,
    "openai-responses": to_responses,
    "anthropic": to_anthropic,
    "scout": scout_view,
}
CLIENTS = 4  # connections
THREADS_PER_CLIENT = 2  # callers sharing one connection
JOBS = 32
CALL_TIMEOUT = 120.0  # seconds for one answer on a loaded 2-core machine
JOIN_TIMEOUT = 600.0

Job = tuple[str, str, str, list[Any]]  # label, format, strategy, messages


def _read(name: str) -> list[dict[str, Any]]:
    with gzip.open(real_dir() / name, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _jobs() -> list[Job]:
    """``JOBS`` distinct (conversation, format, strategy) inputs, formats and
    strategies turning over so that neighbours differ in both."""
    openai = _read(FILES["openai"])
    anthropic = _read(FILES["anthropic"])
    formats = itertools.cycle(DERIVED)
    strategies = itertools.cycle(STRATEGIES)
    jobs: list[Job] = []
    for n in itertools.count():
        if len(jobs) == JOBS:
            break
        if n % 4 == 3 and anthropic:
            session = anthropic[(n // 4) % len(anthropic)]
            messages = session["messages"]
            cut = len(messages) - (n // 4) // len(anthropic)  # a different prefix each lap
            jobs.append((f"anthropic session {n}", "anthropic", next(strategies), messages[:cut]))
            continue
        run = openai[n % len(openai)]
        fmt = next(formats)
        cut = len(run["messages"]) - 2 * (n // len(openai))  # a different prefix each lap
        messages = DERIVED[fmt](run["messages"][: max(cut, 2)])
        jobs.append((f"{run['instance']} ({n})", fmt, next(strategies), messages))
    return jobs


def _encoded(prepared: scoutd.Prepared) -> tuple[bytes, bytes]:
    return msgspec.json.encode(prepared.messages), msgspec.json.encode(prepared.report)


def test_parallel_requests_answer_as_one_thread_in_process() -> None:
    jobs = _jobs()
    assert len({(fmt, strategy) for _, fmt, strategy, _ in jobs}) >= 12  # really mixed
    expected = [
        _encoded(scoutd.prepare(messages, strategies=strategy, format=fmt, config=CONFIG))
        for _, fmt, strategy, messages in jobs
    ]
    assert any(json.loads(e[1])[0]["calls_dropped"] for e in expected)  # compaction happens
    answers: dict[int, tuple[bytes, bytes]] = {}
    failures: list[BaseException] = []
    start = threading.Barrier(CLIENTS * THREADS_PER_CLIENT, timeout=CALL_TIMEOUT)

    def work(client: scoutd.Client, mine: list[int]) -> None:
        try:
            start.wait()  # every thread's first request goes out together
            for index in mine:
                _, fmt, strategy, messages = jobs[index]
                prepared = client.prepare(messages, strategies=strategy, format=fmt, config=CONFIG)
                answers[index] = _encoded(prepared)
        except BaseException as exc:  # reported below, with the others
            failures.append(exc)

    with Daemon() as daemon:
        clients = [scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) for _ in range(CLIENTS)]
        try:
            callers = [client for client in clients for _ in range(THREADS_PER_CLIENT)]
            threads = [
                threading.Thread(target=work, args=(client, list(range(k, JOBS, len(callers)))))
                for k, client in enumerate(callers)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(JOIN_TIMEOUT)
            assert not any(thread.is_alive() for thread in threads), "a caller hung"
        finally:
            for client in clients:
                client.close()
        assert daemon.status()["counts"]["errors"] == 0
    assert not failures, failures
    assert sorted(answers) == list(range(JOBS))
    for index, (label, fmt, strategy, _) in enumerate(jobs):
        assert answers[index] == expected[index], f"{label}, {fmt}, {strategy}"
