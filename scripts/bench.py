#!/usr/bin/env python3
"""scoutd's performance benchmark: ``scripts/bench [--json] [--quick]``.

Measures, on deterministic synthetic agent runs (``scoutd.simulate``), what a
prepare costs in-process and through the daemon, what an incremental session
round costs as the conversation grows, how fast an abort file reaches its
session, and how much memory the daemon spends per session. docs/PERFORMANCE.md
explains every figure and holds the results of a real run.

Method: each timing is a median over many runs after a few warm-up runs,
taken with :func:`time.perf_counter`. The in-process figures run with the
garbage collector disabled (after a full collection), so that a collection of
the benchmark's own garbage does not land in a random sample; the daemon runs
as usual, with its collector on. Progress goes to stderr; ``--json`` prints
exactly one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import random
import selectors
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ensure_importable() -> None:
    """Import scoutd from this checkout; re-run under ``.venv/bin/python`` without its deps."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    scripts = os.path.dirname(os.path.abspath(__file__))  # bench_formats beside this file
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    try:
        import msgspec  # noqa: F401

        import scoutd  # noqa: F401
    except ImportError:
        venv = os.path.join(ROOT, ".venv")
        venv_python = os.path.join(venv, "bin", "python")
        # sys.prefix, not the executable: a venv's python links to its base interpreter
        if os.path.exists(venv_python) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
            os.execv(venv_python, [venv_python, os.path.abspath(__file__), *sys.argv[1:]])
        sys.exit("scripts/bench: cannot import scoutd; run scripts/install first")


_ensure_importable()

import msgspec  # noqa: E402
from bench_cpu import bench_cpu, cpu_targets, render_cpu  # noqa: E402
from bench_formats import bench_formats  # noqa: E402
from bench_speed import bench_speed, render_speed, speed_targets  # noqa: E402
from bench_startup import bench_startup, render_startup, startup_targets  # noqa: E402

import scoutd  # noqa: E402
from scoutd import testing  # noqa: E402
from scoutd.config import DaemonConfig, PromptConfig  # noqa: E402
from scoutd.simulate.workload import round_ends, synthetic_run  # noqa: E402
from scoutd.strategies.inbox import inbox_dir  # noqa: E402
from scoutd.strategies.tool_messages import TOOL_ROLES  # noqa: E402
from scoutd.testing import inotify_usage, percentile, proc_status  # noqa: E402

SEED = 20240501  # any fixed seed: the same seed gives the same conversations

# Waiting for a daemon to answer its first `status`: interpreter start and imports.
START_TIMEOUT = 30.0
# Environment variables that would change the daemon's or the library's behaviour.
_PROMPT_ENV = tuple(
    "PROMPT_STRATEGY" if key == "prompt_strategies" else key.upper()
    for key in PromptConfig.__struct_fields__
)


@dataclass(frozen=True, slots=True)
class Plan:
    """Sizes and repetitions. Keys of the output keep the nominal sizes' names."""

    small: int = 400  # tool calls of the smaller conversation
    large: int = 2000  # tool calls of the larger one
    warmup: int = 3
    inproc_runs_small: int = 61
    inproc_runs_large: int = 31
    rpc_runs: int = 31
    small_rpc_calls: int = 2001
    small_messages: int = 20
    session_small: int = 100  # tool calls before the first timed session round
    session_large: int = 2000
    session_rounds: int = 200
    abort_sessions: int = 1000
    abort_dirs: int = 20
    abort_connections: int = 4
    aborts: int = 100
    abort_budget: float = 90.0  # seconds for all aborts; fewer samples beyond (reported)
    rss_sessions: int = 10_000
    rss_dirs: int = 100
    rss_connections: int = 8
    cpu_small_mb: float = 1.0  # request size of the CPU-per-MB figures, and four times it
    cpu_large_mb: float = 4.0
    cpu_runs: int = 3
    cpu_sample_s: float = 0.5  # daemon CPU time of one sample, at least
    startup_runs: int = 21  # runs of each light verb and of `python -c pass`


