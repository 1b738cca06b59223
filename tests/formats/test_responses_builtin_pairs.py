"""Responses shell, local shell, apply_patch and computer pairs are compacted (docs/FORMATS.md).

The shapes are the API's (openai.types.responses.response_input_item_param): a
``local_shell_call`` answered by a ``local_shell_call_output`` (its ``output`` a
text; it names its call by ``call_id``, or by ``id`` alone as typed) or, as Codex
CLI sends it, by a ``function_call_output``; a ``shell_call`` by a
``shell_call_output`` (a list of ``stdout`` / ``stderr`` / ``outcome`` chunks); an
``apply_patch_call`` (a ``diff`` in its ``operation``) by an
``apply_patch_call_output`` (an optional log text); a ``computer_call`` by a
``computer_call_output`` (a screenshot). Before, all of them passed through
whole, never shortened nor dropped, and no recall handle named their outputs.

Each kind, over ``shorten_tools`` (``full_tool_outputs`` 2, ``max_tool_calls`` 4:
the newest pair after the last user message kept whole, the next three
shortened, older ones dropped): an old output is
shortened in place, its item keeping its type and fields (a screenshot never);
older pairs go call and output together; the newest pair comes back as the very
objects; recall gives back each output's exact text; the input is not changed.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest

import scoutd

from .drawn import recalled_text
from .test_responses_items_pairing import call_id, problems

KINDS = [
    "local_shell",
    "local_shell_by_id",
    "codex_local_shell",
    "shell",
    "apply_patch",
    "computer",
]
SHORTENED = [kind for kind in KINDS if kind != "computer"]
SHOT = "data:image/png;base64," + "iVBORw0KGgo" * 2_000
FORMAT = "openai-responses"
CONFIG: dict[str, Any] = {"max_tool_calls": 4, "full_tool_outputs": 2, "max_tool_chars": 0}


def text(n: int) -> str:
    """Output ``n``'s long text, its own."""
    return f"output {n}\n" + "".join(f"line {n}.{k}: value_{n}_{k}\n" for k in range(60))


