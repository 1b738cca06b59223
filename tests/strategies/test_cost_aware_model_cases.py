"""Cases where the cost-aware strategy and its reference model (test_cost_aware_model.py)
once disagreed, each written out so that every run checks it.

Found by the random property ``test_the_prompt_and_report_are_those_of_the_model``:
a forced compaction (the prompt over ``compaction_limit_share``) with no verbatim
band and a shortened band of one pair whose call is long, three arguments just
under the argument limit. Shortening leaves such a call as it is, so it counts
what it sends, one token over the bound of a shortened call (docs/STRATEGIES.md:
"or more when its rewrite is longer than that bound"). The strategy counted it
so: with it, the prompt sent would be 304 tokens against a limit of 303, so it
drops that pair too. The model counted it at the bound, kept it, and sent the
limit exactly by its own count, one token over by the rule. The model was wrong;
it now counts a shortened call as the strategy does.
"""

from __future__ import annotations

from typing import Any

import msgspec

from scoutd.config import PromptConfig
from scoutd.strategies.cost_aware import shorten_tools_cost_aware

from .test_cost_aware_model import model_of

READ = {"role": "function_call", "content": '{"name":"read","id":"a"}'}
OUTPUT = {"role": "function_call_output", "content": '{"name":"read","id":"a"}'}
EMPTY = {"role": "user", "content": ""}


def _long_call() -> dict[str, Any]:
    arguments = {"p": "q" * 150, "q": "q" * 150, "r": "q" * 162}
    body = {"name": "read", "arguments": arguments, "id": "a"}
    return {"role": "function_call", "content": msgspec.json.encode(body).decode()}


def _conversation() -> list[Any]:
    head: list[Any] = ["stray text", {"role": "system", "content": "sys"}, EMPTY, EMPTY]
    middle = [READ, *[EMPTY] * 12, READ, EMPTY, EMPTY, READ, EMPTY, OUTPUT]
    tail = [READ, READ, READ, _long_call(), OUTPUT, {"role": "function_call", "content": None}]
    return [*head, *middle, *tail, *[EMPTY] * 6]


CONFIG = PromptConfig(
    compaction_notice="cut {compacted}, {removed}",
    context_window=1010,
    compaction_trigger_share=0.0,
    compaction_limit_share=0.3,
    expected_horizon=0.0,
    compaction_risk_share=0.0,
    cost_full_tool_outputs=0,
    cost_full_share_cap=0,
    cost_compacted_tool_calls=1,
    cost_keep_share=0.0,
)


def test_a_forced_compaction_whose_band_does_not_fit() -> None:
    messages = _conversation()
    model = model_of(messages, CONFIG, None)
    expected, _, _ = model.prepared(model.replay())
    got, report = shorten_tools_cost_aware(messages, CONFIG)
    assert report.reason is not None and report.reason.code == "over_limit"
    assert got == expected
