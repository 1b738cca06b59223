"""The projection when the window comes first: the next compaction is forced, not paid for.

On a small window the prompt passes ``compaction_limit_share`` of it long
before a compaction would pay: the reason must say so, and give about the
tokens until the limit, not those until a compaction that never comes. The
oracle is docs/ECONOMY.md's token estimate summed over the messages (the
whole prompt at each round, nothing compacted before the limit) and the first
round at which it passes the limit.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from typing import Any

import pytest

from scoutd.config import PromptConfig
from scoutd.strategies.cost_aware import shorten_tools_cost_aware
from scoutd.strategies.projection import (
    PROJECTION_ROUNDS,
    forecast,
    rounds_to_limit,
    rounds_to_pay,
)

from .test_projection import draw

SIZE = 4_000  # characters of each output's text
WINDOW = 60_000  # the limit: 45,000 tokens, reached after about 44 outputs
OUTPUTS = 60


def run(calls: int) -> list[dict[str, Any]]:
    """A system prompt, a task, then ``calls`` equal pairs, each read of its own file."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the build."},
    ]
    for number in range(calls):
        ident = f"c{number:03d}"
        call = {"name": "read", "arguments": {"path": f"f{number:03d}.py"}, "id": ident}
        body = {"name": "read", "content": "x" * SIZE, "id": ident}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(body)})
    return messages


def whole_prompts(messages: list[dict[str, Any]]) -> list[int]:
    """docs/ECONOMY.md, "Tokens" (characters / 4 plus 4 a message), of the whole prompt at
    each round: element ``n`` ends with the ``n``-th output."""
    counts = [math.ceil(len(m["content"]) / 4) + 4 for m in messages]
    prompts = [counts[0] + counts[1]]
    for k in range(2, len(counts), 2):
        prompts.append(prompts[-1] + counts[k] + counts[k + 1])
    return prompts


def reason_at(messages: list[dict[str, Any]], outputs: int, config: PromptConfig) -> Any:
    _, report = shorten_tools_cost_aware(messages[: 2 + 2 * outputs], config)
    assert report.reason is not None
    return report.reason


@pytest.mark.parametrize("risk", [0.06, 0.0])  # the default, and a compaction never safe enough
def test_a_forced_compaction_ahead_is_named_with_its_distance(risk: float) -> None:
    config = PromptConfig(context_window=WINDOW, compaction_risk_share=risk)
    messages = run(OUTPUTS)
    prompts = whole_prompts(messages)
    limit = 0.75 * WINDOW
    forced_at = next(n for n, prompt in enumerate(prompts) if prompt > limit)
    # what scoutd does: nothing compacted before the limit, then a compaction to fit
    assert reason_at(messages, forced_at - 1, config).decided_at is None
    assert reason_at(messages, forced_at, config).code == "over_limit"
    for n in (21, 25, 30, 40):
        reason = reason_at(messages, n, config)
        assert reason.code in ("below_trigger", "not_paying", "horizon", "risk"), n
        assert "it will pay at" not in reason.text, (n, reason.text)
        assert reason.more_tokens is not None, (n, reason.text)
        assert reason.text.endswith(
            f"; before it pays, the prompt will pass the limit of {limit:,.0f} and be"
            f" compacted to fit, at about {reason.more_tokens:,} more tokens of prompt"
        ), (n, reason.text)
        grown = prompts[forced_at] - prompts[n]
        assert 0.9 * grown <= reason.more_tokens <= 1.1 * grown, (n, reason.more_tokens, grown)


def test_the_limit_round_is_the_first_the_projected_prompt_passes_it() -> None:
    """rounds_to_limit in closed form against a walk over the projected rounds, and forecast
    taking the nearer of the two (forced on a tie, as the replay reports it)."""
    rng = random.Random(29)
    for _ in range(400):
        growth = rng.choice((0.5, 7.0, 412.0, 3_000.0))
        decision = replace(  # a drawn decision, with a limit the prompt may reach
            draw(rng),
            prompt=rng.randint(0, 150_000),
            limit=rng.choice((30_000.0, 150_000.0)),
            risk=rng.choice((0.0, 0.06)),
            growth=growth,
        )
        if decision.unmet() is None:
            continue
        walked: int | None = next(
            (
                j
                for j in range(PROJECTION_ROUNDS + 1)
                if decision.prompt + growth * j > decision.limit
            ),
            None,  # past the projection's reach
        )
        assert rounds_to_limit(decision) == walked, decision
        pays, ahead = rounds_to_pay(decision), forecast(decision)
        if walked is None and pays is None:
            assert ahead is None, decision
            continue
        assert ahead is not None, decision
        forced = walked is not None and (pays is None or walked <= pays)
        assert ahead.forced == forced, decision
        rounds = walked if forced else pays
        assert rounds is not None
        assert ahead.tokens == max(1, round(growth * rounds)), decision
