"""``scoutd simulate``: the command line of the simulator.

Exit codes: 0 the comparison ran (also when a strategy overflowed the context
window: it is marked FAILED in the table and ``"failed": true`` in the JSON);
1 an error (unreadable chat, ``--plot`` without matplotlib), or with
``--strict`` any strategy overflowed; 2 a usage error (bad flag, unknown
strategy, invalid config override).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from ..config import PromptConfig, load_config
from ..errors import ConfigError, ScoutdError, UnknownStrategy
from .cache import CACHE_MODELS, PRESETS, CacheSettings, Estimator, Prices, Tokenizer
from .replay import (
    DEFAULT_STRATEGIES,
    DEFAULT_STRATEGY,
    ExcludedStrategy,
    PeerSettings,
    Settings,
    Simulation,
    StrategyResult,
    check_strategies,
    provider_config,
    run_strategy,
    simulate,
)
from .report import (
    PlotUnavailable,
    encode_json,
    format_header,
    format_table,
    plot,
    require_matplotlib,
)
from .workload import ChatError, Workload, load_chat, synthetic_run

__all__ = ["build_parser", "main"]

DEFAULT_CALLS = 400
SWEEP_STRATEGY = DEFAULT_STRATEGY
# Sweepable parameters of the peer emulations (PeerSettings fields).
PEER_KEYS = frozenset(
    {
        "mask_n",
        "mask_polling",
        "clear_trigger",
        "clear_keep",
        "clear_at_least",
        "summary_max_size",
        "summary_keep_first",
        "summary_chars",
    }
)


class UsageError(ValueError):
    """A command line that cannot run."""


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _price(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``scoutd simulate``."""
    parser = argparse.ArgumentParser(
        prog="scoutd simulate",
        description=(
            "Replay an agent run round by round (a round ends after each tool output) under "
            "several prompt strategies and compare prompt size, prompt-cache hits and billed "
            "input cost."
        ),
    )
    work = parser.add_argument_group("workload")
    source = work.add_mutually_exclusive_group()
    source.add_argument(
        "--calls", type=_count, help=f"synthetic run of N tool calls (default {DEFAULT_CALLS})"
    )
    source.add_argument(
        "--chat", metavar="FILE", help="replay a recorded chat (JSON list of messages; - for stdin)"
    )
    work.add_argument("--seed", type=int, default=0, help="seed of the synthetic run (default 0)")
    work.add_argument(
        "--repeat-rate",
        type=float,
        default=0.05,
        help="share of calls repeating an earlier call exactly (default 0.05)",
    )
    work.add_argument(
        "--user-turns",
        type=_count,
        default=3,
        help="user turns spread through the synthetic run (default 3)",
    )

    strat = parser.add_argument_group("strategies")
    strat.add_argument(
        "--strategies",
        metavar="A,B,...",
        help=f"strategies to compare (default: {','.join(DEFAULT_STRATEGIES)})",
    )
    strat.add_argument(
        "--config", metavar="FILE", help="scoutd config file (default: the usual lookup)"
    )
    strat.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a [prompt] key for this run (repeatable)",
    )
    strat.add_argument(
        "--mask-n",
        type=_count,
        default=10,
        help="mask_last_n: tool outputs kept verbatim (default 10)",
    )
    strat.add_argument(
        "--mask-polling",
        type=_positive,
        default=1,
        help="mask_last_n: move the window every N outputs (SWE-agent's polling, default 1)",
    )
    strat.add_argument(
        "--clear-mode",
        choices=("stateless", "sticky"),
        default="stateless",
        help="clear_tool_uses: the API clears the full history on every request (stateless, "
        "default) or the client keeps what was cleared (sticky)",
    )
    strat.add_argument(
        "--summary-max-size",
        type=_positive,
        default=120,
        help="summarize: messages in view before a summary (default 120)",
    )
    strat.add_argument(
        "--summary-keep-first",
        type=_count,
        default=4,
        help="summarize: first messages always kept (default 4)",
    )
    strat.add_argument(
        "--summary-chars",
        type=_count,
        default=2000,
        help="summarize: size of the placeholder summary in characters (default 2000)",
    )
    strat.add_argument(
        "--clear-trigger",
        type=_count,
        default=100_000,
        help="clear_tool_uses: prompt tokens that trigger clearing (default 100000)",
    )
    strat.add_argument(
        "--clear-keep",
        type=_count,
        default=3,
        help="clear_tool_uses: last tool uses kept (default 3)",
    )
    strat.add_argument(
        "--clear-at-least",
        type=_count,
        default=0,
        help="clear_tool_uses: minimum tokens cleared per activation (default unset)",
    )
    strat.add_argument(
        "--sweep",
        metavar="KEY=V1,V2,...",
        help="run once per value of a [prompt] key, or of mask_n, clear_trigger, clear_keep "
        "or clear_at_least",
    )

    model = parser.add_argument_group("cache and prices")
    model.add_argument(
        "--pricing",
        choices=sorted(PRESETS),
        default="anthropic",
        help="preset of prices and cache behaviour (default anthropic)",
    )
    model.add_argument("--price-input", type=_price, help="price of an uncached input token")
    model.add_argument("--price-write", type=_price, help="price of a token written to the cache")
    model.add_argument("--price-read", type=_price, help="price of a token read from the cache")
    model.add_argument(
        "--cache-granularity",
        type=_count,
        help="cached prefix rounded down to a multiple of N tokens",
    )
    model.add_argument("--cache-min-tokens", type=_count, help="nothing is cached below N tokens")
    model.add_argument(
        "--cache-model",
        choices=CACHE_MODELS,
        default="prefix",
        help="prefix: any common prefix with the previous prompt; breakpoints: only up to where "
        "an earlier prompt ended or a fixed breakpoint, 20 messages back at most (default prefix)",
    )
    model.add_argument(
        "--whole-messages",
        action="store_true",
        help="prefix model: cache up to the last whole message in common only",
    )
    model.add_argument(
        "--round-seconds",
        type=_price,
        default=0.0,
        help="time between two rounds; with the preset's cache lifetime, idle gaps are priced "
        "(default 0: the cache never expires)",
    )
    model.add_argument(
        "--ttl", type=_price, help="cache lifetime in seconds (default: the preset's)"
    )
    model.add_argument(
        "--context-window",
        type=_count,
        default=200_000,
        help="a prompt above N tokens overflows (default 200000)",
    )
    model.add_argument(
        "--chars-per-token",
        type=float,
        default=4.0,
        help="token estimate: characters per token (default 4)",
    )
    model.add_argument(
        "--tokenizer",
        metavar="MODULE:ATTR",
        help="count tokens with this callable (str -> int) instead",
    )

    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the figures as JSON")
    out.add_argument(
        "--per-round", action="store_true", help="with --json: include per-round series"
    )
    out.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write prompt tokens and cumulative cost per round (needs scoutd[plot])",
    )
    out.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any strategy overflows the context window",
    )
    return parser


