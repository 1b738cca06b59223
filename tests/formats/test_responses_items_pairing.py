"""Responses conversations with the item types real agents send (docs/FORMATS.md).

Codex CLI and computer-use agents send custom tool calls, shell calls, computer
calls with screenshots, MCP items and server tool calls besides function calls.
Each prepared prompt is checked by :func:`problems`, written from the API's
rules (openai.types.responses): every call answered by its output, after it,
with nothing scoutd added in between; a ``reasoning`` item kept exactly when
an item of its turn is, and followed by one; items other than those
:data:`REWRITABLE` names kept as the very objects given, and those rewritten
still of their type, with their ``call_id``, changed in that one field only and
in its shape (a text ``input`` or ``arguments``; an ``output`` a text or a list,
a shell output's a list of stdout and stderr chunks; an apply_patch
``operation`` changed in its ``diff`` alone).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

import scoutd
from scoutd import Session

from .conversations import epoch_window

SHOT = "data:image/png;base64," + "iVBORw0KGgo" * 20_000  # a 220 KB screenshot
LONG = "x" * 1_500
# call type -> its output type, paired by ``call_id``
PAIRS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "local_shell_call": "local_shell_call_output",
}
OUTPUTS = {output: call for call, output in PAIRS.items()}
# output type -> the call types it may answer: Codex CLI answers a local shell call
# with a function call output
ANSWERS = {output: {call} for output, call in OUTPUTS.items()}
ANSWERS["function_call_output"].add("local_shell_call")
# what a model turn holds after its reasoning item
TURN_ITEMS = {*PAIRS, "web_search_call", "mcp_call", "message"}
# the items scoutd may rewrite (shorten), and the field each must keep a text (an
# output: or a list; a shell output: a list of chunks; an apply_patch call: its
# operation, of which only the ``diff`` may change)
REWRITABLE = {
    "function_call": "arguments",
    "function_call_output": "output",
    "custom_tool_call": "input",
    "custom_tool_call_output": "output",
    "local_shell_call_output": "output",
    "shell_call_output": "output",
    "apply_patch_call_output": "output",
    "apply_patch_call": "operation",
}


def call_id(item: dict[str, Any]) -> Any:
    """The id pairing an item with its partner: a local shell output typed with
    ``id`` alone names its call with it."""
    if item.get("type") == "local_shell_call_output" and "call_id" not in item:
        return item.get("id")
    return item.get("call_id")


def _rewritten_well(kind: str, value: Any, was: Any) -> bool:
    """Whether a rewritten item's field keeps the shape the API takes."""
    if kind == "shell_call_output":
        return type(value) is list and all(
            type(chunk.get("stdout")) is str and type(chunk.get("stderr")) is str for chunk in value
        )
    if kind == "apply_patch_call":
        original = was.get("operation") if was is not None else None
        return (
            type(value) is dict
            and type(original) is dict
            and type(value.get("diff")) is str
            and {k: v for k, v in value.items() if k != "diff"}
            == {k: v for k, v in original.items() if k != "diff"}
        )
    if kind in ("local_shell_call_output", "apply_patch_call_output"):
        return type(value) is str
    return type(value) is str or (kind.endswith("_output") and type(value) is list)


def _in_turn(item: dict[str, Any]) -> bool:
    return item.get("type") in TURN_ITEMS and item.get("role", "assistant") == "assistant"


