"""Through-the-daemon figures of ``scripts/bench``: ``prepare_prompt`` round trips (whole
and small calls) and session rounds, against the whole-conversation baseline."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Any

import msgspec
from bench_daemon import CountingRelay, Daemon
from bench_plan import Plan
from bench_timing import interleaved, ms, progress, quiet_gc

import scoutd
from scoutd.simulate.workload import round_ends
from scoutd.testing import percentile


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
