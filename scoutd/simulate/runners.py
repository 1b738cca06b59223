"""How each compared strategy prepares a round's prompt, and the peers' settings.

scoutd's strategies run in an in-process :class:`scoutd.Session` with one
configuration snapshot, as an agent that keeps its session from round to
round (each round equals :func:`scoutd.prepare` over the same prefix, and
costs only what is new); the peer emulations of :mod:`.peers` run with the
state a real deployment carries from request to request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine.session import Session
from ..formats import SCOUT
from .cache import Estimator, Prices
from .peers import PeerMemo, SummaryState, clear_tool_uses, mask_last_n, summarize

__all__ = [
    "EXCLUDED",
    "PEERS",
    "ExcludedStrategy",
    "PeerSettings",
    "Runner",
    "make_runner",
    "SummarizeRunner",
    "scoutd_runner",
    "side_cost",
]

PEERS = ("mask_last_n", "clear_tool_uses", "summarize")
# `inbox` delivers files and consumes them: it is no context strategy to compare.
EXCLUDED = frozenset({"inbox"})
CLEAR_MODES = ("stateless", "sticky")

Runner = Callable[[list[Any]], list[Any]]


class ExcludedStrategy(ValueError):
    """A strategy that exists but is not part of the comparison (``inbox``)."""


@dataclass(frozen=True, slots=True)
class PeerSettings:
    """Parameters of the peer emulations, at their published defaults."""

    mask_n: int = 10  # SWE-agent's observation masking window
    mask_polling: int = 1  # SWE-agent's `polling`: move the window every N outputs
    clear_trigger: int = 100_000  # Anthropic's default trigger, in input tokens
    clear_keep: int = 3  # Anthropic's default: the last 3 tool uses stay
    clear_at_least: int = 0  # 0: unset (clear every eligible result)
    # stateless: the client sends the whole history and the API clears it again
    # on every request; sticky: the client keeps the cleared history.
    clear_mode: str = "stateless"
    summary_max_size: int = 120  # OpenHands' condenser: events before a summary
    summary_keep_first: int = 4
    summary_chars: int = 2000  # size of the placeholder summary

    def __post_init__(self) -> None:
        if self.clear_mode not in CLEAR_MODES:
            raise ValueError(f"clear mode must be one of {', '.join(CLEAR_MODES)}")
        if self.mask_polling < 1 or self.summary_max_size < 1:
            raise ValueError("mask polling and summary max size must be >= 1")


def make_runner(
    name: str,
    peers: PeerSettings,
    estimator: Estimator | None = None,
    prepare_one: Runner | None = None,
) -> Runner:
    """A callable that prepares the prompt for a prefix, in round order.

    Peer runners keep state between calls (cleared results, the summary's
    cut), so they must see the prefixes of one conversation in order.
    ``prepare_one`` runs any other strategy.
    """
    if name == "mask_last_n":
        memo = PeerMemo()
        return lambda prefix: mask_last_n(
            prefix, peers.mask_n, polling=peers.mask_polling, memo=memo
        )
    if name == "clear_tool_uses":
        return _clearing(peers, estimator or Estimator())
    if name == "summarize":
        return SummarizeRunner(peers)
    if name in EXCLUDED:
        raise ExcludedStrategy(f"{name!r} is not part of the comparison")
    if prepare_one is None:
        raise ValueError(f"no runner for {name!r}")
    return prepare_one


class SummarizeRunner:
    """The summarising peer; it also reports what its own summariser calls read."""

    def __init__(self, peers: PeerSettings) -> None:
        self.peers = peers
        self.state = SummaryState()

    def __call__(self, prefix: list[Any]) -> list[Any]:
        peers = self.peers
        return summarize(
            prefix,
            self.state,
            max_size=peers.summary_max_size,
            keep_first=peers.summary_keep_first,
            summary_chars=peers.summary_chars,
        )

    def take_unbilled_chars(self) -> tuple[int, int]:
        """Characters the summariser read and wrote since the last call."""
        return self.state.take_unbilled_chars()


def side_cost(runner: Runner, prices: Prices, chars_per_token: float) -> float:
    """The cost of a runner's own model calls this round: the summariser's calls.

    What it reads is billed as uncached input (a new batch of forgotten
    messages each time), the summary it writes at the output price.
    """
    take = getattr(runner, "take_unbilled_chars", None)
    if take is None:
        return 0.0
    read: int
    written: int
    read, written = take()
    return (read * prices.input + written * prices.output) / chars_per_token


def _clearing(peers: PeerSettings, estimator: Estimator) -> Runner:
    memo = PeerMemo()
    state = [frozenset[int]()]
    sticky = peers.clear_mode == "sticky"

    def clearing(prefix: list[Any]) -> list[Any]:
        result = clear_tool_uses(
            prefix,
            trigger=peers.clear_trigger,
            keep=peers.clear_keep,
            clear_at_least=peers.clear_at_least,
            cleared=state[0] if sticky else frozenset(),
            estimator=estimator,
            memo=memo,
        )
        state[0] = result.cleared
        return result.messages

    return clearing


def scoutd_runner(name: str, config: Any) -> Runner:
    """A runner of a scoutd, registered or plugin strategy with one config snapshot.

    The runner keeps one session: give it the rounds of one conversation in
    order (another list is recognised as such and prepared whole). It prepares
    scoutd's roles (a synthetic run, a run in scoutd's roles, a chat's scout
    view), named as such: the view of a Responses chat keeps its ``message`` and
    ``reasoning`` items as they are, which format detection would take for a mix.
    """
    session = Session(strategies=[name], config=config, format=SCOUT)
    return lambda prefix: session.prepare_prompt(prefix)
