"""Session figures of ``scripts/bench`` (docs/PERFORMANCE.md): in-process and repeat-heavy.

``inproc_session_round_ms_2000`` is a round of :class:`scoutd.Session` (append a
call and its output, prepare) from 2,000 calls with the default strategies;
``..._epoch_2000`` the same with the epoch strategies, ``..._openai_chat_2000``
the same conversation in OpenAI Chat form, and
``inproc_session_cold_ms_2000`` the first round of a new session (everything
computed, nothing remembered yet). ``session_round_ms_repeats_2000`` is a
daemon session round on a repeat-heavy run (at least half of the calls repeat
an earlier one; ``repeat_share`` says how many did), and
``session_round_ms_openai_chat_2000`` one on the plain run in OpenAI Chat form. Imported by
``scripts/bench.py``, which owns the daemons and the report.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bench_formats import as_openai_chat

import scoutd
from scoutd.config import Config, PromptConfig
from scoutd.simulate.workload import round_ends, synthetic_run
from scoutd.strategies.tool_messages import call_keys, index_tools
from scoutd.testing import percentile

__all__ = [
    "REPEAT_RATE",
    "SPEED_LIMITS",
    "bench_speed",
    "render_speed",
    "repeat_share",
    "speed_targets",
]

# The probability that a synthetic call repeats an earlier one: more than half do.
REPEAT_RATE = 0.6
EPOCH = Config(prompt=PromptConfig(prompt_strategies=("shorten_tools_epoch_increment", "inbox")))
# (figure, limit): absolute targets of the full-size run (quick runs do not judge them).
SPEED_LIMITS = (
    ("inproc_session_round_ms_2000", 0.2),
    ("session_round_ms_repeats_2000", 1.0),
    ("rss_per_session_kb", 10.0),
)

QuietGc = Callable[[], contextlib.AbstractContextManager[None]]


def repeat_share(messages: Sequence[Any]) -> float:
    """The share of calls whose name and arguments repeat an earlier call's."""
    index = index_tools(messages)
    keys = call_keys(
        [body for body, is_call in zip(index.bodies, index.is_call, strict=True) if is_call]
    )
    seen: set[bytes] = set()
    repeats = 0
    for key in keys:
        repeats += key in seen
        seen.add(key)
    return repeats / len(keys) if keys else 0.0


def _prefixes(run: list[Any], start: int, rounds: int) -> list[list[Any]]:
    """The conversation after ``start`` calls, then after each of ``rounds`` more."""
    ends = round_ends(run)
    return [run[: ends[calls - 1]] for calls in range(start, start + rounds + 1)]


def _chat_prefixes(run: list[Any], start: int, rounds: int) -> list[list[Any]]:
    """:func:`_prefixes` of ``run`` in OpenAI Chat form, each a prefix of one list
    (the same message objects every round, as an agent sends them)."""
    chat = as_openai_chat(run)
    made = 0  # OpenAI Chat messages made from the scout messages so far
    lengths = []
    for position, message in enumerate(run):
        follows_call = position > 0 and run[position - 1]["role"] == "function_call"
        made += not (message["role"] == "function_call" and follows_call)  # calls in a row: one
        lengths.append(made)
    ends = round_ends(run)
    return [chat[: lengths[ends[calls - 1] - 1]] for calls in range(start, start + rounds + 1)]


