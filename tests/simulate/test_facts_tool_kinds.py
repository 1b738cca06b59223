"""The hidden-fact measure and the replay on Responses built-in tool kinds and Chat custom calls.

Runs are built by hand, or drawn from a small grammar, out of the call kinds
other than function calls: a ``custom_tool_call``, a ``local_shell_call``
(answered by its own output or, as Codex CLI does, by a
``function_call_output``), a ``shell_call``, an ``apply_patch_call`` and a
``computer_call``, each with its output. Every tool output holds fresh fact
tokens, and each call names some of the earlier ones; the plain oracle
(docs/ECONOMY.md, "What the prompts hide") says which are needed: those in an
earlier output that no earlier action named, a screenshot holding none. The
replay must call the model before each call, bill every item as sent (a
screenshot at the fixed image cost), hide nothing under ``none`` and every
needed fact when every output is masked; ``--origins`` must classify a shell
call by its command and an apply_patch call as an edit of its path.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.formats import scout_view
from scoutd.simulate import PeerSettings, Settings, main
from scoutd.simulate.facts import FactTally, RunFacts
from scoutd.simulate.origins import Origins, OutputInfo, run_outputs, tool_kind
from scoutd.simulate.provider import provider_facts, provider_rounds, replay_in_format
from scoutd.simulate.replay import run_facts, run_strategy
from scoutd.simulate.runs import replay_runs
from scoutd.simulate.texts import ACTION, message_parts
from scoutd.simulate.workload import Workload
from scoutd.strategies.media import MEDIA_CHARS
from scoutd.strategies.tool_kinds import EDIT, OTHER, READ, SEARCH, TEST

RESPONSES = "openai-responses"
KINDS = ("custom", "local_shell", "codex_shell", "shell", "apply_patch", "computer")
MASKED = Settings(peers=PeerSettings(mask_n=0))


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def screenshot(call_id: str, data: str) -> dict[str, Any]:
    image = {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{data}"}
    return {"type": "computer_call_output", "call_id": call_id, "output": image}


def pair(kind: str, call_id: str, said: str, shown: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A call of ``kind`` whose action says ``said``, and its output showing ``shown``."""
    call: dict[str, Any]
    if kind == "custom":
        call = {"type": "custom_tool_call", "call_id": call_id, "name": "run_sql", "input": said}
        return call, {"type": "custom_tool_call_output", "call_id": call_id, "output": shown}
    if kind in ("local_shell", "codex_shell"):
        action = {"type": "exec", "command": ["bash", "-lc", f"echo {said}"], "env": {}}
        call = {"type": "local_shell_call", "call_id": call_id, "action": action}
        answer = "function_call_output" if kind == "codex_shell" else "local_shell_call_output"
        return call, {"type": answer, "call_id": call_id, "output": shown}
    if kind == "shell":
        call = {"type": "shell_call", "call_id": call_id, "action": {"commands": [f"echo {said}"]}}
        words = shown.split(" ")
        chunks = [
            {"stdout": " ".join(words[::2]), "stderr": "", "outcome": {"type": "timeout"}},
            {"stdout": "", "stderr": " ".join(words[1::2]), "outcome": {"type": "exit"}},
        ]
        return call, {"type": "shell_call_output", "call_id": call_id, "output": chunks}
    if kind == "apply_patch":
        operation = {"type": "update_file", "path": "a.py", "diff": f"@@\n-x\n+{said}"}
        call = {"type": "apply_patch_call", "call_id": call_id, "operation": operation}
        output = {"type": "apply_patch_call_output", "call_id": call_id, "output": shown}
        return call, {**output, "status": "completed"}
    action = {"type": "type", "text": said}
    call = {"type": "computer_call", "call_id": call_id, "action": action}
    return call, screenshot(call_id, shown.replace(" ", "+"))  # base64 may hold "+"


@dataclass
class Drawn:
    """A run drawn from the grammar, with the oracle's answers."""

    messages: list[Any] = field(default_factory=list)
    needed: dict[int, set[str]] = field(default_factory=dict)  # call's prefix end -> facts
    outputs: int = 0


