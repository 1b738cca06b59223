"""The options of ``scoutd simulate`` (its argument parser)."""

from __future__ import annotations

import argparse

from ..cli.arg_types import integer, real
from ..formats import FORMATS
from ..pricing import AUTO
from .cache import CACHE_MODELS, PRESETS
from .replay import DEFAULT_STRATEGIES, DEFAULT_STRATEGY

__all__ = ["DEFAULT_CALLS", "build_parser"]

DEFAULT_CALLS = 400


_count = integer(0)
_positive = integer(1)
# an infinite price or gap makes every figure NaN; a lifetime may never end
_price = real(0.0)
_lifetime = real(0.0, infinite=True)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``scoutd simulate``."""
    parser = argparse.ArgumentParser(
        prog="scoutd simulate",
        description=(
            "Replay an agent run round by round (a round ends after each tool output) under "
            "several prompt strategies and compare prompt size, prompt-cache hits and billed "
            "input cost."
        ),
        epilog=(
            "examples:\n"
            "  scoutd simulate --calls 200\n"
            "  scoutd simulate --chat examples/recorded_run.json --strategies none,shorten_tools\n"
            "  scoutd simulate --chat examples/chats/anthropic.json --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    work = parser.add_argument_group("workload")
    source = work.add_mutually_exclusive_group()
    source.add_argument(
        "--calls", type=_count, help=f"synthetic run of N tool calls (default {DEFAULT_CALLS})"
    )
    source.add_argument(
        "--chat", metavar="FILE", help="replay a recorded chat (JSON list of messages; - for stdin)"
    )
    source.add_argument(
        "--runs",
        metavar="FILE.jsonl[.gz]",
        help="replay every run of a file (one JSON object a line with a 'messages' list): "
        "per-run rows and an aggregate by length",
    )
    work.add_argument(
        "--format",
        choices=("auto", *FORMATS),
        default="auto",
        help="message format of --chat (default: detected; see docs/FORMATS.md)",
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
        help="run once per value of a [prompt] key, or of a peer setting: mask_n, mask_polling, "
        "clear_trigger, clear_keep, clear_at_least, summary_max_size, summary_keep_first or "
        "summary_chars",
    )

    model = parser.add_argument_group("cache and prices")
    model.add_argument(
        "--pricing",
        choices=[AUTO, *sorted(PRESETS)],
        default=AUTO,
        help="preset of prices and cache behaviour (default auto: each run's provider, by its "
        "format; anthropic for scoutd's own messages)",
    )
    model.add_argument("--price-input", type=_price, help="price of an uncached input token")
    model.add_argument("--price-write", type=_price, help="price of a token written to the cache")
    model.add_argument("--price-read", type=_price, help="price of a token read from the cache")
    model.add_argument(
        "--price-output", type=_price, help="price of a generated token (a summariser's summary)"
    )
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
        "--ttl", type=_lifetime, help="cache lifetime in seconds (default: the preset's)"
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
        help="write prompt tokens and cumulative cost per round; with --runs, each"
        " strategy's mean bill against its hidden-fact rate (needs scoutd[plot])",
    )
    out.add_argument(
        "--origins",
        nargs="?",
        const=DEFAULT_STRATEGY,
        metavar="STRATEGY",
        help="with --runs: where the facts the strategy hides come from, by tool, age and "
        "fact kind (default: the default strategy)",
    )
    out.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any strategy overflows the context window",
    )
    return parser