def pair(kind: str, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Call and output ``n`` of ``kind``, as an agent sends them."""
    ident = f"call_{n}"
    if kind in ("local_shell", "local_shell_by_id", "codex_local_shell"):
        call = {
            "type": "local_shell_call",
            "id": f"lsh_{n}",
            "call_id": ident,
            "status": "completed",
            "action": {"type": "exec", "command": ["cat", f"f{n}.py"], "env": {}},
        }
        if kind == "codex_local_shell":
            return call, {"type": "function_call_output", "call_id": ident, "output": text(n)}
        if kind == "local_shell_by_id":
            return call, {"type": "local_shell_call_output", "id": ident, "output": text(n)}
        output: dict[str, Any] = {"type": "local_shell_call_output", "id": f"lso_{n}"}
        return call, {**output, "call_id": ident, "output": text(n)}
    if kind == "shell":
        call = {
            "type": "shell_call",
            "id": f"sh_{n}",
            "call_id": ident,
            "action": {"commands": [f"cat f{n}.py", "false"], "timeout_ms": 1000},
            "status": "completed",
        }
        chunks = [
            {"stdout": text(n), "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
            {"stdout": "", "stderr": f"failed {n}", "outcome": {"type": "exit", "exit_code": 1}},
        ]
        output = {"type": "shell_call_output", "call_id": ident, "max_output_length": 9_000}
        return call, {**output, "output": chunks}
    if kind == "apply_patch":
        operation = {"type": "update_file", "path": f"src/f{n}.py", "diff": f"+{n}\n" * 150}
        call = {
            "type": "apply_patch_call",
            "call_id": ident,
            "status": "completed",
            "operation": operation,
        }
        output = {"type": "apply_patch_call_output", "call_id": ident, "status": "completed"}
        return call, {**output, "output": text(n)}
    call = {
        "type": "computer_call",
        "id": f"cu_{n}",
        "call_id": ident,
        "action": {"type": "click", "button": "left", "x": n, "y": 2},
        "pending_safety_checks": [],
        "status": "completed",
    }
    screenshot = {"type": "computer_screenshot", "image_url": SHOT}
    return call, {"type": "computer_call_output", "call_id": ident, "output": screenshot}


def conversation(kind: str, pairs: int = 7) -> list[Any]:
    """A task, ``pairs`` pairs of ``kind``, then "go on" and one more pair."""
    items: list[Any] = [{"type": "message", "role": "user", "content": "fix the bug"}]
    for n in range(1, pairs + 1):
        items += pair(kind, n)
    items.append({"type": "message", "role": "user", "content": "go on"})
    items += pair(kind, pairs + 1)
    return items


def _prepared(items: list[Any], recall: bool = False) -> list[Any]:
    snapshot = copy.deepcopy(items)
    config = {**CONFIG, "recall": recall}
    prepared = scoutd.prepare(items, "shorten_tools", format=FORMAT, config=config)
    assert items == snapshot  # never changed in place
    assert problems(items, prepared.messages) == Counter()
    assert prepared.report[-1].malformed == 0
    return prepared.messages


def _outputs(items: list[Any]) -> list[Any]:
    return [item for item in items if str(item.get("type")).endswith("_output")]


@pytest.mark.parametrize("kind", SHORTENED)
def test_an_old_output_is_shortened_in_place(kind: str) -> None:
    """Outputs 5-7 come back shortened, as items of their type with the same fields (a
    shell output one chunk, the last one's outcome kept); their calls stay. Failed
    before: every output came back whole."""
    items = conversation(kind)
    prepared = _prepared(items)
    given = {call_id(item): item for item in _outputs(items)}
    shortened = [item for item in _outputs(prepared) if item is not given[call_id(item)]]
    assert [call_id(item) for item in shortened] == ["call_5", "call_6", "call_7"]
    for item in shortened:
        was = given[call_id(item)]
        assert item.keys() == was.keys()
        assert {k: v for k, v in item.items() if k != "output"} == {
            k: v for k, v in was.items() if k != "output"
        }
        shown = recalled_text(item)
        assert shown is not None and shown.startswith("Truncated (")
        assert len(shown) < len(recalled_text(was) or "")
        if kind == "shell":
            assert item["output"] == [
                {"stdout": shown, "stderr": "", "outcome": {"type": "exit", "exit_code": 1}}
            ]
        else:
            assert type(item["output"]) is str


@pytest.mark.parametrize("kind", KINDS)
def test_older_pairs_go_call_and_output_together(kind: str) -> None:
    """Pairs 1-4 are dropped whole, pairs 5-7 stay (shortened or not), and the newest
    pair comes back as the very objects. Failed before: nothing was dropped."""
    items = conversation(kind)
    prepared = _prepared(items)
    ids = [call_id(item) for item in prepared if item.get("type") != "message"]
    assert ids == [f"call_{n}" for n in (5, 5, 6, 6, 7, 7, 8, 8)]
    assert prepared[-2] is items[-2] and prepared[-1] is items[-1]


def test_a_long_patch_is_shortened_in_its_diff_alone() -> None:
    """An old apply_patch call keeps its path and operation type; its 450-character
    ``diff`` is shortened as a long argument is. Failed before: kept whole."""
    items = conversation("apply_patch")
    prepared = _prepared(items)
    calls = {item["call_id"]: item for item in items if item["type"] == "apply_patch_call"}
    changed = [
        item for item in prepared if item.get("type") == "apply_patch_call"
    ]  # the calls that stay
    rewritten = [item for item in changed if item is not calls[item["call_id"]]]
    assert rewritten
    for item in rewritten:
        was = calls[item["call_id"]]
        assert {k: v for k, v in item.items() if k != "operation"} == {
            k: v for k, v in was.items() if k != "operation"
        }
        operation = item["operation"]
        assert operation["path"] == was["operation"]["path"]
        assert operation["type"] == "update_file"
        assert operation["diff"].startswith(f"Truncated ({len(was['operation']['diff'])}): ")


def test_a_screenshot_is_never_changed() -> None:
    """A computer pair stays as the very objects or goes whole: a screenshot cannot be
    shortened, and a ``computer_call_output`` must hold one."""
    items = conversation("computer", 12)
    for strategy in (None, "shorten_tools", "shorten_tools_epoch"):
        config = {"context_window": 20_000} if strategy is None else CONFIG
        if strategy == "shorten_tools_epoch":
            config = {
                "epoch_tool_call_threshold": 2,
                "epoch_full_tool_calls": 1,
                "epoch_compacted_tool_calls": 2,
                "epoch_size": 1,
            }
        prepared = scoutd.prepare(items, strategy, format=FORMAT, config=config).messages
        given = {id(item) for item in items}
        assert all(id(item) in given for item in prepared if item.get("type") != "message")
        assert len(prepared) < len(items), strategy
        assert problems(items, prepared) == Counter()


@pytest.mark.parametrize("kind", KINDS)
def test_recall_gives_back_each_output_exactly(kind: str) -> None:
    """With recall on, every handle names its output, shortened, dropped or whole, and
    gives back its exact text; a shortened output's marker carries its handle. Failed
    before: these outputs had no handle (``no output #1``)."""
    items = conversation(kind)
    prepared = _prepared(items, recall=True)
    expected = [recalled_text(item) for item in _outputs(items)]
    assert all(type(text) is str for text in expected)
    with scoutd.Session(format=FORMAT, strategies="shorten_tools", config=CONFIG) as session:
        prompt = session.prepare_prompt(items)
        assert (
            prompt == scoutd.prepare(items, "shorten_tools", format=FORMAT, config=CONFIG).messages
        )
        for handle, text_ in enumerate(expected, 1):
            assert session.recall(handle) == text_, handle
    if kind != "computer":
        markers = [recalled_text(item) for item in _outputs(prepared)]
        assert sum(f"recall #{n}):" in str(m) for n in (5, 6, 7) for m in markers) == 3


MALFORMED: list[tuple[str, int, Any]] = [
    ("shell", 1, lambda o: {**o, "output": "not a list of chunks"}),
    ("shell", 1, lambda o: {**o, "output": [{"stdout": 7, "stderr": ""}]}),
    ("local_shell", 1, lambda o: {**o, "output": ["not", "a", "text"]}),
    ("computer", 1, lambda o: {**o, "output": [{"type": "computer_screenshot"}]}),
    ("apply_patch", 1, lambda o: {**o, "output": {"log": "odd"}}),
    ("shell", 2, lambda o: {**o, "type": "local_shell_call_output", "output": "x"}),
]


@pytest.mark.parametrize(("kind", "count", "spoil"), MALFORMED)
def test_an_output_out_of_its_shape_passes_through_as_malformed(
    kind: str, count: int, spoil: Any
) -> None:
    """An output that breaks its kind's shape, or answers a call of another kind, is
    passed through with its call, untouched, and counted as malformed."""
    call, output = pair(kind, 1)
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "go"},
        call,
        spoil(output),
        {"type": "message", "role": "user", "content": "go on"},
    ]
    for strategy in (None, "shorten_tools"):
        prepared = scoutd.prepare(items, strategy, format=FORMAT, config=CONFIG)
        assert prepared.messages == items
        assert prepared.report[-1].malformed == count, strategy


def test_a_local_shell_call_answered_by_a_function_output_counts_its_output() -> None:
    """Codex CLI answers ``local_shell_call`` with ``function_call_output``: the output is
    a tool output the strategies see (before, an output of no call: malformed, and the
    40 KB outputs never compacted)."""
    items = conversation("codex_local_shell")
    prepared = scoutd.prepare(items, format=FORMAT, config={"context_window": 2_000})
    assert prepared.report[-1].malformed == 0
    assert len(json.dumps(prepared.messages)) < len(json.dumps(items)) / 2
    assert problems(items, prepared.messages) == Counter()