@st.composite
def runs(draw: st.DrawFn) -> Drawn:
    """Turns of one or two calls, then their outputs; each output shows two fresh
    tokens, each call names some tokens shown before (a screenshot's too)."""
    run = Drawn(messages=[user("fix it")])
    shown: list[str] = []  # tokens in outputs so far, screenshots' included
    readable: set[str] = set()  # tokens an output holds as text (not a screenshot)
    named: set[str] = set()  # tokens an earlier action named
    for turn in range(draw(st.integers(1, 7))):
        calls, outputs, said_now = [], [], set()
        for slot in range(draw(st.integers(1, 2))):
            kind = draw(st.sampled_from(KINDS))
            said = draw(st.lists(st.sampled_from(shown), max_size=3)) if shown else []
            ident = f"c{turn}_{slot}"
            fresh = [f"tok_{turn}{slot}a", f"tok_{turn}{slot}b"]
            call, output = pair(kind, ident, " ".join(said) or "go", " ".join(fresh))
            calls.append(call)
            outputs.append((output, kind, fresh))
            said_now |= set(said)
        run.needed[len(run.messages)] = (said_now & readable) - named
        named |= said_now
        run.messages += calls
        for output, kind, fresh in outputs:
            run.messages.append(output)
            run.outputs += 1
            shown += fresh
            if kind != "computer":
                readable |= set(fresh)
    return run


@settings(max_examples=80, deadline=None, derandomize=True)
@given(runs())
def test_every_kind_is_read_replayed_and_measured(run: Drawn) -> None:
    """The oracle's needed facts at every call; ``none`` hides none of them, masking
    every output hides them all; the model is called before each turn and at the end."""
    messages = run.messages
    at_calls = RunFacts(messages, RESPONSES, [*run.needed, len(messages)])
    assert {c.end: set(c.needed) for c in at_calls.calls} == run.needed
    assert provider_rounds(messages) == [*run.needed, len(messages)]
    facts = provider_facts(messages, RESPONSES)
    whole = replay_in_format(messages, RESPONSES, "none", Settings(), facts=facts)
    masked = replay_in_format(messages, RESPONSES, "mask_last_n", MASKED, facts=facts)
    needed = sum(map(len, run.needed.values()))
    assert whole.facts == FactTally(calls=len(run.needed), needed=needed)
    assert masked.facts is not None
    assert masked.facts.hidden == masked.facts.needed == needed
    assert masked.facts.calls_hiding == sum(1 for facts in run.needed.values() if facts)
    assert whole.rounds == len(run.needed) + 1
    # the scout-view replay (--chat) reads the same facts; its rounds end after outputs
    view = Workload(scout_view(messages), "drawn", {})
    indexed = run_facts(view)
    assert [set(c.needed) for c in indexed.calls] == [run.needed[e] for e in sorted(run.needed)][1:]
    for name, settings_, hidden in (("none", Settings(), 0), ("mask_last_n", MASKED, needed)):
        found = run_strategy(view, name, settings_, keep_series=False, facts=indexed).facts
        assert found is not None and (found.needed, found.hidden) == (needed, hidden)
    COUNTS["runs with needed facts"] += needed > 0
    COUNTS["needed facts"] += needed


COUNTS = {"runs with needed facts": 0, "needed facts": 0}


def test_the_property_reached_runs_that_need_facts() -> None:
    """The drawn runs were not trivial (run after the property, in file order)."""
    if COUNTS["needed facts"] == 0:
        test_every_kind_is_read_replayed_and_measured()
    assert COUNTS["runs with needed facts"] >= 30
    assert COUNTS["needed facts"] >= 100


