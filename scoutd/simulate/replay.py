"""Replay a conversation round by round under each strategy and measure it.

A round ends after each tool output: the strategy prepares the prompt for the
prefix so far (scoutd's strategies through :func:`scoutd.engine.prepare.prepare`
with one configuration snapshot for the whole run, never with a save file;
the peer emulations from :mod:`.peers`), the prompt goes through the cache
model, and retention is counted against the original conversation.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..config import DEFAULT_STRATEGIES as CONFIGURED_DEFAULT
from ..config import Config, with_overrides
from ..engine.prepare import available_strategies
from ..errors import UnknownStrategy
from ..formats import SCOUT
from ..pricing import AUTO, PRICE_PRESETS
from .cache import CacheModel, CacheSettings, Estimator, Prices, billed_message, segment_text
from .facts import FactTally, Hidden, RunFacts
from .peers import OUTPUT, output_data, role_of
from .runners import (
    EXCLUDED,
    PEERS,
    ExcludedStrategy,
    PeerSettings,
    Runner,
    make_runner,
    scoutd_runner,
    side_cost,
)
from .workload import Workload, round_ends

__all__ = [
    "DEFAULT_STRATEGIES",
    "DEFAULT_STRATEGY",
    "provider_config",
    "PEERS",
    "ExcludedStrategy",
    "RECENT_OUTPUTS",
    "PeerSettings",
    "Retention",
    "Series",
    "Settings",
    "Simulation",
    "StrategyResult",
    "check_strategies",
    "strategy_runner",
    "prepared_rounds",
    "run_facts",
    "run_strategy",
    "simulate",
]

# The strategy of scoutd's default list (the first one; the second is `inbox`).
DEFAULT_STRATEGY = CONFIGURED_DEFAULT[0]
# What `scoutd simulate` compares when not told: the tables of docs/ECONOMY.md.
# `shorten_tools` alone is left out: it never drops a call, so a long run
# overflows the window with it (name it with --strategies to see it fail).
DEFAULT_STRATEGIES = (
    "none",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools_cost_aware",
    *PEERS,
)
# A tool output whose JSON text is this short is left as it is by shortening.
SHORT_OUTPUT = 400 + 60
# Retention looks at the outputs an agent is most likely to still need.
RECENT_OUTPUTS = 20


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything about a run except the workload and the strategy list."""

    prices: Prices = field(default_factory=Prices)
    cache: CacheSettings = field(default_factory=CacheSettings)
    pricing: str = "anthropic"
    context_window: int = 200_000
    peers: PeerSettings = field(default_factory=PeerSettings)
    estimator: Estimator = field(default_factory=Estimator)
    config: Config = field(default_factory=Config)
    overrides: dict[str, Any] = field(default_factory=dict)
    round_seconds: float = 0.0  # time between two rounds, for the cache lifetime


class Retention(msgspec.Struct, kw_only=True):
    """What the prompts kept of the original tool outputs.

    ``recent_verbatim`` is the mean, over rounds, of the share of the last 20
    tool outputs (fewer early on) that appear verbatim in the prompt. The
    counts describe the last round: of all ``outputs``, how many appear
    ``verbatim``, ``truncated`` (present with a rewritten content: shortened
    or replaced by a placeholder) or ``dropped`` (absent). The last round is
    one sample of a count that rises and falls as a strategy compacts, so
    ``mean_verbatim`` gives the verbatim count (same rule) averaged over every
    round.
    """

    recent_verbatim: float
    outputs: int
    verbatim: int
    truncated: int
    dropped: int
    mean_verbatim: float = 0.0


class Series(msgspec.Struct, kw_only=True):
    """Per-round figures, in round order."""

    prompt_tokens: list[int]
    cached_tokens: list[int]
    cost: list[float]


