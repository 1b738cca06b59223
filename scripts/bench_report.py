"""The report of ``scripts/bench``: the targets' verdicts and the readable table."""

from __future__ import annotations

import math
from typing import Any

from bench_cpu import render_cpu
from bench_speed import render_speed
from bench_startup import render_startup

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