QUICK = Plan(
    small=30,
    large=60,
    warmup=1,
    inproc_runs_small=5,
    inproc_runs_large=5,
    rpc_runs=5,
    small_rpc_calls=51,
    session_small=10,
    session_large=60,
    session_rounds=5,
    abort_sessions=12,
    abort_dirs=3,
    abort_connections=2,
    aborts=5,
    abort_budget=30.0,
    rss_sessions=200,
    rss_dirs=4,
    rss_connections=2,
    cpu_small_mb=0.05,
    cpu_large_mb=0.2,
    cpu_runs=1,
    cpu_sample_s=0.02,
    startup_runs=3,
)

# (figure, reference, maximum ratio): the performance targets, as ratios within one run,
# each of two figures timed in turn (or in alternating blocks) under the same load.
RATIO_TARGETS = (
    ("inproc_ms_400", "floor_ms_400", 2.0),
    ("inproc_ms_2000", "floor_ms_2000", 2.0),
    ("rpc_ms_2000", "rpc_inproc_ms_2000", 2.0),
    ("session_round_ms_2000", "session_round_ms_100", 1.5),
    ("format_openai_chat_ms_400", "format_scout_ms_400", 1.5),
    ("format_openai_chat_ms_2000", "format_scout_ms_2000", 1.5),
)
ABORT_P99_TARGET_MS = 100.0


def progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


# -- statistics and timing --------------------------------------------------------------


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect now, then keep the collector off for a timed loop."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.collect()


def interleaved(
    fns: dict[str, Callable[[], object]], runs: int, warmup: int
) -> dict[str, list[float]]:
    """Time each function once per round, ``warmup + runs`` rounds; keep the last ``runs``.

    Interleaving puts the same machine noise on every function, so their ratio
    is fair even when the machine is busy.
    """
    samples: dict[str, list[float]] = {name: [] for name in fns}
    clock = time.perf_counter
    with quiet_gc():
        for round_number in range(warmup + runs):
            for name, fn in fns.items():
                start = clock()
                fn()
                elapsed = clock() - start
                if round_number >= warmup:
                    samples[name].append(elapsed)
    return samples


# -- the daemon -----------------------------------------------------------------------


class Daemon(testing.Daemon):
    """One bench phase's daemon (:class:`scoutd.testing.Daemon`): the built-in rescan
    interval, logs at warning, and room for the 10,000 sessions of the memory phase."""

    def __init__(self, directory: str, name: str, roots: Sequence[str]) -> None:
        super().__init__(
            daemon={
                "allowed_roots": list(roots),
                "log_level": "warning",
                "rescan_interval": DaemonConfig().rescan_interval,
                "max_sessions_per_uid": 1_000_000,
            },
            directory=directory,
            name=name,
        )

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> Daemon:
        super().start(wait=wait, timeout=timeout)
        return self

    def log(self) -> str:
        return super().log()[-4000:]

    def client(self, timeout: float = 120.0) -> scoutd.Client:  # type: ignore[override]
        return scoutd.Client(self.socket_path, timeout=timeout)

    # /proc figures of the daemon process

    def rss_kb(self) -> int:
        return proc_status(self.pid, "VmRSS")

    def threads(self) -> int:
        return proc_status(self.pid, "Threads")

    def inotify_watches(self) -> int:
        """Kernel inotify watches the daemon holds (``inotify wd:`` lines in fdinfo)."""
        return inotify_usage(self.pid)[1]


def max_inotify_watches() -> int | None:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


class CountingRelay:
    """A Unix-socket relay to the daemon that counts the bytes each way.

    Used once, outside any timing, to see what a session round really sends:
    the whole conversation or only what was appended.
    """

    def __init__(self, path: str, target: str) -> None:
        self.path, self.target = path, target
        self.sent = 0  # client -> daemon
        self.received = 0  # daemon -> client
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-relay", daemon=True)

    def __enter__(self) -> CountingRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():  # maybe still in accept(): wake it
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as wake:
                wake.connect(self.path)
        self._thread.join(10)
        self._listener.close()

    def _run(self) -> None:
        client, _ = self._listener.accept()
        if self._stop.is_set():
            client.close()
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(self.target)
        with client, upstream, selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, upstream)
            selector.register(upstream, selectors.EVENT_READ, client)
            while not self._stop.is_set():
                for key, _ in selector.select(0.1):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(1 << 20)
                    if not data:
                        return
                    if source is client:
                        self.sent += len(data)
                    else:
                        self.received += len(data)
                    key.data.sendall(data)


# -- the benchmarks --------------------------------------------------------------------


