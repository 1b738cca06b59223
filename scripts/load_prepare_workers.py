"""The worker processes of ``scripts/load prepare`` (``load _load ...``, ``load _pester ...``).

``_load``: asyncio clients that each make their ``prepare_prompt`` calls one after
another on mixed conversations and report their latencies. ``_pester``: slow
connections (half a request line, some trickling a byte at a time) and idle
ones, each reopened as soon as the daemon cuts it; it reports when each was cut.
Both say ``ready``, wait for ``go`` on stdin, and print one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from typing import Any

import _reliability as rel

READ_LIMIT = 64 << 20  # asyncio stream limit: a large prepared prompt is one long line


def _templates(seed: int, large_share: float) -> list[tuple[bool, bytes]]:
    """Encoded ``params`` of the conversations the clients send: (large?, bytes)."""
    rng = random.Random(seed)
    small = [
        json.dumps({"messages": rel.conversation(rng.randrange(5, 21), tag=str(n))}).encode()
        for n in range(20)
    ]
    large = [
        json.dumps({"messages": rel.conversation(200, tag=f"large {n}")}).encode() for n in range(3)
    ]
    count = 100
    n_large = round(count * large_share)
    return [(True, large[n % 3]) for n in range(n_large)] + [
        (False, small[n % 20]) for n in range(count - n_large)
    ]


async def _client(
    path: str,
    calls: int,
    rng: random.Random,
    templates: list[tuple[bool, bytes]],
    out: dict[str, Any],
) -> None:
    reader, writer = await asyncio.open_unix_connection(path, limit=READ_LIMIT)
    try:
        for call in range(calls):
            large, params = rng.choice(templates)
            head = b'{"jsonrpc":"2.0","id":%d,' % call
            line = head + b'"method":"prepare_prompt","params":' + params + b"}\n"
            started = time.monotonic()
            writer.write(line)
            await writer.drain()
            answer = await reader.readline()
            elapsed = time.monotonic() - started
            if not answer.startswith(head + b'"result":'):
                out["errors"] += 1
                if len(out["samples"]) < 5:
                    out["samples"].append(answer[:300].decode("utf-8", "replace"))
                if not answer:
                    return
                continue
            out["latencies"].append(elapsed)
            out["large" if large else "small"].append(elapsed)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _load(
    path: str, clients: int, calls: int, seed: int, large_share: float
) -> dict[str, Any]:
    templates = _templates(seed, large_share)
    out: dict[str, Any] = {"latencies": [], "small": [], "large": [], "errors": 0, "samples": []}
    rngs = [random.Random(seed * 7919 + n) for n in range(clients)]
    results = await asyncio.gather(
        *(_client(path, calls, rng, templates, out) for rng in rngs), return_exceptions=True
    )
    failed = [r for r in results if isinstance(r, BaseException)]
    out["errors"] += len(failed)
    out["samples"].extend(repr(r) for r in failed[:5])
    return out


def load_worker(path: str, clients: int, calls: int, seed: int, large_share: float) -> int:
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    started = time.monotonic()
    out = asyncio.run(_load(path, clients, calls, seed, large_share))
    out["seconds"] = time.monotonic() - started
    print(json.dumps(out))
    return 0


async def _pester(path: str, kind: str, stop: asyncio.Event, cuts: list[float]) -> None:
    """Keep one slow or idle connection open until the daemon cuts it; then again.

    ``half``: half a request line, then silence; ``trickle``: half a line, then one
    more byte every 0.5 s; ``idle``: nothing at all. The time from connecting to
    the daemon closing the connection is appended to ``cuts``. Stops (without
    counting the connection in progress) once ``stop`` is set.
    """
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        started = time.monotonic()
        try:
            if kind != "idle":
                writer.write(b'{"jsonrpc":"2.0","id":1,"method":"prep')
                await writer.drain()
            while not stop.is_set():
                try:
                    data = await asyncio.wait_for(reader.read(65536), 0.5)
                except TimeoutError:
                    if kind == "trickle":
                        writer.write(b"a")
                        await writer.drain()
                    continue
                if not data:
                    cuts.append(time.monotonic() - started)
                    break
        except OSError:  # reset by the daemon while trickling
            cuts.append(time.monotonic() - started)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def pester_worker(path: str, slow: int, idle: int) -> int:
    """Run the slow and idle connections until told to stop on stdin; print their cuts."""
    slow_cuts: list[float] = []
    idle_cuts: list[float] = []

    async def main() -> None:
        stop = asyncio.Event()

        async def watch() -> None:
            await asyncio.to_thread(sys.stdin.readline)  # "stop", or stdin closed
            stop.set()

        tasks = [
            _pester(path, "trickle" if n % 2 else "half", stop, slow_cuts) for n in range(slow)
        ] + [_pester(path, "idle", stop, idle_cuts) for _ in range(idle)]
        await asyncio.gather(watch(), *tasks)

    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    asyncio.run(main())
    print(json.dumps({"slow": slow_cuts, "idle": idle_cuts}))
    return 0
