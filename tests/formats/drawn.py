"""The strategies and small windows the drawn-conversation properties run under."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import scoutd
from scoutd.formats.view import blocks_text

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


def recalled_text(item: Any) -> str | None:
    """What recall gives back of a Responses output item: a screenshot as ``[image]``, a
    shell output's stdout and stderr texts (the empty ones left out) a line apart, an
    apply_patch output's optional log text, else the text (text parts joined)."""
    kind, output = item.get("type"), item.get("output")
    if kind == "computer_call_output":
        return "[image]"
    if kind == "shell_call_output":
        texts = [chunk[key] for chunk in output for key in ("stdout", "stderr")]
        return "\n".join(text for text in texts if text)
    if kind == "apply_patch_call_output" and output is None:
        return ""
    return blocks_text(output)


def same(a: Any, b: Any) -> bool:
    """Equal, and equal as JSON text (``True`` is not ``1``); lone surrogates escaped."""
    return bool(a == b) and json.dumps(a) == json.dumps(b)


def session_rounds(
    messages: list[Any], format: str, strategy: str | None, config: dict[str, Any]
) -> Iterator[tuple[scoutd.Session, list[Any], list[Any]]]:
    """``(session, prefix, prompt)`` for each prefix of ``messages`` fed in turn to one
    in-process session, each prompt checked equal to ``scoutd.prepare`` of the prefix."""
    with scoutd.Session(format=format, strategies=strategy, config=config) as session:
        for end in range(1, len(messages) + 1):
            part = messages[:end]
            prompt = session.prepare_prompt(part)
            whole = scoutd.prepare(part, strategy, format=format, config=config).messages
            assert same(prompt, whole), end
            yield session, part, prompt
