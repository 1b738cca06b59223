"""Properties of Responses conversations holding custom tool calls (docs/FORMATS.md).

Custom tool calls and their outputs pair by ``call_id`` as function ones do, and
the strategies shorten and drop them. Conversations are drawn mixing user
messages, reasoning items, assistant text, function, custom, computer (with a
screenshot) and shell pairs, custom outputs as a text or a list of
``input_text`` / ``input_image`` parts, and hostile items: a custom call without
its output, an output without its call, a function call and a custom call with
the same ``call_id``, an ``input`` that is not a text, a ``type`` that is a list,
lone surrogates. For the default strategy, the epoch ones and ``shorten_tools``
(the one that drops by count) with small windows:

(a) nothing raises; (b) the prompt breaks no rule of the API more than the given
items do (:func:`~tests.formats.test_responses_items_pairing.problems`, and
:func:`pair_problems`, which tells the kinds of calls apart); (c) the input is
never changed; (d) a session fed the growing conversation answers each round as
``prepare`` of it does; (e) with recall on, every handle a prompt shows
(``recall #N`` in a shortened output, ``#N`` in the notice's removed list) gives
back the exact original text of that pair's output.

Counters make sure the interesting cases are reached: a custom output shortened,
a custom input shortened, a custom pair dropped, a recall handle checked.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

import scoutd

from .drawn import (
    MARKER,
    SETTINGS,
    STRATEGIES,
    configuration,
    output_text,
    recalled_text,
    same,
    session_rounds,
)
from .test_responses_items_pairing import PAIRS, problems

CUSTOM, CUSTOM_OUTPUT = "custom_tool_call", "custom_tool_call_output"
FUNCTION, FUNCTION_OUTPUT = "function_call", "function_call_output"
OUTPUT_OF = PAIRS  # call type -> its output type
CALL_OF = {output: call for call, output in PAIRS.items()}
SHOT = "data:image/png;base64," + "iVBORw0KGgo" * 50
REMOVED = re.compile(r"removed here: ([#\d, -]+);")
TOOLS = ["function", "custom", "custom", "computer", "shell"]
HOSTILE = [
    "custom_without_output",
    "output_without_call",
    "same_id_both_kinds",
    "input_not_text",
    "surrogate_input",
    "surrogate_output",
    "custom_twice_same_id",
    "kinds_mismatched",
    "output_before_call",
    "odd_output",
    "id_not_text",
]
# Ids shared by a function call and a custom call: drawn more often, as they broke
# pairing only when the strategies drop half of the four items (see the regression test)
SHARED_IDS = ["same_id_both_kinds"] * 3
# custom outputs that are neither a text nor a list of text and image parts
ODD_OUTPUTS: list[Any] = [
    None,
    {"type": "input_image", "image_url": SHOT},
    [{"type": "input_file", "file_id": "file_1"}],
    [{"type": 5}],
    [1],
]


class _Drawn:
    """A conversation being drawn, and what was put in it."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.items: list[Any] = [{"type": "message", "role": "user", "content": "fix the bug"}]
        self.serial = 0
        self.hostile: set[str] = set()

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def next_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}_{self.serial}"

    def output_text(self) -> str:
        return output_text(self.serial, self.draw(st.sampled_from([0, 40, 120])))

    def custom_output(self) -> Any:
        text = self.output_text()
        shape = self.draw(st.sampled_from(["str", "text_parts", "with_image"]))
        if shape == "str":
            return text
        parts: list[Any] = [{"type": "input_text", "text": text}]
        if shape == "with_image":
            parts.append({"type": "input_image", "image_url": SHOT, "detail": "auto"})
        return parts

    def tool(self, kind: str, calls: list[Any], outputs: list[Any]) -> None:
        """Append a call of ``kind`` to ``calls`` and its output (if any) to ``outputs``."""
        if kind == "function":
            ident = self.next_id("call")
            calls.append(
                {
                    "type": FUNCTION,
                    "id": f"fc_{ident}",
                    "call_id": ident,
                    "name": "read",
                    "arguments": json.dumps({"path": f"/src/{ident}.py"}),
                    "status": "completed",
                }
            )
            outputs.append(
                {"type": FUNCTION_OUTPUT, "call_id": ident, "output": self.output_text()}
            )
        elif kind in ("custom", "custom_without_output", "input_not_text", "surrogate_input"):
            ident = self.next_id("patch")
            lines = self.draw(st.sampled_from([1, 200]))
            given: Any = "*** Begin Patch\n" + f"+{ident}\n" * lines + "*** End Patch"
            if kind == "input_not_text":
                given = self.draw(st.sampled_from([None, 7, {"patch": given}, [given]]))
            elif kind == "surrogate_input":
                given += "\ud800"
            calls.append(
                {
                    "type": CUSTOM,
                    "id": f"ctc_{ident}",
                    "call_id": ident,
                    "name": "apply_patch",
                    "input": given,
                }
            )
            if kind != "custom_without_output":
                outputs.append(
                    {"type": CUSTOM_OUTPUT, "call_id": ident, "output": self.custom_output()}
                )
        elif kind == "surrogate_output":
            self.tool("custom", calls, outputs)
            output = outputs[-1]
            output["output"] = self.output_text() + "\udfff"
        elif kind == "output_without_call":
            ident = self.next_id("orphan")
            outputs.append(
                {"type": CUSTOM_OUTPUT, "call_id": ident, "output": self.custom_output()}
            )
        elif kind == "same_id_both_kinds":
            self.tool("function", calls, outputs)
            ident = calls[-1]["call_id"]
            self.tool("custom", calls, outputs)
            calls[-1] = {**calls[-1], "call_id": ident}
            outputs[-1] = {**outputs[-1], "call_id": ident}
        elif kind == "custom_twice_same_id":
            self.tool("custom", calls, outputs)
            ident = calls[-1]["call_id"]
            self.tool("custom", calls, outputs)
            calls[-1] = {**calls[-1], "call_id": ident}
            outputs[-1] = {**outputs[-1], "call_id": ident}
        elif kind == "kinds_mismatched":
            self.tool("custom", calls, outputs)
            outputs[-1] = {**outputs[-1], "type": FUNCTION_OUTPUT, "output": self.output_text()}
        elif kind == "output_before_call":
            self.tool("custom", calls, outputs)
            calls[-1], outputs[-1] = outputs[-1], calls[-1]
        elif kind == "odd_output":
            self.tool("custom", calls, outputs)
            outputs[-1] = {**outputs[-1], "output": self.draw(st.sampled_from(ODD_OUTPUTS))}
        elif kind == "id_not_text":
            self.tool("custom", calls, outputs)
            calls[-1] = {**calls[-1], "call_id": self.serial}
            outputs[-1] = {**outputs[-1], "call_id": self.serial}
        elif kind == "computer":
            ident = self.next_id("computer")
            calls.append(
                {
                    "type": "computer_call",
                    "id": f"cu_{ident}",
                    "call_id": ident,
                    "action": {"type": "screenshot"},
                    "pending_safety_checks": [],
                    "status": "completed",
                }
            )
            outputs.append(
                {
                    "type": "computer_call_output",
                    "call_id": ident,
                    "output": {"type": "computer_screenshot", "image_url": SHOT},
                }
            )
        else:  # shell
            ident = self.next_id("shell")
            calls.append(
                {
                    "type": "shell_call",
                    "id": f"sh_{ident}",
                    "call_id": ident,
                    "action": {"commands": [f"ls {ident}"]},
                    "status": "completed",
                }
            )
            outputs.append(
                {
                    "type": "shell_call_output",
                    "call_id": ident,
                    "output": [{"stdout": self.output_text(), "stderr": ""}],
                }
            )

    def turn(self, hostile: bool) -> None:
        """A model turn: maybe reasoning and text, calls, then their outputs."""
        kinds = [*TOOLS, *HOSTILE, *SHARED_IDS] if hostile else TOOLS
        chosen = self.draw(st.lists(st.sampled_from(kinds), min_size=0, max_size=3))
        self.hostile.update(k for k in chosen if k in HOSTILE)
        calls: list[Any] = []
        outputs: list[Any] = []
        for kind in chosen:
            self.tool(kind, calls, outputs)
        reasoning = self.draw(st.booleans())
        if reasoning:
            self.items.append(
                {
                    "type": "reasoning",
                    "id": self.next_id("rs"),
                    "summary": [{"type": "summary_text", "text": "thinking"}],
                    "encrypted_content": "gAAAAB" * 10,
                }
            )
        if (reasoning and not calls) or self.draw(st.booleans()):
            text = {"type": "output_text", "text": f"step {self.serial}", "annotations": []}
            self.items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": self.next_id("msg"),
                    "content": [text],
                }
            )
        if self.draw(st.booleans()):
            outputs.reverse()
        self.items += calls + outputs
        if self.draw(st.integers(0, 3)) == 0:
            self.items.append({"type": "message", "role": "user", "content": "go on"})
            if hostile and self.draw(st.integers(0, 3)) == 0:
                self.hostile.add("unhashable_type")
                self.items.append({"type": ["not", "hashable"], "id": self.next_id("odd")})


