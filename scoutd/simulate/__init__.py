"""``scoutd simulate``: a cache-priced replay of agent runs.

Replays a conversation (a seeded synthetic agent run, or a recorded chat)
round by round under several prompt strategies — scoutd's own, any
registered or plugin strategy, and emulations of the strategies peers use —
and measures per round and in total the prompt size, the tokens a provider's
prefix cache would serve, the billed input cost, cache breaks, context-window
overflows, how much of the tool output stays verbatim, and how many of the
facts the agent next copies from tool outputs each prompt hides
(:mod:`.facts`). See docs/ECONOMY.md.
"""

from __future__ import annotations

from .cache import PRESETS, CacheModel, CacheSettings, Estimator, Prices, RoundCost, segment_text
from .cli import main
from .facts import FactTally, RunFacts
from .origins import Origins
from .peers import CLEARED_PLACEHOLDER, MASK_PLACEHOLDER, Cleared, clear_tool_uses, mask_last_n
from .replay import (
    DEFAULT_STRATEGIES,
    PEERS,
    PeerSettings,
    Retention,
    Settings,
    Simulation,
    StrategyResult,
    prepared_rounds,
    run_strategy,
    simulate,
)
from .workload import Workload, load_chat, round_ends, synthetic_run

__all__ = [
    # command line
    "main",
    # replay
    "DEFAULT_STRATEGIES",
    "PEERS",
    "PeerSettings",
    "Retention",
    "Settings",
    "Simulation",
    "StrategyResult",
    "prepared_rounds",
    "run_strategy",
    "simulate",
    # the hidden-fact measure
    "FactTally",
    "Origins",
    "RunFacts",
    # workloads
    "Workload",
    "load_chat",
    "round_ends",
    "synthetic_run",
    # cache and prices
    "PRESETS",
    "CacheModel",
    "CacheSettings",
    "Estimator",
    "Prices",
    "RoundCost",
    "segment_text",
    # peer emulations
    "CLEARED_PLACEHOLDER",
    "MASK_PLACEHOLDER",
    "Cleared",
    "clear_tool_uses",
    "mask_last_n",
]
