"""Drawn OpenAI Agents SDK inputs through the input filter's prepare.

The filter hands the SDK's input items (OpenAI Responses items) to scoutd as
they are. Inputs are drawn from the kinds the SDK sends: user, system and
developer messages (text or content lists with images and files), assistant
output messages with annotations, reasoning items with encrypted content,
function calls (nested JSON arguments) and their outputs (text or content
lists) in any order, custom tool calls, computer calls with screenshots,
hosted tool calls (web and file search, image generation, code interpreter,
MCP), item references, shared call ids, lone surrogates, huge outputs and
calls left unanswered at the end. Three oracles:

- identity: with a window large enough the items come back equal, and the
  ones given are never changed;
- validity under compaction (small windows, the default strategy): every
  output answers a call kept before it, every call kept but the trailing ones
  is answered, a reasoning item is never left without the item after it, the
  items still validate as the SDK's ``TResponseInputItem``, and the newest
  outputs are verbatim.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")

from agents.items import TResponseInputItem
from hypothesis import event, example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from scoutd.integrations.openai_agents import ScoutdInputFilter

from .drawn import SETTINGS, output

ITEMS: TypeAdapter[list[TResponseInputItem]] = TypeAdapter(list[TResponseInputItem])
TEXTS = st.text(st.characters(codec="utf-8"), max_size=30) | st.sampled_from(["", "héllo ☃"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8,
)
IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}
OUTPUTS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
HOSTED: list[dict[str, Any]] = [
    {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "file_search_call", "status": "completed", "queries": ["q"], "results": None},
    {"type": "image_generation_call", "status": "completed", "result": "AAAA"},
    {"type": "mcp_call", "server_label": "s", "name": "t", "arguments": "{}", "output": "o"},
    {"type": "item_reference"},
]


class Items(list[dict[str, Any]]):
    """Drawn input items whose repr is short: each item's kind, call id and size."""

    def __repr__(self) -> str:
        rows = [
            f"{item.get('type', item.get('role'))}({item.get('call_id', '')} {len(str(item))})"
            for item in self
        ]
        return "Items(" + "; ".join(rows) + ")"


@st.composite
def inputs(draw: st.DrawFn) -> Items:
    """A run's input items: a prompt, then turns; the last may leave its calls open."""
    items = Items()
    if draw(st.booleans()):
        items.append({"role": draw(st.sampled_from(["system", "developer"])), "content": "rules"})
    prompt: Any = draw(TEXTS)
    if draw(st.integers(0, 3)) == 3:
        prompt = [{"type": "input_text", "text": prompt}, IMAGE]
    items.append({"role": "user", "content": prompt})
    turns = draw(st.integers(1, 9))
    shared = draw(st.booleans())
    for turn in range(turns):
        last = turn == turns - 1
        if draw(st.booleans()):
            items.append(
                {"id": f"rs_{turn}", "type": "reasoning", "summary": [], "encrypted_content": "E"}
            )
        if draw(st.integers(0, 5)) == 5:
            hosted = dict(draw(st.sampled_from(HOSTED)), id=f"h_{turn}")
            items.append(hosted)
        count = draw(st.integers(1 if last else 0, 3))
        calls = []
        for k in range(count):
            call_id = "dup" if shared and k == 0 else f"c{turn}.{k}"
            kind = draw(st.sampled_from(["function_call", "function_call", "custom_tool_call"]))
            call: dict[str, Any] = {"type": kind, "id": f"fc_{turn}.{k}", "call_id": call_id}
            call["name"] = "bash"
            if kind == "function_call":
                call["arguments"] = json.dumps(draw(st.dictionaries(TEXTS, JSON, max_size=3)))
            else:
                call["input"] = draw(TEXTS)
            items.append(call)
            calls.append(call)
        if not calls:
            text = {"type": "output_text", "text": draw(TEXTS), "annotations": [], "logprobs": []}
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": f"msg_{turn}",
                    "status": "completed",
                    "content": [text],
                }
            )
        if last and calls and draw(st.integers(0, 3)) == 3:
            break  # the last calls are not answered yet
        for call in draw(st.permutations(calls)):
            answer: Any = output(draw, turn)
            if call["type"] == "function_call" and draw(st.integers(0, 5)) == 5:
                answer = [{"type": "input_text", "text": answer}, IMAGE]
            items.append(
                {"type": OUTPUTS[call["type"]], "call_id": call["call_id"], "output": answer}
            )
    return items