def conversation(data: st.DataObject) -> tuple[list[Any], set[str]]:
    """A drawn conversation, and the hostile kinds it holds."""
    drawn = _Drawn(data)
    hostile = data.draw(st.booleans())
    for _ in range(data.draw(st.integers(2, 8))):
        drawn.turn(hostile)
    return drawn.items, drawn.hostile


def _hashable_type(item: Any) -> bool:
    try:
        hash(item.get("type"))
    except TypeError:
        return False
    return True


def api_problems(given_items: list[Any], prepared: list[Any]) -> Counter[tuple[str, str]]:
    """:func:`problems` over the items whose ``type`` is hashable (it reads ``type``
    as a key); the others must come back as the very objects (they follow a user
    message only, so leaving them out changes no model turn)."""
    found: Counter[tuple[str, str]] = Counter()
    odd = [item for item in given_items if not _hashable_type(item)]
    shown = {id(item) for item in prepared}
    for item in odd:
        if id(item) not in shown:
            found["odd item dropped", str(item.get("id"))] += 1
    plain_given = [item for item in given_items if _hashable_type(item)]
    plain_prepared = [item for item in prepared if _hashable_type(item)]
    if len(plain_prepared) + len(odd) != len(prepared):
        found["odd item changed", ""] += 1
    return found + problems(plain_given, plain_prepared)