class StrategyResult(msgspec.Struct, kw_only=True):
    """Totals of one strategy over the whole replay.

    ``billed`` is in units of one uncached input token; ``ratio`` is billed
    over the ``none`` run's billed; ``failed`` is true when any round's prompt
    exceeded the context window.
    """

    strategy: str
    billed: float
    ratio: float | None
    cache_read_share: float
    cache_breaks: int
    peak_prompt_tokens: int
    overflow_rounds: int
    failed: bool
    first_overflow_round: int | None
    retention: Retention
    rounds: int
    prompt_tokens: int
    cached_tokens: int
    written_tokens: int
    input_tokens: int
    invalidated_tokens: int
    default: bool = False  # the strategy of scoutd's default list
    series: Series | None = None
    facts: FactTally | None = None  # the hidden-fact measure (docs/ECONOMY.md)


class Simulation(msgspec.Struct, kw_only=True):
    """The outcome of one replay of one workload under several strategies."""

    workload: dict[str, Any]
    model: dict[str, Any]
    baseline_billed: float
    strategies: list[StrategyResult]


def check_strategies(names: Sequence[str], config: Config) -> None:
    """Raise for a name the simulator cannot run, before any replay starts.

    Raises:
        ExcludedStrategy: ``inbox`` (it consumes files; the simulator never
            passes a save file, so it would do nothing anyway).
        UnknownStrategy: any other name that is not known.
    """
    known = (set(available_strategies(config)) - EXCLUDED) | set(PEERS)
    for name in names:
        if name in EXCLUDED:
            raise ExcludedStrategy(
                f"{name!r} delivers operator notices from files: it is not part of the "
                "comparison (the replay never passes a save file)"
            )
        if name not in known:
            raise UnknownStrategy(name, sorted(known))


def provider_config(config: Config, pricing: str) -> Config:
    """``config`` with ``cache_pricing`` set to the simulated provider, unless set.

    In a deployment ``auto`` follows the conversation's format; a replay
    knows its provider from the price preset.
    """
    if config.prompt.cache_pricing != AUTO or pricing not in PRICE_PRESETS:
        return config
    return with_overrides(config, {"cache_pricing": pricing})


def strategy_runner(name: str, settings: Settings) -> Runner:
    """The runner of one compared strategy under ``settings``."""
    return make_runner(
        name, settings.peers, settings.estimator, scoutd_runner(name, settings.config)
    )


def prepared_rounds(
    messages: Sequence[Any], name: str, settings: Settings
) -> Iterator[tuple[int, list[Any]]]:
    """``(prefix length, prepared prompt)`` for every round of ``messages``."""
    runner = strategy_runner(name, settings)
    conversation = list(messages)
    for end in round_ends(conversation):
        yield end, runner(conversation[:end])


