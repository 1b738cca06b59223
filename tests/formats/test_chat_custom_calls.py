"""OpenAI Chat ``custom`` tool calls pair as function calls do (docs/FORMATS.md).

A Chat assistant message may hold ``custom`` entries (a freeform tool, a
patch say: ``{"type": "custom", "custom": {"name", "input"}}``) answered by
``tool`` messages like function calls. They were passed through whole and
counted as malformed: a run of large custom outputs was never compacted. They
are now shortened and dropped with their calls, their ``input`` shown as the
argument ``input`` and kept a text, and recalled by handle.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import scoutd

from .conversations import epoch_window
from .validity import new_problems

WINDOW = {"context_window": 20_000}


def _custom(turn: int, output: Any, patch: str = "*** Begin Patch") -> list[dict[str, Any]]:
    ident = f"cu_{turn}"
    call = {"id": ident, "type": "custom", "custom": {"name": "apply_patch", "input": patch}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": ident, "content": output},
    ]


def _conversation(turns: int, output: Any, patch: str = "*** Begin Patch") -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "fix the bug"}]
    for turn in range(turns):
        messages += _custom(turn, output, patch)
    return messages


def test_custom_outputs_are_compacted_like_function_outputs() -> None:
    """12 custom outputs of 40 KB (about 120,000 tokens) and a 20,000-token window:
    shortened or dropped with their calls until the prompt fits, none malformed."""
    messages = _conversation(12, "z" * 40_000)
    prepared = scoutd.prepare(messages, format="openai-chat", config=WINDOW)
    assert prepared.report[-1].malformed == 0
    assert not new_problems("openai-chat", messages, prepared.messages)
    whole = [m for m in prepared.messages if m.get("content") == "z" * 40_000]
    assert len(whole) < 12  # the others shortened, or dropped with their calls
    assert len(json.dumps(prepared.messages)) / 4 < 20_000
    assert messages[-1] is prepared.messages[-1]  # the newest answer, the very object


@pytest.mark.parametrize("output", ["done", [{"type": "text", "text": "y" * 3_000}]])
def test_a_long_custom_input_is_shortened_and_stays_a_text(output: Any) -> None:
    """A 6,000-character patch in old custom calls is shortened as a long argument is;
    the entry stays a ``custom`` one with a text ``input``, its answer keeps its shape."""
    messages = _conversation(40, output, patch="+line\n" * 1_000)
    prepared = scoutd.prepare(messages, "shorten_tools_epoch", config=epoch_window(4)).messages
    assert not new_problems("openai-chat", messages, prepared)
    entries = [e for m in prepared for e in m.get("tool_calls") or ()]
    assert all(e["type"] == "custom" and type(e["custom"]["input"]) is str for e in entries)
    assert any(len(e["custom"]["input"]) < 6_000 for e in entries)
    assert all(set(e) == {"id", "type", "custom"} for e in entries)
    answers = [m for m in prepared if m.get("role") == "tool"]
    assert all(type(m["content"]) is type(output) for m in answers)


def test_a_shortened_custom_output_is_recalled_exactly(tmp_path: Path) -> None:
    """With recall on, each ``recall #N`` a shortened custom output shows gives back
    that output whole, in process as the daemon's sessions do."""
    outputs = [f"output {turn}\n" + f"line {turn}\n" * 2_000 for turn in range(30)]
    messages: list[Any] = [{"role": "user", "content": "fix the bug"}]
    for turn, output in enumerate(outputs):
        messages += _custom(turn, output)
    config = scoutd.Config(prompt=scoutd.PromptConfig(context_window=30_000, recall=True))
    with scoutd.Session(str(tmp_path / "chat.json"), config=config) as session:
        prompt = session.prepare(messages).messages
        handles = [
            int(handle)
            for m in prompt
            if m.get("role") == "tool" and type(m["content"]) is str
            for handle in re.findall(r"recall #(\d+)\)", m["content"])
        ]
        assert handles  # some custom outputs were shortened, each with its handle
        for handle in handles:
            assert session.recall(handle) == outputs[handle - 1]
        assert session.recall(1) == outputs[0]  # dropped ones answer by handle too


def test_a_custom_entry_that_is_not_well_formed_passes_through_as_malformed() -> None:
    """An ``input`` that is not a text, or no ``custom`` object: the group passes through
    whole and is counted, as a function call whose arguments are not a text is."""
    odd: list[Any] = _custom(0, "out")
    odd[0]["tool_calls"][0]["custom"]["input"] = {"patch": "p"}
    bare: list[Any] = _custom(1, "out")
    del bare[0]["tool_calls"][0]["custom"]
    for group in (odd, bare):
        messages = _conversation(30, "x" * 4_000)
        messages[3:3] = group
        prepared = scoutd.prepare(messages, format="openai-chat", config=WINDOW)
        assert prepared.report[-1].malformed == 2
        assert group[0] in prepared.messages and group[1] in prepared.messages
