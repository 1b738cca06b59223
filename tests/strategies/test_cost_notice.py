"""The default's compaction notice and the size a compaction reserves for it: the
estimate holds every notice whose counts and handles fit the room it documents."""

from __future__ import annotations

import json
import random
from typing import Any

from scoutd.config import PromptConfig
from scoutd.strategies.cost_notice import COST_AWARE_NOTICE, compaction_notice, notice_estimate
from scoutd.strategies.rewrites import handles_text
from scoutd.strategies.tool_messages import index_tools

COUNTS = 2 * 20  # the room for the notice's two counts: 20 digits each
HANDLES = 100  # the room for "; removed here: #1-#46, ..." with recall on
PLACEHOLDERS = len("{compacted}") + len("{removed}")


def run(pairs: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for number in range(pairs):
        call = {"name": "read", "arguments": {"path": f"f{number}.py"}, "id": f"c{number}"}
        body = {"name": "read", "content": "text", "id": f"c{number}"}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(body)})
    return messages


def test_without_recall_the_estimate_is_the_template_and_its_counts() -> None:
    estimate = notice_estimate(PromptConfig())
    assert estimate.startswith(COST_AWARE_NOTICE)
    assert len(estimate) == len(COST_AWARE_NOTICE) + COUNTS
    own = PromptConfig(compaction_notice="Compacted: {compacted} shortened, {removed} gone.")
    assert notice_estimate(own).startswith(own.compaction_notice)
    assert len(notice_estimate(own)) == len(own.compaction_notice) + COUNTS
    index = index_tools(run(3))
    assert compaction_notice(own, index, [0, 1]) == own.compaction_notice


def test_with_recall_the_estimate_holds_every_notice_its_room_allows() -> None:
    """Drawn sets of dropped outputs, their handles within the documented room, and
    counts of up to 20 digits: each notice written fits the estimate, and the
    biggest fill it exactly but for the placeholders' own characters."""
    config = PromptConfig(recall=True)
    estimate = len(notice_estimate(config))
    assert estimate == len(compaction_notice(config, index_tools([]), ())) + COUNTS + HANDLES
    index = index_tools(run(2_000))
    rng = random.Random(5)
    tight = 0
    for _ in range(400):
        top = rng.randint(1, 2_000)
        numbers = sorted(rng.sample(range(1, top + 1), rng.randint(1, min(top, 60))))
        while len("; removed here: " + handles_text(numbers)) > HANDLES:
            numbers.pop()
        slots = [slot for slot, number in enumerate(index.numbers) if number in numbers]
        digits = rng.choice((1, 5, 20))
        count = int("9" * digits)
        written = compaction_notice(config, index, slots).format(compacted=count, removed=count)
        assert handles_text(numbers) in written
        assert len(written) <= estimate, (numbers, digits)
        room = HANDLES - len("; removed here: " + handles_text(numbers))
        if digits == 20:
            assert len(written) == estimate - PLACEHOLDERS - room
            tight += room < 10
    assert tight >= 20, tight
