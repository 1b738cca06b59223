"""Real recorded agent runs replayed at their model calls through every strategy.

The OpenAI Chat runs are replayed in all three provider formats (the Anthropic
and Responses forms derived in test code), the Anthropic sessions as they are.
At sampled model calls (the last one and evenly spread consecutive pairs) each
prepared prompt must be a valid request with no problem its input lacked, keep
the newest 5 tool outputs verbatim, leave the input untouched, and inside an
epoch keep the prefix it reported stable. The runs are the full set where it
is (``$SCOUTD_REAL_DIR``, else ``../shared/real/`` beside the repository),
else the subset the repository ships (tests/support/real_runs.py).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import msgspec
import pytest

from scoutd import prepare
from scoutd.config import PromptConfig
from scoutd.formats import adapter, openai_chat, scout_view
from scoutd.formats.texts import ConversationTexts
from scoutd.formats.view import PASSTHROUGH, VIEW_KEY
from scoutd.strategies.epoch import (
    fixed_window,
    increment_window,
    repeat_numbers,
)
from scoutd.strategies.tool_messages import ToolBody, index_tools, repeated_pairs
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.real_runs import full_dir, real_dir

from .validity import new_problems

REAL_DIR = real_dir()
STRATEGIES = ("none", "shorten_tools", "shorten_tools_epoch", "shorten_tools_epoch_increment")
FORMATS = ("openai-chat", "openai-responses", "anthropic")
PAIRS = 3  # consecutive call pairs sampled per conversation
NEWEST = 5
_encode = msgspec.json.encode


def _read(name: str) -> list[dict[str, Any]]:
    with gzip.open(REAL_DIR / name, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@cache
def conversations(fmt: str) -> list[tuple[str, list[Any]]]:
    """Every real conversation available in ``fmt``: (label, messages)."""
    derive = {
        "openai-chat": lambda m: m,
        "openai-responses": to_responses,
        "anthropic": to_anthropic,
    }
    found = [(run["instance"], derive[fmt](run["messages"])) for run in _read("runs.jsonl.gz")]
    if fmt == "anthropic":
        found += [
            (str(s["source"].get("path", "session")), s["messages"])
            for s in _read("anthropic.jsonl.gz")
        ]
    return found


def _starts_turn(fmt: str, item: Any, previous: Any) -> bool:
    if fmt != "openai-responses":
        return bool(item.get("role") == "assistant")
    in_turn = ("function_call", "reasoning")
    starts = item.get("type") in in_turn or item.get("role") == "assistant"
    continues = previous.get("type") in in_turn or previous.get("role") == "assistant"
    return starts and not continues


def call_points(fmt: str, messages: list[Any]) -> list[int]:
    """Lengths of the prompts at each model call: the messages before each model turn."""
    return [i for i in range(1, len(messages)) if _starts_turn(fmt, messages[i], messages[i - 1])]


def sampled(points: list[int]) -> list[tuple[int, int | None]]:
    """(call, next call or None): evenly spread consecutive pairs, and the last call."""
    if len(points) < 2:
        return [(p, None) for p in points]
    step = max((len(points) - 1) // PAIRS, 1)
    chosen = [(points[i], points[i + 1]) for i in range(0, len(points) - 1, step)][:PAIRS]
    return [*chosen, (points[-1], None)]


def output_units(fmt: str, messages: list[Any]) -> list[Any]:
    """Every tool output object of a conversation, oldest first."""
    if fmt == "openai-chat":
        return [m for m in messages if m.get("role") == "tool"]
    if fmt == "openai-responses":
        return [m for m in messages if m.get("type") == "function_call_output"]
    return [
        block
        for m in messages
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]


def _pinned(strategy: str, messages: list[Any], fmt: str, config: PromptConfig) -> int:
    """Where the epoch of ``messages`` starts (-1 before the first one)."""
    index = index_tools(scout_view(messages, fmt))
    if strategy == "shorten_tools_epoch":
        window = fixed_window(index.outputs, config)
    else:
        window = increment_window(index.outputs, repeat_numbers(repeated_pairs(index)), config)
    return -1 if window is None else window.pinned


def replay(fmt: str, strategy: str) -> Iterator[str]:
    """Check every sampled call; yield a description of each failure."""
    config = PromptConfig()
    for label, messages in conversations(fmt):
        for length, following in sampled(call_points(fmt, messages)):
            given = messages[:length]
            before = _encode(given)
            prepared = prepare(given, strategy, format=fmt)
            where = f"{label} at {length} ({fmt}, {strategy})"
            if _encode(given) != before:
                yield f"{where}: the input was modified"
            if prepared.format != fmt:
                yield f"{where}: format {prepared.format}"
            problems = new_problems(fmt, given, prepared.messages)
            if problems:
                yield f"{where}: new problems {dict(problems)}"
            newest = output_units(fmt, given)[-NEWEST:]
            kept = {id(unit) for unit in output_units(fmt, prepared.messages)}
            if not all(id(unit) in kept for unit in newest):
                yield f"{where}: a newest output is not verbatim"
            if strategy == "none" and (
                prepared.messages != given
                or any(a is not b for a, b in zip(prepared.messages, given, strict=True))
            ):
                yield f"{where}: none changed the prompt"
            if following is None or strategy not in (
                "shorten_tools_epoch",
                "shorten_tools_epoch_increment",
            ):
                continue
            later = messages[:following]
            if _pinned(strategy, given, fmt, config) != _pinned(strategy, later, fmt, config):
                continue  # an epoch boundary: the prompt may change anywhere
            next_prompt = prepare(later, strategy, format=fmt).messages
            stable = prepared.stable_prefix
            if next_prompt[:stable] != prepared.messages[:stable]:
                yield f"{where}: the reported stable prefix ({stable}) changed by the next call"
            if next_prompt[: len(prepared.messages)] != prepared.messages:
                yield f"{where}: inside an epoch the next prompt did not only grow at its end"


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_real_runs_replay(fmt: str, strategy: str) -> None:
    failures = list(replay(fmt, strategy))
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("fmt", FORMATS)
def test_long_runs_are_shortened(fmt: str) -> None:
    long_runs = [
        (label, messages)
        for label, messages in conversations(fmt)
        if len(output_units(fmt, messages)) >= 100
    ]
    assert long_runs, "the real data has runs of 100 or more tool outputs"
    for label, messages in long_runs:
        prepared = prepare(messages, "shorten_tools_epoch", format=fmt)
        assert len(_encode(prepared.messages)) < len(_encode(messages)), label


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_view_message_the_adapter_made_carries_its_index(fmt: str) -> None:
    """Results are matched with the view by these marks (docs/FORMATS.md)."""
    for _, messages in conversations(fmt):
        view = adapter(fmt).view(messages, True)  # type: ignore[union-attr]
        for index, (message, ref) in enumerate(zip(view.messages, view.refs, strict=True)):
            if ref != PASSTHROUGH:
                assert message[VIEW_KEY] == index


def test_the_bodies_handed_to_the_strategies_are_those_their_texts_parse_to() -> None:
    """The OpenAI Chat view hands over what parsing its texts gives (docs/PERFORMANCE.md)."""
    handed = 0
    for _, messages in conversations("openai-chat"):
        kept = ConversationTexts()
        prepare(messages, "shorten_tools", texts=kept)  # parses the texts once, keeps the bodies
        view = openai_chat.view(messages, True, kept)
        for key, (text, body) in view.bodies.items():
            assert key == id(text) and body == msgspec.json.decode(text, type=ToolBody)
        handed += sum(id(m["content"]) in view.bodies for m in view.messages if "content" in m)
    assert handed > (1000 if full_dir() is not None else 500)  # the shipped subset: 736