def pair_problems(items: list[Any]) -> Counter[tuple[str, str, str]]:
    """Calls without their output and outputs without their call, by kind and id:
    :func:`problems` pairs by ``call_id`` alone, so a function call and a custom
    call with one id pass it whichever of their outputs goes."""
    found: Counter[tuple[str, str, str]] = Counter()
    waiting: Counter[tuple[str, str]] = Counter()
    for item in items:
        kind = item.get("type") if _hashable_type(item) else None
        if kind in OUTPUT_OF:
            waiting[kind, str(item.get("call_id"))] += 1
        elif kind in CALL_OF:
            key = (CALL_OF[kind], str(item.get("call_id")))
            if waiting[key] > 0:
                waiting[key] -= 1
            else:
                found["output without its call", kind, key[1]] += 1
    for (kind, ident), count in waiting.items():
        if count:
            found["call without its output", kind, ident] += count
    return found


def _output_text(item: Any) -> str | None:
    """An output item's text as recall gives it (images as ``[image]``)."""
    return recalled_text(item)


def _handles(prompt: list[Any]) -> tuple[dict[int, tuple[int, Any]], set[int]]:
    """The handles a prompt shows: ``recall #N`` in a shortened output (N -> its
    length and the item), and those the notice names as removed."""
    shortened: dict[int, tuple[int, Any]] = {}
    removed: set[int] = set()
    for item in prompt:
        if not _hashable_type(item):
            continue
        if item.get("type") in CALL_OF:
            text = _output_text(item)
            for length, handle in MARKER.findall(text or ""):
                shortened[int(handle)] = (int(length), item)
        elif item.get("role") == "user":
            for match in REMOVED.findall(json.dumps(item.get("content"))):
                for part in match.split(", "):
                    first, _, last = part.partition("-")
                    removed.update(range(int(first[1:]), int((last or first)[1:]) + 1))
    return shortened, removed


def _facts(items: list[Any], prepared: list[Any], seen: Counter[str]) -> None:
    """Count the interesting cases the prompt reached."""
    by_key = {
        (item["type"], item["call_id"]): item
        for item in items
        if _hashable_type(item) and item.get("type") in (CUSTOM, CUSTOM_OUTPUT)
    }
    given_ids = {id(item) for item in items}
    prepared_keys = {
        (item.get("type"), item.get("call_id")) for item in prepared if _hashable_type(item)
    }
    for item in prepared:
        if id(item) in given_ids or not _hashable_type(item):
            continue
        if item.get("type") == CUSTOM_OUTPUT:
            seen["custom output shortened"] += 1
            event("custom output shortened")
        elif item.get("type") == CUSTOM:
            seen["custom input shortened"] += 1
            event("custom input shortened")
    for (kind, ident), item in by_key.items():
        if kind != CUSTOM or (kind, ident) in prepared_keys:
            continue
        if type(item["input"]) is str and (CUSTOM_OUTPUT, ident) in by_key:
            seen["custom pair dropped"] += 1
            event("custom pair dropped")


