"""The strategies and small windows the drawn-conversation properties run under."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# The same examples every run: the floors of cases reached hold for them.
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
# A shortened output's marker with recall on: its original length and handle.
MARKER = re.compile(r"Truncated \((\d+), recall #(\d+)\): ")

# The default, the epoch ones and the one that drops the oldest pairs by count.
STRATEGIES: list[str | None] = [
    None,
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools",
]


def configuration(data: st.DataObject, strategy: str | None) -> dict[str, Any]:
    """A small window for ``strategy``, so that drawn conversations get compacted;
    recall on or off."""
    config: dict[str, Any] = {"recall": data.draw(st.booleans())}
    if strategy is None:
        config["context_window"] = data.draw(st.sampled_from([1_500, 3_000, 6_000]))
        config["cost_keep_share"] = data.draw(st.sampled_from([0, 0.5]))
    elif strategy.startswith("shorten_tools_epoch"):
        config |= {
            "epoch_tool_call_threshold": 2,
            "epoch_full_tool_calls": 1,
            "epoch_compacted_tool_calls": data.draw(st.integers(1, 3)),
            "epoch_size": 1,
        }
    else:
        config |= {"max_tool_calls": data.draw(st.integers(1, 4)), "full_tool_outputs": 1}
        config["max_tool_chars"] = 0
    return config


def output_text(n: int, lines: int) -> str:
    """Output ``n``'s text: distinct lines, so that each output's text is its own."""
    if lines == 0:
        return f"ok {n}"
    return f"output {n}\n" + "".join(f"line {n}.{k}: value_{n}_{k}\n" for k in range(lines))