def codex_run() -> list[Any]:
    """A hand-built run: a read, a search, a test run, an edit, a custom and a computer call."""
    argv = ["bash", "-lc", "cat src/app/loader.py"]
    return [
        user("the loader breaks"),
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "look first"}]},
        {"type": "local_shell_call", "call_id": "r1", "action": {"type": "exec", "command": argv}},
        {"type": "function_call_output", "call_id": "r1", "output": "def load_settings(): ..."},
        {"type": "shell_call", "call_id": "s1", "action": {"commands": ["rg -n cfg_value src"]}},
        {
            "type": "shell_call_output",
            "call_id": "s1",
            "output": [{"stdout": "src/app/util.py:87", "stderr": "", "outcome": {"type": "exit"}}],
        },
        {
            "type": "shell_call",
            "call_id": "t1",
            "action": {"commands": ["cd /repo", "python -m pytest tests -q"]},
        },
        {
            "type": "shell_call_output",
            "call_id": "t1",
            "output": [{"stdout": "", "stderr": "FAILED test_load_x", "outcome": {"type": "exit"}}],
        },
        {
            "type": "apply_patch_call",
            "call_id": "p1",
            "operation": {
                "type": "update_file",
                "path": "src/app/loader.py",
                "diff": "@@\n-# see docs/guides/configuration_reference.md\n+strict = True",
            },
        },
        {"type": "apply_patch_call_output", "call_id": "p1", "output": "patched, backup b_4711x"},
        {"type": "custom_tool_call", "call_id": "u1", "name": "run_sql", "input": "select 1"},
        {"type": "custom_tool_call_output", "call_id": "u1", "output": "row_count_42"},
        {"type": "computer_call", "call_id": "k1", "action": {"type": "screenshot"}},
        screenshot("k1", "shot_data_99"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "?"}]},
        user("go on"),
        {
            "type": "custom_tool_call",
            "call_id": "u2",
            "name": "run_sql",
            "input": "use load_settings, src/app/util.py:87, test_load_x, b_4711x, row_count_42",
        },
        {"type": "custom_tool_call_output", "call_id": "u2", "output": "ok"},
    ]


def test_origins_classify_each_kind_by_what_it_does() -> None:
    facts = provider_facts(codex_run(), RESPONSES)
    assert run_outputs(facts) == [
        OutputInfo(READ, "src/app/loader.py"),  # bash -lc 'cat ...': a read, not a script
        OutputInfo(SEARCH, None),
        OutputInfo(TEST, None),
        OutputInfo(EDIT, "src/app/loader.py"),  # the operation's path, not the diff's
        OutputInfo(OTHER, None),
        OutputInfo(OTHER, None),  # a screenshot
        OutputInfo(OTHER, None),
    ]
    last = facts.calls[-1]
    assert set(last.needed) == {
        "load_settings",
        "src/app/util.py:87",
        "test_load_x",
        "b_4711x",
        "row_count_42",
    }
    # Codex CLI's function-call shell sends an argv too
    argv = json.dumps({"command": ["bash", "-lc", "sed -n 1,20p a.py"], "workdir": "/r"})
    assert tool_kind("shell", argv) == READ
    assert tool_kind("shell", json.dumps({"command": ["rg", "-n", "x"]})) == SEARCH
    origins = Origins("mask_last_n")
    origins.run(facts)
    assert origins.needed["tool"] == {READ: 1, SEARCH: 1, TEST: 1, EDIT: 1, OTHER: 1}
    assert origins.needed["read"]["edited since"] == 1  # load_settings: read, then patched


def test_the_bill_counts_every_item_and_a_screenshot_at_the_image_cost() -> None:
    """The last round's prompt is every item, its JSON text as sent, a screenshot a
    text of the fixed image cost whatever the size of its data."""
    small, large = codex_run(), codex_run()
    large[13] = screenshot("k1", "A" * 400_000)
    sent = [
        {**m, "output": "m" * MEDIA_CHARS} if m["type"] == "computer_call_output" else m
        for m in small
    ]
    chars = sum(len(json.dumps(m, sort_keys=True, separators=(",", ":"))) + 1 for m in sent)
    results = [replay_in_format(run, RESPONSES, "none", Settings()) for run in (small, large)]
    assert results[0].peak_prompt_tokens == results[1].peak_prompt_tokens == math.ceil(chars / 4)
    assert results[0].billed == results[1].billed
    # an image the user gives, or a function's output holds, alike
    for position, key in ((0, "content"), (3, "output")):
        for run in (small, large):
            image = {"type": "input_image", "image_url": "data:image/png;base64,"}
            image["image_url"] += "B" * (10 if run is small else 300_000)
            run[position] = {**run[position], key: [{"type": "input_text", "text": "a"}, image]}
    again = [replay_in_format(run, RESPONSES, "none", Settings()) for run in (small, large)]
    assert again[0].billed == again[1].billed > results[0].billed
    assert provider_rounds(small) == [1, 4, 6, 8, 10, 12, 14, 16, 18]  # before each call
    assert results[0].rounds == 9


