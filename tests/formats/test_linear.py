"""Every format path is linear: four times the conversation, about four times the work.

The work is counted, not timed: lines of scoutd's own code run for one call
(:func:`tests.formats.work.lines_run`), for conversations built to be costly
(:mod:`scoutd.testing.worst`). A quadratic path runs about sixteen times the
lines for four times the input; the bound below allows a linear path its
start-up costs and nothing near that (docs/RELIABILITY.md, "CPU and memory,
per request, per uid, per daemon").
"""

from __future__ import annotations

from typing import Any

import pytest

from scoutd import PromptConfig, prepare
from scoutd.config import Config
from scoutd.engine.incremental import SessionPrompt
from scoutd.testing import worst
from scoutd.testing.worst import WORST, Builder

from .conversations import epoch_window
from .work import growth, lines_run

# Four times the input may cost at most this much more than four times the work.
LINEAR = 1.35
SIZE = 200  # turns (or calls of one turn) of the smaller conversation
# Each strategy with a configuration that makes it drop and shorten most pairs.
COMPACTING: dict[str, PromptConfig] = {
    "shorten_tools_cost_aware": PromptConfig(context_window=2000),
    "shorten_tools_epoch": epoch_window(3),
    "shorten_tools": PromptConfig(max_tool_calls=4, full_tool_outputs=2),
    "shorten_tools_epoch_increment": epoch_window(3),
}
CASES = [
    pytest.param(fmt, builder, name, id=f"{builder.__name__}-{name}")
    for fmt, builders in WORST.items()
    for builder in builders
    for name in COMPACTING
    if name != "shorten_tools_epoch_increment"  # its walks are those of shorten_tools_epoch
]


def _prepare_work(fmt: str, builder: Builder, name: str) -> Any:
    def work(n: int) -> int:
        messages = builder(n)
        # a conversation seen for the first time (no texts kept): every text made
        config = COMPACTING[name]
        return lines_run(lambda: prepare(messages, name, config=config, format=fmt))

    return work


@pytest.mark.parametrize(("fmt", "builder", "name"), CASES)
def test_a_prepare_is_linear_in_the_conversation(fmt: str, builder: Builder, name: str) -> None:
    assert growth(_prepare_work(fmt, builder, name), SIZE) <= LINEAR


# The strategies a session computes round by round (any other is a whole prepare, above).
INCREMENTAL = ("shorten_tools_cost_aware", "shorten_tools_epoch")
SESSION_CASES = [
    pytest.param(fmt, builder, name, id=f"{builder.__name__}-{name}")
    for fmt, builders in WORST.items()
    for builder in builders[: 2 if fmt == "anthropic" else 1]
    for name in INCREMENTAL
] + [
    pytest.param("scout", builder, "shorten_tools_epoch_increment", id=builder.__name__)
    for builder in (worst.scout_repeats, worst.scout_repeats_answered_backwards)
]
ROUNDS = 10  # rounds counted, each appending one turn


@pytest.mark.parametrize(("fmt", "builder", "name"), SESSION_CASES)
def test_a_session_round_costs_at_most_linear_in_what_it_holds(
    fmt: str, builder: Builder, name: str
) -> None:
    """A round may re-walk the conversation it holds (an epoch moving, a strategy
    without an incremental form), but never more than linearly."""
    config = Config(prompt=COMPACTING[name])

    def work(n: int) -> int:
        whole = builder(n + ROUNDS)
        size = len(whole) // (n + ROUNDS)  # messages a turn adds
        start = len(whole) - ROUNDS * size
        session = SessionPrompt(format=fmt)
        session.extend(whole[:start])
        session.prepare(name, config)

        def rounds() -> None:
            for at in range(start, len(whole), size):
                session.extend(whole[at : at + size])
                session.prepare(name, config)

        return lines_run(rounds)

    assert growth(work, SIZE) <= LINEAR


@pytest.mark.parametrize("builder", [worst.scout_repeats, worst.scout_repeats_answered_backwards])
def test_a_session_counts_repeats_as_a_whole_prepare_does(builder: Builder) -> None:
    """Repeats completed in any order (the newest call answered first) place the
    increment window where a whole prepare places it."""
    config = Config(prompt=epoch_window(3))
    messages = builder(60)
    session = SessionPrompt(format="scout")
    for at in range(0, len(messages), 7):
        session.extend(messages[at : at + 7])
        prepared, _ = session.prepare("shorten_tools_epoch_increment", config)
        whole = prepare(messages[: at + 7], "shorten_tools_epoch_increment", config=config)
        assert prepared.messages == whole.messages


def test_a_result_holding_one_message_many_times_is_read_in_linear_time() -> None:
    """A strategy (a plugin) may return a message it was given more often than
    it was given: finding each copy's place must not scan the conversation."""
    shared = {"role": "user", "content": "again"}

    def work(n: int) -> int:
        messages = [shared, *WORST["openai-chat"][0](n)]

        def repeat_the_first(view: list[Any]) -> list[Any]:
            return [view[0]] * n + view

        return lines_run(lambda: prepare(messages, repeat_the_first, format="openai-chat"))

    assert growth(work, SIZE) <= LINEAR