def floor_fn(messages: Sequence[dict[str, Any]]) -> Callable[[], object]:
    """Decode every tool message's JSON once: what no strategy can do without."""
    decode = msgspec.json.Decoder().decode
    roles = TOOL_ROLES

    def floor() -> None:
        for message in messages:
            if message["role"] in roles:
                decode(message["content"])

    return floor


def bench_inproc(
    results: dict[str, Any],
    key: int,
    messages: list[dict[str, Any]],
    runs: int,
    warmup: int,
    *,
    fresh: bool,
) -> None:
    """``floor_ms_N``, ``inproc_ms_N`` (config snapshot) and maybe the fresh-config figure.

    ``key`` names the figures (the nominal size, also in quick mode).
    """
    snapshot = scoutd.load_config()
    fns: dict[str, Callable[[], object]] = {
        "floor": floor_fn(messages),
        "inproc": lambda: scoutd.prepare_prompt(messages, config=snapshot),
    }
    if fresh:
        fns["fresh"] = lambda: scoutd.prepare_prompt(messages)
    samples = interleaved(fns, runs, warmup)
    results[f"floor_ms_{key}"] = ms(statistics.median(samples["floor"]))
    results[f"inproc_ms_{key}"] = ms(statistics.median(samples["inproc"]))
    if fresh:
        results[f"inproc_fresh_config_ms_{key}"] = ms(statistics.median(samples["fresh"]))


def bench_rpc(
    results: dict[str, Any],
    daemon: Daemon,
    large: list[dict[str, Any]],
    small: list[dict[str, Any]],
    plan: Plan,
) -> None:
    """``rpc_ms_2000`` and ``small_rpc_us_p50``: whole round trips, client encode to decode.

    ``rpc_ms_2000`` is what a :class:`scoutd.Client` user gets (the indices
    answer, docs/PROTOCOL.md); ``rpc_whole_answer_ms_2000``, timed in turn with
    it, the same call answered with every prepared message, as a daemon older
    than the indices answer gives it; ``rpc_inproc_ms_2000``, the in-process
    prepare timed in turn with both, so that their ratio to it (the target) is
    taken under the same load (``inproc_ms_2000`` is timed minutes earlier).
    """
    progress(f"prepare_prompt through the daemon, {plan.large} calls")
    snapshot = scoutd.load_config()
    with daemon.client() as client, daemon.client() as whole:
        whole.connect()
        assert whole._conn is not None
        whole._conn.state.indices_refused = True  # as after an older daemon's refusal
        samples = interleaved(
            {
                "rpc": lambda: client.prepare_prompt(large),
                "whole": lambda: whole.prepare_prompt(large),
                "inproc": lambda: scoutd.prepare_prompt(large, config=snapshot),
            },
            plan.rpc_runs,
            plan.warmup,
        )
        results["rpc_ms_2000"] = ms(statistics.median(samples["rpc"]))
        results["rpc_whole_answer_ms_2000"] = ms(statistics.median(samples["whole"]))
        results["rpc_inproc_ms_2000"] = ms(statistics.median(samples["inproc"]))
        progress(f"prepare_prompt through the daemon, {len(small)} messages")
        runs = plan.small_rpc_calls
        samples = interleaved({"small": lambda: client.prepare_prompt(small)}, runs, 20)
        results["small_rpc_us_p50"] = round(statistics.median(samples["small"]) * 1e6, 1)
        results["small_rpc_us_p99"] = round(percentile(samples["small"], 0.99) * 1e6, 1)


# Rounds of one session timed in a row before the other session takes its turn.
SESSION_BLOCK = 25


def _alternating_session_rounds(
    client: scoutd.Client, runs: dict[int, tuple[str, list[list[dict[str, Any]]]]]
) -> dict[int, list[float]]:
    """One session per run (save file, prefixes): each prepares its first prefix
    untimed, then the sessions take turns, ``SESSION_BLOCK`` timed rounds at a
    time, so that a busy spell of the machine falls on every size alike (their
    ratio is a target) while each block still runs on warm caches."""
    clock = time.perf_counter
    samples: dict[int, list[float]] = {key: [] for key in runs}
    with contextlib.ExitStack() as stack:
        sessions = {
            key: stack.enter_context(client.session(path)) for key, (path, _) in runs.items()
        }
        for key, (_, prefixes) in runs.items():
            sessions[key].prepare_prompt(prefixes[0])
        rounds = max(len(prefixes) for _, prefixes in runs.values()) - 1
        with quiet_gc():
            for block in range(0, rounds, SESSION_BLOCK):
                for key, (_, prefixes) in runs.items():
                    session = sessions[key]
                    for prefix in prefixes[1 + block : 1 + block + SESSION_BLOCK]:
                        start = clock()
                        session.prepare_prompt(prefix)
                        samples[key].append(clock() - start)
    return samples