def problems(given: list[Any], prepared: list[Any]) -> Counter[tuple[str, str]]:
    """What the API would refuse in ``prepared`` (from ``given``), by kind and id."""
    found: Counter[tuple[str, str]] = Counter()
    given_ids = set(map(id, given))
    given_by_call = {(g.get("type"), call_id(g)): g for g in given}
    calls: dict[str, int] = {}
    for at, item in enumerate(prepared):
        kind = item.get("type")
        if id(item) not in given_ids and kind not in REWRITABLE and item.get("role") != "user":
            found["item changed", str(item.get("id"))] += 1
        elif id(item) not in given_ids and kind in REWRITABLE:
            ident = call_id(item)
            was = given_by_call.get((kind, ident))
            field = REWRITABLE[kind]
            value = item.get(field)
            kept = {k: v for k, v in item.items() if k != field}
            if was is None or kept != {k: v for k, v in was.items() if k != field}:
                found["rewritten item changed beyond its " + field, ident] += 1
            if not _rewritten_well(kind, value, was):
                found["rewritten " + field + " not in its shape", ident] += 1
        if kind in PAIRS:
            calls[item["call_id"]] = at
        elif kind in OUTPUTS:
            call = calls.pop(call_id(item), None)
            if call is None or prepared[call]["type"] not in ANSWERS[kind]:
                found["output without its call", call_id(item)] += 1
                continue
            for between in prepared[call + 1 : at]:
                if id(between) not in given_ids and between.get("role") == "user":
                    found["added text between call and output", call_id(item)] += 1
    for ident in calls:
        found["call without its output", ident] += 1
    kept = {id(item): at for at, item in enumerate(prepared)}
    for at, item in enumerate(given):
        if item.get("type") != "reasoning":
            continue
        turn = []
        for following in given[at + 1 :]:
            if not _in_turn(following):
                break
            turn.append(following)
        staying = [id(x) for x in turn if id(x) in kept]
        if id(item) in kept:
            following_at = kept[id(item)] + 1
            if following_at >= len(prepared) or id(prepared[following_at]) not in {
                *staying,
                *(id(x) for x in prepared if x.get("call_id") in {t.get("call_id") for t in turn}),
            }:
                found["reasoning not followed by its turn", item["id"]] += 1
        elif staying:
            found["item kept without its reasoning", item["id"]] += 1
    return found


def _reasoning(turn: int) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": f"rs_{turn}",
        "summary": [{"type": "summary_text", "text": "thinking"}],
        "encrypted_content": "gAAAAB" * 40,
    }


def _function(turn: int) -> tuple[dict[str, Any], dict[str, Any]]:
    call = {
        "type": "function_call",
        "id": f"fc_{turn}",
        "call_id": f"call_{turn}",
        "name": "shell",
        "arguments": json.dumps({"command": ["ls", str(turn)]}),
        "status": "completed",
    }
    return call, {"type": "function_call_output", "call_id": f"call_{turn}", "output": LONG}


def _custom(turn: int, output: str = "Done!") -> tuple[dict[str, Any], dict[str, Any]]:
    call = {
        "type": "custom_tool_call",
        "id": f"ctc_{turn}",
        "call_id": f"patch_{turn}",
        "name": "apply_patch",
        "input": "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch",
    }
    return call, {"type": "custom_tool_call_output", "call_id": f"patch_{turn}", "output": output}


def _computer(turn: int) -> tuple[dict[str, Any], dict[str, Any]]:
    call = {
        "type": "computer_call",
        "id": f"cu_{turn}",
        "call_id": f"computer_{turn}",
        "action": {"type": "click", "button": "left", "x": 10, "y": 20},
        "pending_safety_checks": [],
        "status": "completed",
    }
    output = {
        "type": "computer_call_output",
        "call_id": f"computer_{turn}",
        "output": {"type": "computer_screenshot", "image_url": SHOT},
    }
    return call, output


def agent(turns: int, other: str, other_first: bool) -> list[Any]:
    """A user message, then per turn reasoning and a function call; every other turn
    also calls a tool of ``other`` in parallel (before the function call or after it)."""
    items: list[Any] = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "fix it"},
                {"type": "input_image", "image_url": SHOT},
            ],
        }
    ]
    for turn in range(turns):
        call, output = _function(turn)
        if turn % 2:
            items += [_reasoning(turn), call, output]
            continue
        other_call, other_output = _custom(turn) if other == "custom" else _computer(turn)
        if other_first:
            items += [_reasoning(turn), other_call, call, other_output, output]
        else:
            items += [_reasoning(turn), call, other_call, output, other_output]
    items.append({"type": "web_search_call", "id": "ws_1", "status": "completed"})
    items.append({"type": "message", "role": "user", "content": "go on"})
    return items


CASES = [(other, first) for other in ("custom", "computer") for first in (False, True)]


@pytest.mark.parametrize(("other", "other_first"), CASES)
def test_a_turn_with_other_calls_keeps_its_reasoning(other: str, other_first: bool) -> None:
    """Dropping a turn's function call keeps its reasoning while a custom or computer
    call of the turn stays (the API refuses an item without its reasoning item)."""
    items = agent(8, other, other_first)
    prepared = scoutd.prepare(items, "shorten_tools_epoch", config=epoch_window(1)).messages
    assert len(prepared) < len(items)  # function pairs were dropped
    assert problems(items, prepared) == Counter()


