"""A session's round-by-round counts give every round what a whole prepare gives.

A session counts only what each round adds (:class:`~scoutd.strategies.cost_rounds.
GrowingTokens`) and replays only the new rounds. The oracle is :func:`scoutd.prepare`
of the same messages, afresh. The conversations here hold what the counts treat
apart: calls never answered, left waiting across rounds; several assistant remarks
in a row; call arguments long enough to be shortened; screenshots in tool results;
and a provider whose prices are not the default's.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import msgspec
import pytest

import scoutd
from scoutd.config import PromptConfig

from ..formats.conversations import anthropic, chat
from ..strategies.test_media_costs import png

# Small windows: compactions, some forced, within a few dozen rounds.
CONFIGS = [
    PromptConfig(context_window=8_000, compaction_trigger_share=0.2, cost_full_tool_outputs=3),
    PromptConfig(
        context_window=20_000,
        cost_full_tool_outputs=2,
        cost_compacted_tool_calls=3,
        cost_full_share=0.0,
        expected_horizon=3.0,
        compaction_risk_share=1.0,
        cost_keep_share=0.0,
    ),
]


def _tool(role: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": json.dumps(body)}


def scout_run(rng: random.Random, steps: int) -> tuple[list[dict[str, Any]], list[int]]:
    """A scout conversation and the ends of its rounds (where the agent prepares)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Fix the build."},
    ]
    ends = []
    for step in range(steps):
        shape = rng.randrange(6)
        ident = f"c{step}"
        if shape == 0:  # a call never answered, the round prepared with it waiting
            messages.append(_tool("function_call", {"name": "bash", "arguments": {}, "id": ident}))
        elif shape == 1:  # remarks in a row between tool messages
            for k in range(rng.randint(2, 3)):
                messages.append({"role": "assistant", "content": f"remark {step}.{k} " * 40})
            continue
        elif shape == 2:  # parallel calls, answered in another order
            idents = [f"{ident}_{k}" for k in range(rng.randint(2, 3))]
            for name in idents:
                call = {"name": "read", "arguments": {"path": f"{name}.py"}, "id": name}
                messages.append(_tool("function_call", call))
            for name in rng.sample(idents, len(idents)):
                body = {"name": "read", "content": "line\n" * rng.randint(20, 400), "id": name}
                messages.append(_tool("function_call_output", body))
        else:  # one pair; its call's arguments long now and then, a long string nested
            # or not (a nested one is sent whole, a top-level one shortened)
            written = "x = 1\n" * rng.choice((1, 1, 800))
            arguments: dict[str, Any] = {"path": f"{ident}.py", "text": written}
            if rng.random() < 0.3:
                arguments = {"path": f"{ident}.py", "edits": [{"old": "y", "new": written}]}
            call = {"name": "write", "arguments": arguments}
            messages.append(_tool("function_call", {**call, "id": ident}))
            body = {"name": "write", "content": "ok " * rng.randint(5, 600), "id": ident}
            messages.append(_tool("function_call_output", body))
        ends.append(len(messages))
    return messages, ends


def check_rounds(
    messages: list[Any], ends: list[int], config: PromptConfig, fmt: str = "auto"
) -> int:
    """Each round of one session against a whole prepare; the rounds that compacted."""
    compacted = 0
    session = scoutd.Session(config=config, format=fmt)
    for end in ends:
        got = session.prepare(messages[:end])
        whole = scoutd.prepare(messages[:end], config=config, format=fmt)
        assert got.messages == whole.messages, end
        assert got.report == whole.report, end
        compacted += whole.report[0].outputs_dropped > 0
    return compacted


@pytest.mark.parametrize("config", CONFIGS)
def test_scout_rounds_with_waiting_calls_remarks_and_long_calls(config: PromptConfig) -> None:
    waiting_twice = compacted = 0
    for seed in range(12):
        messages, ends = scout_run(random.Random(seed), 70)
        roles = [m["role"] for m in messages]
        # two calls left waiting in a row, each at the end of a round: counted once each
        waiting_twice += any(
            roles[a - 1] == roles[b - 1] == "function_call" and b == a + 1
            for a, b in itertools.pairwise(ends)
        )
        compacted += check_rounds(messages, ends, config)
    assert waiting_twice >= 4, waiting_twice
    assert compacted >= 100, compacted


def test_anthropic_rounds_with_screenshots_in_tool_results() -> None:
    source = {"type": "base64", "media_type": "image/png", "data": png(1200, 900)}
    # a short text beside the image: too short to shorten, sent with its image
    result = [{"type": "text", "text": "the page now"}, {"type": "image", "source": source}]
    messages = anthropic(40, output=result)
    ends = list(range(3, len(messages) + 1, 2))  # after each tool result
    assert sum(check_rounds(messages, ends, config, "anthropic") for config in CONFIGS) >= 20


def test_openai_chat_rounds_are_priced_as_openai() -> None:
    """The session's replay reads OpenAI's prices, as the whole prepare of the format does:
    with Anthropic's (the default preset) the compactions come elsewhere."""
    messages = chat(60, parallel=2, output="y" * 3_000)
    ends = [n + 1 for n, m in enumerate(messages) if m["role"] == "tool"]
    config = PromptConfig(context_window=200_000, compaction_trigger_share=0.05)
    priced_otherwise = msgspec.structs.replace(config, cache_pricing="anthropic")
    assert any(
        scoutd.prepare(messages[:end], config=config, format="openai-chat").messages
        != scoutd.prepare(messages[:end], config=priced_otherwise, format="openai-chat").messages
        for end in ends
    )
    assert check_rounds(messages, ends, config, "openai-chat") >= 5