def prepared(items: list[dict[str, Any]], config: dict[str, Any]) -> list[Any]:
    """The input the filter gives the model (in process: the mapping is the same)."""
    with ScoutdInputFilter(config=config) as hook:
        return hook.prepare_items(items)


def check_valid(back: list[Any]) -> None:
    """Outputs answer calls kept before them; calls but the trailing ones are answered;
    a reasoning item is followed by an item of its turn; the SDK's type validates."""
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for index, item in enumerate(back):
        kind = item.get("type")
        if kind in OUTPUTS:
            calls[item["call_id"]] = kind
        elif kind in OUTPUTS.values():
            assert OUTPUTS.get(calls.get(item["call_id"], "")) == kind, (index, item["call_id"])
            answered.add(item["call_id"])
        elif kind == "reasoning":
            after = back[index + 1] if index + 1 < len(back) else None
            assert after is not None and after.get("type") != "reasoning", index
    trailing: set[str] = set()
    for item in reversed(back):
        if item.get("type") not in OUTPUTS:
            break
        trailing.add(item["call_id"])
    assert set(calls) - answered <= trailing, set(calls) - answered
    ITEMS.validate_python(back)


def test_with_nothing_to_compact_the_items_come_back_equal() -> None:
    """Identity: a window large enough gives back equal items; the given stay as given."""
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(inputs())
    def check(items: list[dict[str, Any]]) -> None:
        before = copy.deepcopy(items)
        back = prepared(items, {"context_window": 2_000_000})
        assert back == items and items == before
        seen["hosted"] += any(item.get("id", "").startswith("h_") for item in items)
        seen["custom"] += any(item.get("type") == "custom_tool_call" for item in items)

    check()
    assert seen["hosted"] >= 20 and seen["custom"] >= 30, seen


# A call id used by two calls: its pairs go as they are, and one large output of them
# fills a small window by itself (found by the property).
PASSED_THROUGH: list[dict[str, Any]] = [
    {"role": "user", "content": "fix it"},
    {"type": "function_call", "id": "fc_1", "call_id": "dup", "name": "bash", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "dup", "output": "ok"},
    {"type": "function_call", "id": "fc_2", "call_id": "dup", "name": "bash", "arguments": "{}"},
    {"type": "custom_tool_call", "id": "ct_1", "call_id": "c1", "name": "patch", "input": "x"},
    {"type": "function_call_output", "call_id": "dup", "output": "line\n" * 7_000},
    {"type": "custom_tool_call_output", "call_id": "c1", "output": "line 1.0: value 0\n"},
]


def _passed_through_tokens(items: list[dict[str, Any]]) -> int:
    """About what the items of a call id used by more than one call weigh, in tokens
    (4 characters each): they are passed through whole, never compacted."""
    calls = Counter(item.get("call_id") for item in items if item.get("type") in OUTPUTS)
    shared = {call_id for call_id, uses in calls.items() if uses > 1}
    return sum(len(json.dumps(item)) for item in items if item.get("call_id") in shared) // 4


def test_a_compacted_input_is_one_the_sdk_sends_validly() -> None:
    """Validity: small windows, the default strategy."""
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(inputs(), st.sampled_from([1_500, 3_000, 6_000]))
    @example(PASSED_THROUGH, 1_500)
    def check(items: list[dict[str, Any]], window: int) -> None:
        ITEMS.validate_python(items)
        before = copy.deepcopy(items)
        back = prepared(items, {"context_window": window})
        assert items == before
        check_valid(back)
        seen["compacted"] += back != items
        newest = items[-1]
        text = newest.get("output")
        if newest.get("type") not in OUTPUTS.values():
            case = "no output last"
        elif any(
            (isinstance(value, list) and IMAGE in value) or value == "image_generation_call"
            for item in items
            for value in (item.get("content"), item.get("output"), item.get("type"))
        ):
            case = "with an image"  # one image may weigh a whole small window
        elif not isinstance(text, str) or len(text) > 2_000 or not text.isascii():
            case = "newest large"
        elif _passed_through_tokens(items) > window // 2:
            # pairs of a call id used twice go as they are, and count (docs/FORMATS.md):
            # past the window they leave the newest outputs no room to stay whole
            case = "passed through fills the window"
        else:
            assert newest in back
            case = "newest kept"
        seen[case] += 1
        event(case)

    check()
    assert seen["compacted"] >= 30 and seen["newest kept"] >= 20, seen
    assert seen["passed through fills the window"] >= 1, seen