def test_chat_custom_calls_are_read() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "custom", "custom": {"name": "grep", "input": "rg parse_cfg"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "src/cfg_module.py:12"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "b",
                    "type": "custom",
                    "custom": {
                        "name": "apply_patch",
                        "input": "*** Update File: src/cfg_module.py",
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "done"},
    ]
    parts = [p for m in messages for p in message_parts(m, "openai-chat") if p.kind == ACTION]
    assert [(p.text, p.tool) for p in parts if p.call_id] == [
        ("rg parse_cfg", "grep"),
        ("*** Update File: src/cfg_module.py", "apply_patch"),
    ]
    facts = RunFacts(messages, "openai-chat", provider_rounds(messages))
    assert [set(c.needed) for c in facts.calls] == [set(), {"src/cfg_module.py"}]
    assert run_outputs(facts) == [OutputInfo(SEARCH, None), OutputInfo(EDIT, "src/cfg_module.py")]


def test_a_runs_file_of_these_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "codex.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        for _ in range(2):
            handle.write(json.dumps({"messages": codex_run()}) + "\n")
    origins = Origins("mask_last_n")
    rows = replay_runs(str(path), ["none", "mask_last_n"], MASKED, "auto", origins=origins)
    assert [(row.format, row.outputs) for row in rows] == [(RESPONSES, 7)] * 2
    for row in rows:
        assert row.strategies["none"]["facts"].hidden == 0
        assert row.strategies["mask_last_n"]["facts"].hidden == 5
    assert origins.hidden["tool"] == {READ: 2, SEARCH: 2, TEST: 2, EDIT: 2, OTHER: 2}
    given = ["--runs", str(path), "--strategies", "none,mask_last_n", "--mask-n", "0"]
    assert main([*given, "--origins", "mask_last_n"]) == 0
    out = capsys.readouterr().out
    assert "hidden facts of mask_last_n, by origin (10 hidden)" in out
    assert [line.split()[-4:] for line in out.splitlines() if line.startswith("test run")] == [
        ["2", "2", "20.0%", "100.0%"]
    ]


def test_a_hosted_shell_output_inside_its_response_is_no_model_call() -> None:
    """The provider ran the shell inside its response (an output with an ``id`` of its
    own, the response's calls after it): the model was called once, before it."""
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}

    def shell(call_id: str, command: str) -> dict[str, Any]:
        action = {"commands": [command]}
        return {"type": "shell_call", "id": f"sh_{call_id}", "call_id": call_id, "action": action}

    def output(call_id: str, text: str, **more: str) -> dict[str, Any]:
        chunk = {"stdout": text, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
        return {"type": "shell_call_output", "call_id": call_id, "output": [chunk], **more}

    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "x"}],
    }
    hosted = [
        user("look"),
        reasoning,
        shell("a", "ls src"),
        output("a", "cfg_loader.py", id="sho_a"),  # written by the provider
        shell("b", "cat src/cfg_loader.py"),
        output("b", "def parse_cfg(): ..."),  # the client's answer
        answer,
    ]
    assert provider_rounds(hosted) == [1, 6, 7]
    # the same items answered by the client: a model call before each call
    client = [*hosted[:3], output("a", "cfg_loader.py"), *hosted[4:]]
    assert provider_rounds(client) == [1, 4, 6, 7]
    # without a reasoning item to keep the turn, the adapter takes it as the client's
    assert provider_rounds([hosted[0], *hosted[2:]]) == [1, 3, 5, 6]
    none = replay_in_format(hosted, RESPONSES, "none", Settings())
    assert none.rounds == 3


def test_a_responses_chat_is_replayed_in_its_scout_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--chat`` replays the scout view, which keeps the typed ``message`` and
    ``reasoning`` items of a Responses chat: prepared as scoutd's roles, not taken
    for a mix of formats."""
    path = tmp_path / "codex.json"
    path.write_text(json.dumps(codex_run()))
    given = ["--chat", str(path), "--strategies", "none,shorten_tools_cost_aware", "--json"]
    assert main(given) == 0
    rows = {row["strategy"]: row for row in json.loads(capsys.readouterr().out)["strategies"]}
    assert rows["none"]["retention"]["outputs"] == 7