class _Originals:
    """The usable tool outputs of the original conversation, for retention."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self.positions: list[int] = []
        self.contents: list[str] = []
        self.by_id: dict[Any, list[int]] = {}
        for position, message in enumerate(messages):
            data = output_data(message)
            if data is None:
                continue
            ident = data.get("id")
            if isinstance(ident, (str, int, float, bool)):
                self.by_id.setdefault(ident, []).append(len(self.contents))
            self.positions.append(position)
            self.contents.append(message["content"])
        self.content_set = set(self.contents)
        self._idents: dict[str, Any] = {}  # the id of each rewritten output content seen

    def count_before(self, end: int) -> int:
        return bisect.bisect_left(self.positions, end)

    @staticmethod
    def present(prepared: Sequence[Any]) -> set[str]:
        found = set()
        for message in prepared:
            if role_of(message) == OUTPUT:
                content = message.get("content")
                if type(content) is str:
                    found.add(content)
        return found

    def recent_verbatim(self, upto: int, present: set[str]) -> float | None:
        recent = self.contents[max(0, upto - RECENT_OUTPUTS) : upto]
        if not recent:
            return None
        return sum(1 for content in recent if content in present) / len(recent)

    def final(self, upto: int, prepared: Sequence[Any], present: set[str]) -> tuple[int, int]:
        """``(verbatim, truncated)`` among the first ``upto`` outputs.

        An output present with a rewritten content is truncated. A short output
        between the oldest and the newest rewritten one is inside the shortened
        band: shortening left it as it was, so it counts as truncated too.
        """
        verbatim = {n for n in range(upto) if self.contents[n] in present}
        truncated: set[int] = set()
        for message in prepared:
            if role_of(message) != OUTPUT:
                continue
            content = message.get("content")
            if type(content) is not str or content in self.content_set:
                continue
            ident = self._ident(content)
            if ident is None:
                continue
            for number in self.by_id.get(ident, ()):
                if number < upto and number not in verbatim:
                    truncated.add(number)
                    break
        if truncated:
            low, high = min(truncated), max(truncated)
            inside = {
                n for n in verbatim if low < n < high and len(self.contents[n]) <= SHORT_OUTPUT
            }
            verbatim -= inside
            truncated |= inside
        return len(verbatim), len(truncated)

    def _ident(self, content: str) -> Any:
        """The id of a rewritten output (None if it has none), remembered across rounds."""
        if content in self._idents:
            return self._idents[content]
        try:
            data = msgspec.json.decode(content)
        except (msgspec.DecodeError, RecursionError):
            data = None
        ident = data.get("id") if isinstance(data, dict) else None
        if not isinstance(ident, (str, int, float, bool)):
            ident = None
        self._idents[content] = ident
        return ident


def run_facts(workload: Workload) -> RunFacts:
    """The hidden-fact index of a workload in scoutd's roles, at the replay's rounds."""
    return RunFacts(workload.messages, SCOUT, round_ends(workload.messages))


def run_strategy(
    workload: Workload,
    name: str,
    settings: Settings,
    *,
    keep_series: bool = True,
    facts: RunFacts | None = None,
    record: Callable[[Hidden], None] | None = None,
) -> StrategyResult:
    """Replay ``workload`` under one strategy and total the figures.

    With ``facts`` (the workload's index, :func:`run_facts`) the result also
    counts the needed facts each round's prompt hides, each given to ``record``.
    """
    messages = workload.messages
    calls = facts.calls_at() if facts is not None else {}
    tally = FactTally()
    originals = _Originals(messages)
    per_token = settings.estimator.chars_per_token
    texts = {id(message): media_segment(message, per_token) for message in messages}
    model = CacheModel(settings.prices, settings.cache, settings.estimator)
    runner = strategy_runner(name, settings)
    window = settings.context_window
    prompt_series: list[int] = []
    cached_series: list[int] = []
    cost_series: list[float] = []
    recent_shares: list[float] = []
    verbatim_series: list[int] = []
    billed = 0.0
    breaks = overflow = written = plain = invalidated = 0
    first_overflow: int | None = None
    prepared: list[Any] = []
    present: set[str] = set()
    ends = round_ends(messages)
    for number, end in enumerate(ends, start=1):
        prepared = runner(messages[:end])
        segments = [texts.get(id(m)) or media_segment(m, per_token) for m in prepared]
        outcome = model.step(segments, now=number * settings.round_seconds)
        billed += outcome.cost + side_cost(
            runner, settings.prices, settings.estimator.chars_per_token
        )
        breaks += outcome.cache_break
        written += outcome.written_tokens
        plain += outcome.input_tokens
        invalidated += outcome.invalidated_tokens
        if outcome.prompt_tokens > window:
            overflow += 1
            if first_overflow is None:
                first_overflow = number
        prompt_series.append(outcome.prompt_tokens)
        cached_series.append(outcome.cached_tokens)
        cost_series.append(outcome.cost)
        if end in calls and facts is not None:
            facts.tally_call(tally, calls[end], prepared, record)
        present = originals.present(prepared)
        share = originals.recent_verbatim(originals.count_before(end), present)
        if share is not None:
            recent_shares.append(share)
        verbatim_series.append(originals.final(originals.count_before(end), prepared, present)[0])
    upto = originals.count_before(ends[-1]) if ends else 0
    verbatim, truncated = originals.final(upto, prepared, present)
    total_prompt = sum(prompt_series)
    total_cached = sum(cached_series)
    return StrategyResult(
        strategy=name,
        billed=billed,
        ratio=None,
        cache_read_share=total_cached / total_prompt if total_prompt else 0.0,
        cache_breaks=breaks,
        peak_prompt_tokens=max(prompt_series, default=0),
        overflow_rounds=overflow,
        failed=overflow > 0,
        first_overflow_round=first_overflow,
        retention=Retention(
            recent_verbatim=sum(recent_shares) / len(recent_shares) if recent_shares else 1.0,
            outputs=upto,
            verbatim=verbatim,
            truncated=truncated,
            dropped=upto - verbatim - truncated,
            mean_verbatim=sum(verbatim_series) / len(verbatim_series) if verbatim_series else 0.0,
        ),
        rounds=len(ends),
        prompt_tokens=total_prompt,
        cached_tokens=total_cached,
        written_tokens=written,
        input_tokens=plain,
        invalidated_tokens=invalidated,
        facts=tally if facts is not None else None,
        series=Series(prompt_tokens=prompt_series, cached_tokens=cached_series, cost=cost_series)
        if keep_series
        else None,
    )


def media_segment(message: Any, chars_per_token: float) -> str:
    """A message's segment, its media billed as the provider bills them
    (:func:`.cache.billed_message`)."""
    return segment_text(billed_message(message, chars_per_token))


def describe_workload(workload: Workload) -> dict[str, Any]:
    """The workload's parameters and size, for the report."""
    messages = workload.messages
    chars = sum(len(segment_text(m)) for m in messages)
    return {
        "source": workload.source,
        **workload.parameters,
        "messages": len(messages),
        "rounds": len(round_ends(messages)),
        "tool_outputs": sum(1 for m in messages if output_data(m) is not None),
        "chars": chars,
    }


def describe_model(settings: Settings) -> dict[str, Any]:
    """The cache, price and strategy settings, for the report."""
    estimator = settings.estimator
    tokens = (
        f"characters / {estimator.chars_per_token:g}"
        if estimator.tokenizer is None
        else getattr(estimator.tokenizer, "__qualname__", "tokenizer")
    )
    return {
        "pricing": settings.pricing,
        "prices": dataclasses.asdict(settings.prices),
        "cache_model": settings.cache.model,
        "whole_messages": settings.cache.whole_messages,
        "cache_ttl": settings.cache.ttl,
        "round_seconds": settings.round_seconds,
        "cache_granularity": settings.cache.granularity,
        "cache_min_tokens": settings.cache.min_tokens,
        "context_window": settings.context_window,
        "tokens": tokens,
        "peers": dataclasses.asdict(settings.peers),
        "config_overrides": dict(settings.overrides),
    }


def simulate(
    workload: Workload,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    settings: Settings | None = None,
    *,
    keep_series: bool = True,
    baseline: StrategyResult | None = None,
    tick: Callable[[int], None] | None = None,
) -> Simulation:
    """Replay ``workload`` under each strategy; ratios are to the ``none`` run.

    ``none`` is replayed even when not listed (it is the baseline), unless a
    ``baseline`` result of the same workload and settings is given.

    Raises:
        UnknownStrategy: a name is neither a scoutd strategy, a registered or
            plugin strategy, nor a peer emulation (``inbox`` is excluded).
    """
    settings = settings or Settings()
    check_strategies(strategies, settings.config)
    results = []
    facts = run_facts(workload)
    for done, name in enumerate(strategies, start=1):
        results.append(run_strategy(workload, name, settings, keep_series=keep_series, facts=facts))
        results[-1].default = name == DEFAULT_STRATEGY
        if tick is not None:
            tick(done)
    reference = next((r for r in results if r.strategy == "none"), baseline)
    if reference is None:
        reference = run_strategy(workload, "none", settings, keep_series=False)
    for result in results:
        result.ratio = result.billed / reference.billed if reference.billed else None
    return Simulation(
        workload=describe_workload(workload),
        model=describe_model(settings),
        baseline_billed=reference.billed,
        strategies=results,
    )
