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
import functools
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from ..config import PromptConfig, load_config
from ..errors import ConfigError, ScoutdError, UnknownStrategy
from ..formats import detect_format, scout_view
from ..paths import printable
from ..pricing import AUTO, preset_for_format
from ..strategies.tokens import load_tokenizer
from .cache import PRESETS, CacheSettings, Estimator, Prices, Tokenizer
from .options import DEFAULT_CALLS, build_parser
from .origins import Origins, format_origins
from .progress import Progress
from .replay import (
    DEFAULT_STRATEGIES,
    DEFAULT_STRATEGY,
    ExcludedStrategy,
    PeerSettings,
    Settings,
    Simulation,
    StrategyResult,
    check_strategies,
    describe_model,
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
from .runs import aggregate, count_runs, format_runs, replay_runs
from .workload import ChatError, Workload, load_chat, synthetic_run

__all__ = ["build_parser", "main"]

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


# The longest synthetic run, in tool calls (and user turns): far past any real agent
# run, while the replay, quadratic in the calls, still ends (10,000 calls take minutes).
MAX_CALLS = 100_000


class UsageError(ValueError):
    """A command line that cannot run."""


def _value(text: str) -> Any:
    """A command-line value: JSON when it parses (numbers, booleans), else the string
    (bytes that are not UTF-8 too: the configuration refuses them by name)."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return text


def _pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{flag} expects KEY=VALUE, got {text!r}")
    return key.strip(), value


class TokenizerFailed(RuntimeError):
    """The ``--tokenizer`` callable raised while the replay counted a text."""


def _tokenizer(target: str) -> Tokenizer:
    """The ``--tokenizer`` callable; what it raises on a text is one error line, not a
    traceback (its result is held to a count by :func:`load_tokenizer`)."""
    try:
        counter = load_tokenizer(target)
    except ConfigError as exc:
        raise UsageError(f"--tokenizer {target}: {exc}") from exc

    @functools.wraps(counter)  # its name: the report's header says "tokens = len"
    def count(text: str) -> int:
        try:
            return counter(text)
        except ConfigError:
            raise  # it returned something other than a count: said so already
        except Exception as exc:
            raise TokenizerFailed(
                f"--tokenizer {target} raised {type(exc).__name__}: {exc}"
            ) from exc

    return count


def _settings(
    args: argparse.Namespace, overrides: dict[str, Any], format_name: str | None = None
) -> Settings:
    """The replay's settings; with ``--pricing auto``, the provider of ``format_name``.

    The strategies' ``cache_pricing`` follows the chosen provider, as ``auto``
    does in a deployment; with no format (a runs file), it stays as configured
    and each run sets its own.
    """
    pricing = preset_for_format(format_name) if args.pricing == AUTO else args.pricing
    preset_prices, preset_cache = PRESETS[pricing]
    prices = Prices(
        input=preset_prices.input if args.price_input is None else args.price_input,
        write=preset_prices.write if args.price_write is None else args.price_write,
        read=preset_prices.read if args.price_read is None else args.price_read,
        output=preset_prices.output if args.price_output is None else args.price_output,
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
    config = load_config(args.config, overrides=overrides)
    if args.pricing != AUTO or format_name is not None:
        config = provider_config(config, pricing)
    return Settings(
        prices=prices,
        cache=cache,
        pricing=pricing,
        context_window=args.context_window,
        peers=peers,
        estimator=estimator,
        config=config,
        overrides=dict(overrides),
        round_seconds=args.round_seconds,
    )


def _workload(args: argparse.Namespace) -> Workload:
    if args.chat is not None:
        workload = load_chat(args.chat)
        # the file's name is shown in the header and the JSON: one safe line, and text
        # JSON can hold (its maker chose it: escape sequences, bytes that are not UTF-8)
        shown = printable(workload.source)
        try:  # the strategies replay the scout view of any provider format
            view = scout_view(workload.messages, args.format)
        except ValueError as exc:
            raise ChatError(f"chat {workload.source}: {exc}") from exc
        try:
            name = detect_format(workload.messages) if args.format == AUTO else args.format
        except ValueError as exc:
            raise ChatError(f"chat {workload.source}: {exc}") from exc
        parameters = {**workload.parameters, "chat": shown, "format": name}
        return dataclasses.replace(workload, messages=view, source=shown, parameters=parameters)
    calls = DEFAULT_CALLS if args.calls is None else args.calls
    for flag, count in (("--calls", calls), ("--user-turns", args.user_turns)):
        if count > MAX_CALLS:  # else a run that never ends, or a wait before it starts
            raise UsageError(f"{flag} {count}: at most {MAX_CALLS:,}")
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
    workload = _workload(args)
    settings = _settings(args, overrides, workload.parameters.get("format"))
    names = _names(args, DEFAULT_STRATEGIES)
    check_strategies(names, settings.config)
    started = time.perf_counter()
    progress = Progress(len(names), "replaying strategies")
    try:
        result = simulate(workload, names, settings, tick=progress.update)
    finally:
        progress.close()
    elapsed = time.perf_counter() - started
    rows = [(r.strategy, r) for r in result.strategies]
    if args.plot:
        plot(rows, args.plot, context_window=settings.context_window, title=format_header(result))
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
    chat_format = workload.parameters.get("format")
    base = _settings(args, overrides, chat_format)
    check_strategies(names, base.config)
    baseline: StrategyResult | None = None
    runs: list[dict[str, Any]] = []
    rows: list[tuple[str, StrategyResult]] = []
    for value in values:
        if key in PEER_KEYS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UsageError(f"--sweep {key}: {value!r} is not a count")
            change: dict[str, Any] = {key: value}
            try:
                peers = dataclasses.replace(base.peers, **change)
            except ValueError as exc:
                raise UsageError(f"--sweep {key}={value}: {exc}") from exc
            settings = dataclasses.replace(base, peers=peers)
        else:
            settings = _settings(args, {**overrides, key: value}, chat_format)
        if baseline is None:
            baseline = run_strategy(workload, "none", settings, keep_series=False)
        result: Simulation = simulate(workload, names, settings, baseline=baseline)
        runs.append({"value": value, "simulation": result})
        for r in result.strategies:
            label = f"{key}={value}" if len(names) == 1 else f"{key}={value} {r.strategy}"
            rows.append((label, r))
    failed = any(r.failed for _, r in rows)
    if args.plot:
        first, _, rest = format_header(runs[0]["simulation"], exclude=key).partition("\n")
        plot(
            rows,
            args.plot,
            context_window=base.context_window,
            title=f"sweep of {key}: {first}\n{rest}",
            highlight_default=False,
        )
    if args.json:
        text = encode_json(
            {"sweep": {"key": key, "values": values}, "runs": runs}, per_round=args.per_round
        )
    else:
        header = format_header(runs[0]["simulation"], exclude=key)
        text = (
            f"{header}\nsweep of {key} over {', '.join(printable(str(v)) for v in values)}"
            f"\n\n{format_table(rows)}\n"
        )
    return (1 if failed and args.strict else 0), text


def _runs(args: argparse.Namespace, overrides: dict[str, Any]) -> tuple[int, str]:
    settings = _settings(args, overrides)
    names = _names(args, DEFAULT_STRATEGIES)
    if "none" not in names:
        names = ["none", *names]
    if args.origins and args.origins not in names:
        raise UsageError(f"--origins {args.origins}: not among the strategies replayed")
    origins = Origins(args.origins) if args.origins else None
    # Every line checked before the replay; a pipe is read once, its count unknown.
    progress = Progress(count_runs(args.runs), "replaying runs")
    try:
        rows = replay_runs(
            args.runs, names, settings, args.pricing, tick=progress.update, origins=origins
        )
    finally:
        progress.close()
    failed = any(f["failed"] for row in rows for n, f in row.strategies.items() if n != "none")
    summary = aggregate(rows, names)
    if args.plot:  # the cost/harm plot: bill against hidden facts, all runs and long runs
        from .harm_plot import harm_points, plot_harm

        name = printable(os.path.basename(args.runs))  # a title's text must encode
        title = f"{name}: {len(rows)} runs, pricing {args.pricing}"
        plot_harm(harm_points(summary), args.plot, title)
    if args.json:
        data = {
            "runs": rows,
            "aggregate": summary,
            "model": describe_model(settings),
        }
        if origins is not None:
            data["origins"] = {
                "strategy": origins.strategy,
                "needed": origins.needed,
                "hidden": origins.hidden,
            }
        text = encode_json(data)
    else:
        text = f"runs {printable(args.runs)}: {len(rows)} runs, pricing {args.pricing}\n\n"
        text += format_runs(rows, names) + "\n"
        if origins is not None:
            text += "\n" + format_origins(origins) + "\n"
    return (1 if failed and args.strict else 0), text


def _check_plot_path(path: str) -> None:
    """Refuse, before the replay, a ``--plot`` file that could not be written after it.

    Raises:
        UsageError: the name is empty.
        OSError: it is a directory, or its directory is missing or not writable.
    """
    if not path:
        raise UsageError("--plot needs a file name")
    if os.path.isdir(path):
        raise OSError(f"--plot {path}: it is a directory, not a file")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise OSError(f"--plot {path}: no directory {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OSError(f"--plot {path}: not writable")


def _fail(exc: BaseException, code: int) -> int:
    """One line on stderr, escaped: a file name holds what its maker chose."""
    print(f"scoutd simulate: {printable(str(exc))}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``scoutd simulate`` with ``argv`` (without the program name)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.plot is not None:  # before a replay that may take minutes
            require_matplotlib()
            _check_plot_path(args.plot)
        overrides = dict(_pair(item, "--set") for item in args.set)
        overrides = {key: _value(value) for key, value in overrides.items()}
        if args.sweep and args.runs:
            raise UsageError("--sweep and --runs cannot be combined")
        if args.origins and not args.runs:
            raise UsageError("--origins needs --runs")
        if args.runs:
            code, text = _runs(args, overrides)
        elif args.sweep:
            code, text = _sweep(args, overrides)
        else:
            code, text = _single(args, overrides)
    except (UsageError, UnknownStrategy, ExcludedStrategy, ConfigError) as exc:
        return _fail(exc, 2)
    except (ChatError, PlotUnavailable, ScoutdError, OSError, TokenizerFailed) as exc:
        return _fail(exc, 1)
    except MemoryError:  # a chat or run whose decoded JSON does not fit (some 40 times its bytes)
        return _fail(RuntimeError("not enough memory for this replay"), 1)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if code:
        print(
            "scoutd simulate: a strategy overflowed the context window (--strict)", file=sys.stderr
        )
    return code