def _check_recall(
    session: scoutd.Session, items: list[Any], prompt: list[Any], seen: Counter[str]
) -> None:
    """(e): each handle the prompt shows gives back its output's exact original text."""
    originals = {
        (item["type"], item["call_id"]): item
        for item in items
        if _hashable_type(item) and item.get("type") in CALL_OF
    }
    shortened, removed = _handles(prompt)
    for handle, (length, item) in shortened.items():
        original = originals[item["type"], item["call_id"]]
        expected = _output_text(original)
        assert session.recall(handle) == expected, (handle, item["call_id"])
        assert expected is not None and length == len(expected), (handle, length)
        seen["recall by marker"] += 1
        if item["type"] == CUSTOM_OUTPUT:
            seen["recall of a custom output"] += 1
    gone = {
        _output_text(original)
        for key, original in originals.items()
        if key not in {(m.get("type"), m.get("call_id")) for m in prompt if _hashable_type(m)}
    }
    for handle in removed:
        assert session.recall(handle) in gone, handle
        seen["recall of a removed output"] += 1


def test_custom_tool_pairs_are_compacted_validly() -> None:
    """(a) to (c) over prepare, (d) and (e) over a session of the same conversation."""
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(data=st.data(), strategy=st.sampled_from(STRATEGIES))
    def check(data: st.DataObject, strategy: str | None) -> None:
        items, hostile = conversation(data)
        config = configuration(data, strategy)
        snapshot = copy.deepcopy(items)
        prepared = scoutd.prepare(
            items, strategy, format="openai-responses", config=config
        ).messages  # (a)
        assert same(items, snapshot)  # (c)
        if not hostile:
            assert api_problems(items, items) == Counter()  # the drawing is valid
            assert pair_problems(items) == Counter()
        assert api_problems(items, prepared) - api_problems(items, items) == Counter()  # (b)
        assert pair_problems(prepared) - pair_problems(items) == Counter()
        _facts(items, prepared, seen)
        seen["hostile" if hostile else "plain"] += 1
        seen.update(f"hostile: {kind}" for kind in hostile)
        for s, part, prompt in session_rounds(items, "openai-responses", strategy, config):  # (d)
            if config["recall"]:
                _check_recall(s, part, prompt, seen)  # (e)
        assert same(items, snapshot)

    check()
    # about a third of the least seen over many seeds: the examples are fixed
    # (derandomize), the floors only stop the test from passing on nothing
    floors = {
        "custom output shortened": 2,
        "custom input shortened": 2,
        "custom pair dropped": 8,
        "recall of a custom output": 8,
        "recall of a removed output": 3,
        "hostile": 20,
        "hostile: same_id_both_kinds": 8,
    }
    assert all(seen[name] >= floor for name, floor in floors.items()), seen


# Regression (found by the property above): a function call and a custom call with
# one ``call_id`` both paired, by kind; the view then held two calls and two outputs
# with that id, and the strategies, pairing by id alone, took the function output
# for the custom call's: they dropped the one and its "output" and kept the other
# call's output without its call (the notice before it, between another call and
# its output when the turn had one).


def _same_id_both_kinds(first: str) -> list[Any]:
    """Two old function pairs, a function call and a custom call sharing ``X`` (their
    outputs in either order after them), then a newer function pair."""
    long = "x" * 3_000
    items: list[Any] = [{"type": "message", "role": "user", "content": "go"}]

    def function(ident: str) -> dict[str, Any]:
        return {"type": FUNCTION, "call_id": ident, "name": "read", "arguments": "{}"}

    for ident in ("a1", "a2"):
        items += [function(ident), {"type": FUNCTION_OUTPUT, "call_id": ident, "output": long}]
    custom = {"type": CUSTOM, "call_id": "X", "name": "apply_patch", "input": "patch"}
    outputs = [
        {"type": FUNCTION_OUTPUT, "call_id": "X", "output": "F" + long},
        {"type": CUSTOM_OUTPUT, "call_id": "X", "output": "C" + long},
    ]
    if first == "custom":
        outputs.reverse()
    items += [function("X"), custom, *outputs]
    items += [function("c1"), {"type": FUNCTION_OUTPUT, "call_id": "c1", "output": long}]
    return items


def test_a_function_and_a_custom_call_sharing_a_call_id_keep_their_outputs() -> None:
    """Regression: the default strategy (a 1,500-token window) kept the custom output
    of ``X`` without its call (function output first), or the function output
    without its call (custom output first); the API refuses either."""
    for first in ("function", "custom"):
        items = _same_id_both_kinds(first)
        prepared = scoutd.prepare(
            items, format="openai-responses", config={"context_window": 1_500}
        ).messages
        assert pair_problems(prepared) == Counter(), first
        assert problems(items, prepared) - problems(items, items) == Counter(), first