def _time_rounds(prepare: Callable[[list[Any]], object], prefixes: list[list[Any]]) -> list[float]:
    """Prepare the first prefix untimed, then time one round per further prefix."""
    prepare(prefixes[0])
    clock = time.perf_counter
    samples = []
    for prefix in prefixes[1:]:
        start = clock()
        prepare(prefix)
        samples.append(clock() - start)
    return samples


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def bench_speed(
    results: dict[str, Any],
    daemon: Any,
    directory: str,
    plan: Any,
    seed: int,
    *,
    quiet_gc: QuietGc,
) -> None:
    """Measure the in-process session and repeat-heavy figures into ``results``."""
    start, rounds = plan.session_large, plan.session_rounds
    plain = synthetic_run(start + rounds, seed=seed).messages
    repeats = synthetic_run(start + rounds, seed=seed, repeat_rate=REPEAT_RATE).messages
    results["repeat_share"] = round(repeat_share(repeats), 3)
    snapshot = scoutd.load_config()
    cases = (
        ("", plain, snapshot),
        ("_epoch", plain, EPOCH),
        ("_repeats", repeats, snapshot),
        ("_repeats_epoch", repeats, EPOCH),
        ("_openai_chat", plain, snapshot),
    )
    for suffix, run, config in cases:
        cut = _chat_prefixes if suffix == "_openai_chat" else _prefixes
        prefixes = cut(run, start, rounds)
        cold: list[float] = []
        with quiet_gc():
            for _ in range(3):
                session = scoutd.Session(config=config)
                begin = time.perf_counter()
                session.prepare_prompt(prefixes[0])
                cold.append(time.perf_counter() - begin)
            samples = _time_rounds(session.prepare_prompt, prefixes)
        results[f"inproc_session_cold_ms{suffix}_2000"] = _ms(statistics.median(cold))
        results[f"inproc_session_round_ms{suffix}_2000"] = _ms(statistics.median(samples))
        results[f"inproc_session_round_ms_p99{suffix}_2000"] = _ms(percentile(samples, 0.99))
        state = session._state
        cache = (
            state._provider[1] if state._provider else state
        ).rewrites  # a provider's: its view's
        results[f"inproc_session_rewrites_reused{suffix}_2000"] = cache.hits
        results[f"inproc_session_rewrites_computed{suffix}_2000"] = cache.misses

    daemon_cases = (
        ("_repeats", _prefixes(repeats, start, rounds)),
        ("_openai_chat", _chat_prefixes(plain, start, rounds)),
    )
    for suffix, prefixes in daemon_cases:
        save_file = os.path.join(directory, f"session{suffix}.chat")
        with daemon.client() as client, client.session(save_file) as remote, quiet_gc():
            samples = _time_rounds(remote.prepare_prompt, prefixes)
        results[f"session_round_ms{suffix}_2000"] = _ms(statistics.median(samples))
        results[f"session_round_ms_p99{suffix}_2000"] = _ms(percentile(samples, 0.99))


def speed_targets(results: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The absolute targets of this module, as the target rows of the report."""
    for figure, limit in SPEED_LIMITS:
        value = results[figure]
        yield {"name": figure, "value": value, "target": limit, "met": value <= limit}


def render_speed(results: dict[str, Any], row: Callable[..., str]) -> list[str]:
    """The report's lines for these figures."""
    plan = results["context"]["plan"]
    start = plan["session_large"]
    lines = [
        "",
        f"in-process sessions (scoutd.Session), round from {start} calls: median / p99",
    ]
    labels = (
        ("", "default strategies"),
        ("_openai_chat", "default, in OpenAI Chat format"),
        ("_epoch", "epoch strategies"),
        ("_repeats", f"default, {results['repeat_share']:.0%} repeated calls"),
        ("_repeats_epoch", f"epoch, {results['repeat_share']:.0%} repeated calls"),
    )
    for suffix, label in labels:
        lines.append(
            row(
                f"{label}",
                f"{results[f'inproc_session_round_ms{suffix}_2000']:.3f} ms",
                f"/ {results[f'inproc_session_round_ms_p99{suffix}_2000']:.3f} ms, first round "
                f"{results[f'inproc_session_cold_ms{suffix}_2000']:.2f} ms",
            )
        )
    daemon_labels = (
        ("_repeats", f"daemon session round, {results['repeat_share']:.0%} repeated calls"),
        ("_openai_chat", "daemon session round, in OpenAI Chat format"),
    )
    for suffix, label in daemon_labels:
        lines.append(
            row(
                label,
                f"{results[f'session_round_ms{suffix}_2000']:.3f} ms",
                f"/ {results[f'session_round_ms_p99{suffix}_2000']:.3f} ms",
            )
        )
    return lines