def bench_sessions(
    results: dict[str, Any], daemon: Daemon, directory: str, run: list[dict[str, Any]], plan: Plan
) -> None:
    """``session_round_ms_N``: append one call and its output, prepare, take the prompt.

    Timed with the session API (``client.session(...).prepare_prompt``), whatever
    it sends, the two sizes in alternating blocks of rounds; a relay counts what
    one round sends, which gives ``session_mode``.
    ``full_round_ms_N`` is the same round with the whole conversation each
    time (``Client.prepare_prompt`` with the session's save file): the baseline.
    """
    ends = round_ends(run)

    def prefixes(start: int) -> list[list[dict[str, Any]]]:
        return [run[: ends[calls - 1]] for calls in range(start, start + plan.session_rounds + 1)]

    save_file = os.path.join(directory, "agent.chat")
    progress("session mode: counting the bytes of one round")
    relay_path = os.path.join(directory, "relay.sock")
    large = prefixes(plan.session_large)[:2]
    with (
        CountingRelay(relay_path, daemon.socket_path) as relay,
        scoutd.Client(relay_path, timeout=120) as client,
        client.session(save_file) as s,
    ):
        s.prepare_prompt(large[0])
        before_sent, before_received = relay.sent, relay.received
        s.prepare_prompt(large[1])
        round_sent = relay.sent - before_sent
        round_received = relay.received - before_received
    whole = len(msgspec.json.encode(large[1]))
    results["session_mode"] = "incremental" if round_sent < whole // 2 else "full"
    results["session_round_request_bytes_2000"] = round_sent
    results["session_round_response_bytes_2000"] = round_received
    results["conversation_bytes_2000"] = whole

    sizes = {100: plan.session_small, 2000: plan.session_large}
    progress(
        f"session rounds from {plan.session_small} and {plan.session_large} calls "
        f"({plan.session_rounds} rounds each, in alternating blocks)"
    )
    with daemon.client() as client:
        samples = _alternating_session_rounds(
            client,
            {
                key: (os.path.join(directory, f"agent-{key}.chat"), prefixes(start))
                for key, start in sizes.items()
            },
        )
        for key, timed in samples.items():
            results[f"session_round_ms_{key}"] = ms(statistics.median(timed))
            results[f"session_round_ms_p99_{key}"] = ms(percentile(timed, 0.99))
        for key, start in sizes.items():
            rounds = prefixes(start)
            progress(f"whole-conversation rounds from {start} calls")
            clock = time.perf_counter
            client.prepare_prompt(rounds[0], save_file=save_file)
            full: list[float] = []
            with quiet_gc():
                for prefix in rounds[1:]:
                    begin = clock()
                    client.prepare_prompt(prefix, save_file=save_file)
                    full.append(clock() - begin)
            results[f"full_round_ms_{key}"] = ms(statistics.median(full))


def _save_files(directory: str, sessions: int, dirs: int, *, inboxes: bool) -> list[str]:
    """Save files spread evenly over ``dirs`` directories (with their inboxes made)."""
    paths = []
    for d in range(dirs):
        os.makedirs(os.path.join(directory, f"d{d:03d}"), exist_ok=True)
    for i in range(sessions):
        path = os.path.join(directory, f"d{i % dirs:03d}", f"agent{i:05d}.chat")
        if inboxes:
            os.makedirs(inbox_dir(path), exist_ok=True)
        paths.append(path)
    return paths