@pytest.mark.parametrize(("other", "other_first"), CASES)
def test_the_notice_goes_before_the_turn_of_other_calls(other: str, other_first: bool) -> None:
    """The default with a small window: its notice never goes between a computer or
    custom call and its output (nor between a reasoning item and its turn)."""
    items = agent(8, other, other_first)
    prepared = scoutd.prepare(items, format="openai-responses", config={"context_window": 4000})
    assert any(
        str(m.get("content")).startswith("[Context")
        for m in prepared.messages
        if m.get("role") == "user"
    )
    assert problems(items, prepared.messages) == Counter()


def test_a_session_round_by_round_is_valid() -> None:
    """An in-process session, one model call after another, answers as prepare does."""
    items = agent(10, "computer", True)
    bounds = [
        at + 1
        for at, item in enumerate(items)
        if (item.get("type") in OUTPUTS or item.get("role") == "user")
        and (at + 1 == len(items) or items[at + 1].get("type") not in OUTPUTS)
    ]
    config = {"context_window": 4000}
    with Session(format="openai-responses", config=config) as session:
        for bound in bounds:
            given = items[:bound]
            prompt = session.prepare_prompt(given)
            assert problems(given, prompt) == Counter(), bound
            assert (
                prompt == scoutd.prepare(given, format="openai-responses", config=config).messages
            )


def _outputs(output: Any, count: int, kind: str) -> list[Any]:
    items: list[Any] = [{"type": "message", "role": "user", "content": "go"}]
    for turn in range(count):
        call, answer = _function(turn)
        items += [call, answer]
        other_call, other_output = _custom(turn, output) if kind == "custom" else _computer(turn)
        items += [other_call, other_output]
    return items


def test_custom_tool_outputs_are_compacted_like_function_outputs() -> None:
    """40 KB custom tool outputs (12 of them, about 120,000 tokens) and a 20,000-token
    window: they are shortened or dropped with their calls until the prompt fits.
    Before, custom pairs passed through whole: counted, but never compacted."""
    items = _outputs("z" * 40_000, 12, "custom")
    prepared = scoutd.prepare(items, format="openai-responses", config={"context_window": 20_000})
    assert problems(items, prepared.messages) == Counter()
    custom = [m for m in prepared.messages if m.get("type") == "custom_tool_call_output"]
    whole = [m for m in custom if m["output"] == "z" * 40_000]
    assert len(custom) > len(whole)  # some were shortened, or dropped with their call
    assert len(json.dumps(prepared.messages)) / 4 < 20_000


@pytest.mark.parametrize("output", ["done", [{"type": "input_text", "text": "y" * 3_000}]])
def test_a_long_custom_input_is_shortened_and_stays_a_custom_call(output: Any) -> None:
    """A patch of 6,000 characters in an old custom call: its ``input`` is shortened
    as a long argument is, and the call stays a ``custom_tool_call`` with a text
    ``input``; an output given as a list of parts comes back a list."""
    items: list[Any] = [{"type": "message", "role": "user", "content": "go"}]
    for turn in range(40):
        call, answer = _custom(turn, output)
        items += [{**call, "input": "+line\n" * 1_000}, answer]
    prepared = scoutd.prepare(items, "shorten_tools_epoch", config=epoch_window(4)).messages
    assert problems(items, prepared) == Counter()
    calls = [m for m in prepared if m.get("type") == "custom_tool_call"]
    assert any(len(m["input"]) < 6_000 for m in calls)
    assert all(type(m["input"]) is str for m in calls)
    outputs = [m for m in prepared if m.get("type") == "custom_tool_call_output"]
    assert all(type(m["output"]) is type(output) for m in outputs)


def test_a_screenshot_counts_at_the_fixed_image_cost() -> None:
    """Three 220 KB screenshots count as images (about 1,500 tokens each), not as
    their base64 text: a 12,000-token window holds them and nothing is compacted;
    twelve of them do not fit it, and function pairs go."""
    few = _outputs(None, 3, "computer")
    assert (
        scoutd.prepare(few, format="openai-responses", config={"context_window": 12_000}).messages
        == few
    )
    many = _outputs(None, 12, "computer")
    prepared = scoutd.prepare(many, format="openai-responses", config={"context_window": 12_000})
    assert len(prepared.messages) < len(many)
    assert problems(many, prepared.messages) == Counter()


