"""The OpenAI Agents SDK's built-in tools through scoutd's input filter, end to end.

The SDK's ``Runner`` runs the scripted model and the fake tools of
``test_openai_agents_builtin_tools_support.py`` (a function tool, local shell,
shell, apply_patch, computer and a freeform custom tool) and builds the items;
what the model receives is checked against what the SDK holds: the shapes the
SDK writes are the ones the Responses adapter pairs (old pairs shortened or
dropped, in their shapes; a screenshot never changed), every request is one
the API takes, and it is what ``scoutd.prepare`` makes of the history, in
process and through a real daemon, with ``run``, ``run_streamed`` and
``run_sync``. Recall and abort: ``test_openai_agents_builtin_tools_recall.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")

import scoutd
from scoutd.integrations.openai_agents import ScoutdInputFilter
from tests.integrations.replay import CONFIG, RECALL_CONFIG, Events
from tests.integrations.test_openai_agents_builtin_tools_support import (
    CALL_OF,
    FINAL,
    FORMAT,
    OUTPUT_OF,
    SCREENSHOT,
    TURNS,
    Record,
    Run,
    ScriptedModel,
    run_async,
    run_sync,
)
from tests.support.daemon import Daemon

pytestmark = pytest.mark.anyio


def _type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None


def check_valid(request: list[Any]) -> None:
    """The request is one the Responses API takes: every output answers a call of its kind
    made before it, every call is answered once, a reasoning item is followed by an item
    of its own turn."""
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for position, item in enumerate(request):
        kind = _type(item)
        if kind in OUTPUT_OF:
            assert item["call_id"] not in calls, f"call {item['call_id']} made twice"
            calls[item["call_id"]] = kind
        elif kind in CALL_OF:
            call_id = item["call_id"]
            assert calls.get(call_id) == CALL_OF[kind], f"{kind} {call_id} answers no call"
            assert call_id not in answered, f"{call_id} answered twice"
            answered.add(call_id)
        elif kind == "reasoning":
            following = request[position + 1] if position + 1 < len(request) else None
            assert _type(following) in OUTPUT_OF or (
                isinstance(following, dict) and following.get("role") == "assistant"
            ), f"reasoning {item['id']} left without its turn"
    assert answered == set(calls), f"unanswered calls: {set(calls) - answered}"


def turn_reasoning(history: list[Any]) -> dict[str, str]:
    """Each call id of ``history`` -> the id of the reasoning item that opened its turn."""
    opened: dict[str, str] = {}
    current: str | None = None
    for item in history:
        kind = _type(item)
        if kind == "reasoning":
            current = item["id"]
        elif kind in OUTPUT_OF:
            if current is not None:
                opened[item["call_id"]] = current
        else:
            current = None
    return opened


@dataclass
class Fates:
    """How often a pair of each kind reached the model whole, shortened, or not at all."""

    whole: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTPUT_OF, 0))
    shortened: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTPUT_OF, 0))
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTPUT_OF, 0))
    shortened_calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTPUT_OF, 0))


def check_request(history: list[Any], prompt: list[Any], fates: Fates) -> None:
    """What the model got from ``history``: valid; each pair whole, shortened in its shape
    (a screenshot never) or dropped with its call; reasoning with its turn; the newest
    model turn and its outputs as the SDK holds them."""
    check_valid(prompt)
    calls = {item["call_id"]: item for item in history if _type(item) in OUTPUT_OF}
    outputs = {item["call_id"]: item for item in history if _type(item) in CALL_OF}
    sent = {
        (_type(i), i.get("call_id")): i
        for i in prompt
        if _type(i) in OUTPUT_OF or _type(i) in CALL_OF
    }
    for call_id, call in calls.items():
        kind = call["type"]
        output = outputs[call_id]
        got_call = sent.get((kind, call_id))
        got_output = sent.get((OUTPUT_OF[kind], call_id))
        if got_call is None:
            assert got_output is None
            fates.dropped[kind] += 1
            continue
        assert got_output is not None
        if got_call != call:
            fates.shortened_calls[kind] += 1
            assert kind == "apply_patch_call", f"a {kind} changed: {got_call}"
            changed = {k for k in call if got_call[k] != call[k]}
            assert changed == {"operation"}
            assert {**got_call["operation"], "diff": ""} == {**call["operation"], "diff": ""}
        if got_output == output:
            fates.whole[kind] += 1
            continue
        fates.shortened[kind] += 1
        assert kind != "computer_call", "a screenshot was changed"
        assert set(got_output) == set(output), "a shortened output changed its fields"
        assert {k: v for k, v in got_output.items() if k != "output"} == {
            k: v for k, v in output.items() if k != "output"
        }
        text = json.dumps(got_output["output"])
        assert "Truncated (" in text, f"{kind} {call_id} changed without a marker"
        if kind == "shell_call":
            assert [set(chunk) for chunk in got_output["output"]] == [
                {"stdout", "stderr", "outcome"}
            ]
    opened = turn_reasoning(history)
    reasons = turn_reasoning(prompt)
    for call_id, reasoning in reasons.items():
        assert opened[call_id] == reasoning, f"{call_id} went with another turn's reasoning"
    # the last model turn and its outputs (all after the last reasoning item) stay verbatim
    turns = [i for i, item in enumerate(history) if _type(item) == "reasoning"]
    tail = history[turns[-1] :] if turns else history
    assert prompt[-len(tail) :] == tail, "the newest turn was changed"


def check_run(run: Run) -> Fates:
    """The run ended; each request is what scoutd.prepare makes of its history; counts."""
    assert not isinstance(run.result, BaseException), run.result
    assert run.result.final_output == FINAL
    assert len(run.model.seen) == len(run.full) == TURNS + 1
    fates = Fates()
    for k, (history, prompt) in enumerate(zip(run.full, run.model.seen, strict=True)):
        if k:
            assert history[: len(run.full[k - 1])] == run.full[k - 1], f"history changed at {k}"
        expected = scoutd.prepare(history, config=RECALL_CONFIG, format=FORMAT).messages
        assert prompt == expected, f"call {k}: the model did not get the prepared items"
        check_request(history, prompt, fates)
    # the SDK's own history is whole: each tool's answer as it gave it
    history = run.result.to_input_list()
    for item in history:
        if _type(item) == "local_shell_call_output":
            assert item["output"] == run.record.answers[item["call_id"]]
        elif _type(item) == "computer_call_output":
            assert item["output"]["image_url"] == f"data:image/png;base64,{SCREENSHOT}"
    assert "Truncated (" not in json.dumps(history)
    # Every kind was compacted, again and again; a screenshot only ever dropped whole.
    for kind in OUTPUT_OF:
        assert fates.whole[kind] >= 20, (kind, fates)
        assert fates.dropped[kind] >= 10, (kind, fates)
        if kind != "computer_call":
            assert fates.shortened[kind] >= 2, (kind, fates)
    assert fates.shortened["computer_call"] == 0
    assert fates.shortened_calls["apply_patch_call"] >= 5, fates
    assert contains_text(run.model.seen[-1], "[Context compaction]")
    return fates


def contains_text(items: Any, text: str) -> bool:
    return text in json.dumps(items, default=str)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_builtin_tool_pairs_are_compacted_in_their_shapes(
    socket: tuple[str | None, str], streamed: bool
) -> None:
    socket_path, directory = socket
    save_file = os.path.join(directory, "tools.chat")
    model = ScriptedModel(Record(), Events(save_file))
    with ScoutdInputFilter(save_file=save_file, socket=socket_path, config=CONFIG) as f:
        run = await run_async(f, model, streamed=streamed)
    check_run(run)


def close_default_loop() -> None:
    """Close the thread's default event loop, which ``Runner.run_sync`` leaves open on
    purpose (for its sessions): collected unclosed, in a later test, it would warn there."""
    policy = asyncio.get_event_loop_policy()
    policy.get_event_loop().close()
    policy.set_event_loop(None)


def test_the_daemon_gives_the_model_what_the_process_gives(tmp_path: Any) -> None:
    """``Runner.run_sync``, once preparing in this process and once through a real daemon:
    the model gets the same requests, item for item."""
    save_file = str(tmp_path / "tools.chat")
    try:
        with ScoutdInputFilter(save_file=save_file, config=CONFIG) as f:
            local = run_sync(f, ScriptedModel(Record()))
        with Daemon() as daemon:
            remote_file = os.path.join(daemon.dir, "tools.chat")
            with ScoutdInputFilter(
                save_file=remote_file, socket=daemon.socket_path, config=CONFIG
            ) as f:
                remote = run_sync(f, ScriptedModel(Record()))
    finally:
        close_default_loop()
    check_run(local)
    check_run(remote)
    assert remote.model.seen == local.model.seen
    assert remote.record.actions == local.record.actions