def _value(text: str) -> Any:
    """A command-line value: JSON when it parses (numbers, booleans), else the string."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


def _pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{flag} expects KEY=VALUE, got {text!r}")
    return key.strip(), value


def _tokenizer(target: str) -> Tokenizer:
    module_name, _, attribute = target.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else []:
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--tokenizer {target}: {exc}") from exc
    if not callable(found):
        raise UsageError(f"--tokenizer {target} is not callable")
    tokenizer: Tokenizer = found
    return tokenizer


def _settings(args: argparse.Namespace, overrides: dict[str, Any]) -> Settings:
    preset_prices, preset_cache = PRESETS[args.pricing]
    prices = Prices(
        input=preset_prices.input if args.price_input is None else args.price_input,
        write=preset_prices.write if args.price_write is None else args.price_write,
        read=preset_prices.read if args.price_read is None else args.price_read,
    )
    try:
        cache = CacheSettings(
            granularity=preset_cache.granularity
            if args.cache_granularity is None
            else args.cache_granularity,
            min_tokens=preset_cache.min_tokens
            if args.cache_min_tokens is None
            else args.cache_min_tokens,
            model=args.cache_model,
            whole_messages=args.whole_messages,
            ttl=(preset_cache.ttl if args.ttl is None else args.ttl)
            if args.round_seconds
            else None,
        )
        tokenizer = _tokenizer(args.tokenizer) if args.tokenizer else None
        estimator = Estimator(tokenizer, args.chars_per_token)
        peers = PeerSettings(
            mask_n=args.mask_n,
            mask_polling=args.mask_polling,
            clear_trigger=args.clear_trigger,
            clear_keep=args.clear_keep,
            clear_at_least=args.clear_at_least,
            clear_mode=args.clear_mode,
            summary_max_size=args.summary_max_size,
            summary_keep_first=args.summary_keep_first,
            summary_chars=args.summary_chars,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    config = provider_config(load_config(args.config, overrides=overrides), args.pricing)
    return Settings(
        prices=prices,
        cache=cache,
        pricing=args.pricing,
        context_window=args.context_window,
        peers=peers,
        estimator=estimator,
        config=config,
        overrides=dict(overrides),
        round_seconds=args.round_seconds,
    )


def _workload(args: argparse.Namespace) -> Workload:
    if args.chat is not None:
        return load_chat(args.chat)
    calls = DEFAULT_CALLS if args.calls is None else args.calls
    try:
        return synthetic_run(
            calls, seed=args.seed, repeat_rate=args.repeat_rate, user_turns=args.user_turns
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _names(args: argparse.Namespace, default: Sequence[str]) -> list[str]:
    if args.strategies is None:
        return list(default)
    names = [name.strip() for name in args.strategies.split(",") if name.strip()]
    if not names:
        raise UsageError("--strategies names no strategy")
    return names


def _single(args: argparse.Namespace, overrides: dict[str, Any]) -> tuple[int, str]:
    settings = _settings(args, overrides)
    names = _names(args, DEFAULT_STRATEGIES)
    check_strategies(names, settings.config)
    workload = _workload(args)
    started = time.perf_counter()
    result = simulate(workload, names, settings)
    elapsed = time.perf_counter() - started
    rows = [(r.strategy, r) for r in result.strategies]
    if args.plot:
        title = format_header(result).splitlines()[0]
        plot(rows, args.plot, context_window=settings.context_window, title=title)
    failed = any(r.failed for r in result.strategies)
    if args.json:
        text = encode_json(result, per_round=args.per_round)
    else:
        text = f"{format_header(result)}\n\n{format_table(rows)}\n"
        if failed:
            text += (
                "\nFAILED: the prompt exceeded the context window in that many rounds; a real "
                "run would have stopped there.\n"
            )
        text += f"\n({len(names)} strategies replayed in {elapsed:.1f} s)\n"
    return (1 if failed and args.strict else 0), text


def _sweep(args: argparse.Namespace, overrides: dict[str, Any]) -> tuple[int, str]:
    key, raw = _pair(args.sweep, "--sweep")
    values = [_value(v.strip()) for v in raw.split(",") if v.strip()]
    if not values:
        raise UsageError("--sweep names no value")
    if key not in PEER_KEYS and key not in PromptConfig.__struct_fields__:
        raise UsageError(
            f"--sweep {key}: not a [prompt] key nor one of {', '.join(sorted(PEER_KEYS))}"
        )
    names = _names(args, [SWEEP_STRATEGY])
    workload = _workload(args)
    base = _settings(args, overrides)
    check_strategies(names, base.config)
    baseline: StrategyResult | None = None
    runs: list[dict[str, Any]] = []
    rows: list[tuple[str, StrategyResult]] = []
    for value in values:
        if key in PEER_KEYS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UsageError(f"--sweep {key}: {value!r} is not a count")
            settings = dataclasses.replace(
                base, peers=dataclasses.replace(base.peers, **{key: value})
            )
        else:
            settings = _settings(args, {**overrides, key: value})
        if baseline is None:
            baseline = run_strategy(workload, "none", settings, keep_series=False)
        result: Simulation = simulate(workload, names, settings, baseline=baseline)
        runs.append({"value": value, "simulation": result})
        for r in result.strategies:
            label = f"{key}={value}" if len(names) == 1 else f"{key}={value} {r.strategy}"
            rows.append((label, r))
    failed = any(r.failed for _, r in rows)
    if args.plot:
        plot(rows, args.plot, context_window=base.context_window, title=f"sweep of {key}")
    if args.json:
        text = encode_json(
            {"sweep": {"key": key, "values": values}, "runs": runs}, per_round=args.per_round
        )
    else:
        header = format_header(runs[0]["simulation"], exclude=key)
        text = (
            f"{header}\nsweep of {key} over {', '.join(map(str, values))}\n\n{format_table(rows)}\n"
        )
    return (1 if failed and args.strict else 0), text


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``scoutd simulate`` with ``argv`` (without the program name)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.plot:
            require_matplotlib()
        overrides = dict(_pair(item, "--set") for item in args.set)
        overrides = {key: _value(value) for key, value in overrides.items()}
        if args.sweep:
            code, text = _sweep(args, overrides)
        else:
            code, text = _single(args, overrides)
    except (UsageError, UnknownStrategy, ExcludedStrategy, ConfigError) as exc:
        print(f"scoutd simulate: {exc}", file=sys.stderr)
        return 2
    except (ChatError, PlotUnavailable, ScoutdError, OSError) as exc:
        print(f"scoutd simulate: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if code:
        print(
            "scoutd simulate: a strategy overflowed the context window (--strict)", file=sys.stderr
        )
    return code