def _open_sessions(
    clients: Sequence[scoutd.Client], paths: Sequence[str]
) -> list[scoutd.client.Session]:
    """Open one session per path, the clients taking turns, one thread per client."""
    sessions: list[scoutd.client.Session | None] = [None] * len(paths)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(k, len(paths), len(clients)):
                sessions[i] = clients[k].open_session(paths[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [s for s in sessions if s is not None]


def _inotify_report(daemon: Daemon, wanted: int) -> dict[str, Any]:
    """Directories the daemon watches in the kernel, against those it should watch."""
    watches = daemon.inotify_watches()
    return {
        "watches": watches,
        "wanted": wanted,
        "max_user_watches": max_inotify_watches(),
        "limit_hit": watches < wanted,
    }


def bench_abort(results: dict[str, Any], daemon: Daemon, directory: str, plan: Plan) -> None:
    """``abort_ms_p50/p99``: from the rename of an abort file to the notification."""
    progress(f"aborts: opening {plan.abort_sessions} sessions over {plan.abort_dirs} directories")
    paths = _save_files(directory, plan.abort_sessions, plan.abort_dirs, inboxes=True)
    staging = os.path.join(directory, "staging")  # same file system, not watched
    os.makedirs(staging)
    clients = [daemon.client(timeout=60) for _ in range(plan.abort_connections)]
    try:
        sessions = _open_sessions(clients, paths)
        # one watch per inbox and per directory of save files (+ the config directory)
        results["abort_inotify"] = _inotify_report(
            daemon, plan.abort_sessions + plan.abort_dirs + 1
        )
        # a claim can wait for the periodic rescan when a watch could not be armed
        timeout = scoutd.load_config(daemon.config_path).daemon.rescan_interval * 2 + 5
        progress(f"aborts: {plan.aborts} aborts (at most {plan.abort_budget:.0f} s)")
        samples: list[float] = []
        lost = 0
        # sessions in a seeded random order: spread over the directories and connections
        order = random.Random(SEED).sample(range(len(sessions)), len(sessions))
        began = time.monotonic()
        for k in range(plan.aborts):
            if time.monotonic() - began > plan.abort_budget:
                break
            i = order[k % len(order)]
            temp = os.path.join(staging, f"abort-{k}")
            with open(temp, "w", encoding="utf-8") as handle:
                handle.write(f"benchmark abort {k}")
                handle.flush()
                os.fsync(handle.fileno())
            target = os.path.join(inbox_dir(paths[i]), "abort")
            start = time.perf_counter()
            os.rename(temp, target)
            arrived = sessions[i].wait_aborted(timeout)
            elapsed = time.perf_counter() - start
            if not arrived:
                lost += 1
            samples.append(elapsed)
            sessions[i].close()  # an aborted session stays aborted: open a fresh one
            sessions[i] = clients[i % len(clients)].open_session(paths[i])
        results["abort_ms_p50"] = ms(percentile(samples, 0.50))
        results["abort_ms_p99"] = ms(percentile(samples, 0.99))
        results["abort_ms_max"] = ms(max(samples))
        results["abort_samples"] = len(samples)
        results["abort_not_delivered"] = lost
        results["abort_sessions"] = plan.abort_sessions
        results["abort_daemon_threads"] = daemon.threads()
    finally:
        for client in clients:
            client.close()


def bench_rss(daemon: Daemon, directory: str, plan: Plan, *, inboxes: bool) -> dict[str, Any]:
    """The daemon's VmRSS idle and with ``plan.rss_sessions`` sessions open.

    With ``inboxes``, every session's inbox directory exists, so the daemon
    watches it as well as the save file's directory; without, it watches only
    the directories of the save files (an inbox is watched once it is created).
    """
    idle = daemon.rss_kb()
    made = "with" if inboxes else "without"
    progress(
        f"memory: {plan.rss_sessions} sessions over {plan.rss_dirs} directories, "
        f"{made} inbox directories"
    )
    paths = _save_files(directory, plan.rss_sessions, plan.rss_dirs, inboxes=inboxes)
    clients = [daemon.client(timeout=120) for _ in range(plan.rss_connections)]
    try:
        start = time.perf_counter()
        sessions = _open_sessions(clients, paths)
        elapsed = time.perf_counter() - start
        with daemon.client() as probe:
            counted = probe.status()["counts"]["sessions"]
        if counted != len(sessions) or counted != plan.rss_sessions:
            raise RuntimeError(f"{plan.rss_sessions} sessions opened, the daemon counts {counted}")
        loaded = daemon.rss_kb()
        wanted = plan.rss_dirs + 1 + (plan.rss_sessions if inboxes else 0)
        return {
            "idle_mb": round(idle / 1024, 2),
            "loaded_mb": round(loaded / 1024, 2),
            "per_session_kb": round((loaded - idle) / plan.rss_sessions, 3),
            "open_per_s": round(plan.rss_sessions / elapsed, 1),
            "threads": daemon.threads(),
            "inotify": _inotify_report(daemon, wanted),
        }
    finally:
        for client in clients:
            client.close()


# -- the run and its report ------------------------------------------------------------


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target: the measured ratio (or value), its limit and whether it is met."""
    rows = []
    for figure, reference, limit in RATIO_TARGETS:
        ratio = results[figure] / results[reference] if results[reference] else math.inf
        rows.append(
            {
                "name": f"{figure} / {reference}",
                "value": round(ratio, 3),
                "target": limit,
                "met": ratio <= limit,
            }
        )
    p99 = results["abort_ms_p99"]
    rows.append(
        {
            "name": "abort_ms_p99",
            "value": p99,
            "target": ABORT_P99_TARGET_MS,
            "met": p99 <= ABORT_P99_TARGET_MS,
        }
    )
    return rows


def run(plan: Plan, seed: int = SEED) -> dict[str, Any]:
    """Run every benchmark; return the results (figures, context and targets)."""
    started = time.perf_counter()
    load_before = round(os.getloadavg()[0], 2)
    results: dict[str, Any] = {}
    directory = tempfile.mkdtemp(prefix="sdb", dir="/tmp")  # short: socket paths
    saved_env = {name: os.environ.pop(name) for name in _PROMPT_ENV if name in os.environ}
    try:
        # The library and the daemon read the same file: built-in [prompt] defaults.
        rpc_daemon = Daemon(directory, "rpc", [directory])
        os.environ["SCOUTD_CONFIG"] = rpc_daemon.config_path
        progress("generating the synthetic conversations")
        small = synthetic_run(plan.small, seed=seed).messages
        large = synthetic_run(plan.large, seed=seed).messages
        long_run = synthetic_run(plan.session_large + plan.session_rounds, seed=seed).messages
        results["conversations"] = {
            str(key): {
                "calls": calls,
                "messages": len(m),
                "chars": sum(len(x["content"]) for x in m),
            }
            for key, calls, m in ((400, plan.small, small), (2000, plan.large, large))
        }
        progress(f"floor and in-process prepare_prompt, {plan.small} calls")
        bench_inproc(results, 400, small, plan.inproc_runs_small, plan.warmup, fresh=False)
        progress(f"floor and in-process prepare_prompt, {plan.large} calls")
        bench_inproc(results, 2000, large, plan.inproc_runs_large, plan.warmup, fresh=True)
        for key, runs, messages in (
            (400, plan.inproc_runs_small, small),
            (2000, plan.inproc_runs_large, large),
        ):
            progress(f"OpenAI Chat format against scout format, {len(messages)} messages")
            bench_formats(results, key, messages, runs, plan.warmup, interleaved)
        rescan_interval = scoutd.load_config().daemon.rescan_interval

        sessions_dir = os.path.join(directory, "sessions")
        os.makedirs(sessions_dir)
        with rpc_daemon as daemon:
            bench_rpc(results, daemon, large, small[: plan.small_messages], plan)
            bench_sessions(results, daemon, sessions_dir, long_run, plan)
            progress("in-process and repeat-heavy session rounds")
            bench_speed(results, daemon, sessions_dir, plan, seed, quiet_gc=quiet_gc)

        abort_dir = os.path.join(directory, "aborts")
        os.makedirs(abort_dir)
        with Daemon(directory, "abort", [abort_dir]) as daemon:
            bench_abort(results, daemon, abort_dir, plan)

        for inboxes in (True, False):
            name = "rss" if inboxes else "rss-bare"
            rss_dir = os.path.join(directory, name)
            os.makedirs(rss_dir)
            with Daemon(directory, name, [rss_dir]) as daemon:
                figures = bench_rss(daemon, rss_dir, plan, inboxes=inboxes)
            suffix = "" if inboxes else "_no_inbox"
            if inboxes:
                results["rss_idle_mb"] = figures["idle_mb"]
                results["rss_session_count"] = plan.rss_sessions
            results[f"rss_sessions_mb{suffix}"] = figures["loaded_mb"]
            results[f"rss_per_session_kb{suffix}"] = figures["per_session_kb"]
            results[f"session_open_per_s{suffix}"] = figures["open_per_s"]
            results[f"rss_daemon_threads{suffix}"] = figures["threads"]
            results[f"rss_inotify{suffix}"] = figures["inotify"]

        bench_startup(results, plan.startup_runs, progress)
        sizes = (plan.cpu_small_mb, plan.cpu_large_mb)
        bench_cpu(results, directory, sizes, plan.cpu_runs, plan.cpu_sample_s, progress)
    finally:
        os.environ.pop("SCOUTD_CONFIG", None)
        os.environ.update(saved_env)
        shutil.rmtree(directory, ignore_errors=True)
    results["targets"] = [
        *targets(results),
        *speed_targets(results),
        *cpu_targets(results),
        *startup_targets(results),
    ]
    for target in results["targets"] if plan != Plan() else ():
        target["met"] = None  # tiny sizes: the full-size targets say nothing about them
    results["context"] = {
        "quick": plan != Plan(),
        "plan": asdict(plan),
        "seed": seed,
        "scoutd": scoutd.__version__,
        "python": platform.python_version(),
        "msgspec": msgspec.__version__,
        "platform": platform.platform(terse=True),
        "cpus": os.cpu_count(),
        "inproc_config": "snapshot (load_config() once); inproc_fresh_config reads it per call",
        "gc": "disabled during in-process and client-side timed loops",
        "rescan_interval_s": rescan_interval,
        "load_average_1min": [load_before, round(os.getloadavg()[0], 2)],
        "seconds": round(time.perf_counter() - started, 1),
    }
    return results


def _row(label: str, value: str, note: str = "") -> str:
    return f"  {label:<54} {value:>12}  {note}".rstrip()


def render(results: dict[str, Any]) -> str:
    """The readable report: figures with their ratios, then the targets."""
    r = results
    ctx = r["context"]
    plan = ctx["plan"]
    small, large = (r["conversations"][key]["calls"] for key in ("400", "2000"))
    s_small, s_large = plan["session_small"], plan["session_large"]

    def ratio(a: str, b: str) -> str:
        return f"{r[a] / r[b]:.2f} x {b}" if r[b] else ""

    def msec(key: str) -> str:
        return f"{r[key]:.2f} ms"

    def pair(key: str, fmt: str) -> tuple[str, str]:
        return format(r[key], fmt), "/ " + format(r[key + "_no_inbox"], fmt)

    lines = [
        f"scoutd {ctx['scoutd']} benchmark: Python {ctx['python']}, msgspec {ctx['msgspec']}, "
        f"{ctx['cpus']} CPUs, load {ctx['load_average_1min'][0]}"
        + ("  [QUICK: tiny sizes]" if ctx["quick"] else ""),
        "",
        "in-process, median (config snapshot unless said)",
        _row(f"floor: decode each tool message, {small} calls", msec("floor_ms_400")),
        _row(
            f"prepare_prompt, {small} calls",
            msec("inproc_ms_400"),
            ratio("inproc_ms_400", "floor_ms_400"),
        ),
        _row(f"floor: decode each tool message, {large} calls", msec("floor_ms_2000")),
        _row(
            f"prepare_prompt, {large} calls",
            msec("inproc_ms_2000"),
            ratio("inproc_ms_2000", "floor_ms_2000"),
        ),
        _row(
            f"prepare_prompt, {large} calls, config read per call",
            msec("inproc_fresh_config_ms_2000"),
            ratio("inproc_fresh_config_ms_2000", "inproc_ms_2000"),
        ),
        _row(
            f"prepare_prompt in OpenAI Chat format, {small} calls",
            msec("format_openai_chat_ms_400"),
            ratio("format_openai_chat_ms_400", "format_scout_ms_400") + " of scout",
        ),
        _row(
            f"prepare_prompt in OpenAI Chat format, {large} calls",
            msec("format_openai_chat_ms_2000"),
            ratio("format_openai_chat_ms_2000", "format_scout_ms_2000") + " of scout",
        ),
        *(
            _row(
                f"prepare_prompt in {title} format, {calls} calls",
                msec(f"format_{name}_ms_{key}"),
                f"{r[f'format_{name}_overhead_{key}']:.2f} x scout, timed in turn",
            )
            for name, title in (
                ("anthropic", "Anthropic"),
                ("openai_responses", "OpenAI Responses"),
            )
            for key, calls in ((400, small), (2000, large))
        ),
        "",
        "through the daemon, client encode to client decode",
        _row(
            f"in process, {large} calls, timed in turn with the two below",
            msec("rpc_inproc_ms_2000"),
        ),
        _row(
            f"prepare_prompt, {large} calls, median",
            msec("rpc_ms_2000"),
            ratio("rpc_ms_2000", "rpc_inproc_ms_2000")
            + f" ({r['rpc_ms_2000'] / r['inproc_ms_2000']:.2f} x inproc_ms_2000)",
        ),
        _row(
            f"prepare_prompt, {large} calls, whole answer, median",
            msec("rpc_whole_answer_ms_2000"),
            ratio("rpc_whole_answer_ms_2000", "rpc_inproc_ms_2000"),
        ),
        _row(
            f"prepare_prompt, {plan['small_messages']} messages, p50",
            f"{r['small_rpc_us_p50']:.0f} us",
        ),
        _row(
            f"prepare_prompt, {plan['small_messages']} messages, p99",
            f"{r['small_rpc_us_p99']:.0f} us",
        ),
        "",
        f"session rounds: append a call and its output, prepare (mode: {r['session_mode']})",
        _row(f"session round from {s_small} calls, median", msec("session_round_ms_100")),
        _row(
            f"session round from {s_large} calls, median",
            msec("session_round_ms_2000"),
            ratio("session_round_ms_2000", "session_round_ms_100"),
        ),
        _row(f"session round from {s_large} calls, p99", msec("session_round_ms_p99_2000")),
        _row(
            "bytes one round sends / receives",
            f"{r['session_round_request_bytes_2000']:,}",
            f"/ {r['session_round_response_bytes_2000']:,} "
            f"(whole conversation: {r['conversation_bytes_2000']:,})",
        ),
        _row(f"whole-conversation round from {s_small} calls", msec("full_round_ms_100")),
        _row(f"whole-conversation round from {s_large} calls", msec("full_round_ms_2000")),
        "",
        f"aborts: {r['abort_samples']} aborts among {r['abort_sessions']} open sessions",
        _row("rename to notification, p50", msec("abort_ms_p50")),
        _row("rename to notification, p99", msec("abort_ms_p99")),
        _row("rename to notification, max", msec("abort_ms_max")),
        _row("not delivered in time", str(r["abort_not_delivered"])),
        _row("daemon threads", str(r["abort_daemon_threads"])),
        _row("inotify watches held / wanted", _inotify_cell(r["abort_inotify"])),
        "",
        f"memory: {r['rss_session_count']} sessions, with / without their inbox directories",
        _row("daemon RSS idle", f"{r['rss_idle_mb']:.1f} MB"),
        _row("daemon RSS with the sessions (MB)", *pair("rss_sessions_mb", ".1f")),
        _row("per session (KB)", *pair("rss_per_session_kb", ".2f")),
        _row("sessions opened per second", *pair("session_open_per_s", ".0f")),
        _row("daemon threads", *pair("rss_daemon_threads", "d")),
        _row(
            "inotify watches held / wanted",
            _inotify_cell(r["rss_inotify"]),
            "/ " + _inotify_cell(r["rss_inotify_no_inbox"]),
        ),
        "",
        *render_speed(r, _row),
        "",
        *render_cpu(r, _row),
        "",
        *render_startup(r, _row),
        "",
        "targets (ratios of this run)",
    ]
    for target in r["targets"]:
        verdict = {True: "met", False: "NOT MET", None: "not judged (quick)"}[target["met"]]
        lines.append(
            _row(target["name"], f"{target['value']:g}", f"<= {target['target']:g}  {verdict}")
        )
    lines += ["", f"({ctx['seconds']} s)"]
    return "\n".join(lines)


def _inotify_cell(report: dict[str, Any]) -> str:
    cell = f"{report['watches']} / {report['wanted']}"
    if report["limit_hit"]:
        cell += f" (max_user_watches {report['max_user_watches']})"
    return cell


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description="scoutd performance benchmark (docs/PERFORMANCE.md)",
        epilog="scripts/bench --fleet [--json]: the fleet's figures instead"
        " (scripts/bench_fleet.py; needs redis-server)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the conversations")
    args = parser.parse_args(argv)
    results = run(QUICK if args.quick else Plan(), args.seed)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