def test_hostile_values_in_other_items_pass_through() -> None:
    """A lone surrogate, an odd ``output``, a ``type`` that is a list in a custom or
    computer item: no exception, the items come back as they were."""
    odd = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "custom_tool_call", "call_id": "c", "name": "x", "input": "\ud800"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": {"type": "image"}},
        {"type": "computer_call_output", "call_id": "d", "output": [1, None, "\udfff"]},
        {"type": ["not", "hashable"]},
    ]
    for strategy in (None, "none", "shorten_tools_epoch"):
        prepared = scoutd.prepare(odd, strategy, format="openai-responses")
        assert prepared.messages == odd


def test_the_notice_never_comes_between_calls_still_waiting_and_their_outputs() -> None:
    """A conversation whose last model turn waits for its outputs, every pair before it
    dropped: the notice goes before that turn (its reasoning first), never after the
    call, where the outputs to come must follow it."""
    call, output = _function(0)
    waiting, _ = _function(1)
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "go"},
        *(_reasoning(0), call, {**output, "output": "z" * 6_000}),
        *(_reasoning(5), *_computer(5)),  # a screenshot: passes through, fills the window
        *(_reasoning(1), {"type": "message", "role": "assistant", "content": "next"}, waiting),
    ]
    prepared = scoutd.prepare(items, format="openai-responses", config={"context_window": 1500})
    assert call not in prepared.messages  # the pair went: the notice has no place before one
    notices = [i for i, m in enumerate(prepared.messages) if "[Context" in json.dumps(m)]
    assert len(notices) == 1
    assert prepared.messages[notices[0] + 1 :] == items[-3:]


def test_a_custom_item_without_its_partner_is_malformed_as_a_function_one_is() -> None:
    """An output of no call, a call whose ``input`` is not a text: passed through and
    counted as malformed, custom and function items alike (custom ones went uncounted)."""
    for custom in (False, True):
        call, output = _custom(0) if custom else _function(0)
        field = "input" if custom else "arguments"
        items: list[Any] = [
            {"type": "message", "role": "user", "content": "go"},
            {**output, "call_id": "nobody"},
            {**call, "call_id": "odd", field: 7},
        ]
        prepared = scoutd.prepare(items, format="openai-responses")
        assert prepared.messages == items
        assert prepared.report[-1].malformed == 2, custom


BIG = "d" * 60_000  # about 15,000 tokens
TOOLS = [{"type": "function", "name": f"tool_{k}", "description": "d" * 300} for k in range(200)]
# Items the provider defines that carry their weight outside any ``content``
SIZED = {
    "tool_search": [
        {"type": "tool_search_call", "id": "ts_1", "call_id": "ts_1", "status": "completed"},
        {"type": "tool_search_output", "id": "tso_1", "call_id": "ts_1", "tools": TOOLS},
    ],
    "program": [
        {"type": "program", "id": "p_1", "call_id": "p_1", "code": "x", "fingerprint": "f"},
        {"type": "program_output", "id": "po_1", "call_id": "p_1", "result": BIG},
    ],
    "additional_tools": [{"type": "additional_tools", "role": "developer", "tools": TOOLS}],
}


@pytest.mark.parametrize("kind", SIZED)
def test_items_outside_content_count_for_their_size(kind: str) -> None:
    """A tool search's output (the tools it found), a program's output, tools added
    mid-run: sent, so counted. With ten function pairs of 1,500 characters they pass
    a 12,000-token window: pairs go. The last two counted for nothing, and the
    prompt went out whole (a tool search's output was counted as any other item)."""
    items: list[Any] = [{"type": "message", "role": "user", "content": "go"}, *SIZED[kind]]
    for turn in range(10):
        items += _function(turn)
    prepared = scoutd.prepare(items, format="openai-responses", config={"context_window": 12_000})
    assert len(prepared.messages) < len(items)
    assert all(item in prepared.messages for item in SIZED[kind])  # they pass through
    assert problems(items, prepared.messages) == Counter()
