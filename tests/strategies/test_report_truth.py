"""What the default's report says of each tool message, against the prompt it prepared.

The oracle reads the prepared prompt itself, not the strategy's changes: a
message kept (or protected) is the original object, in the prompt; a
shortened one is absent, and the prompt holds a shorter message of the same
role and id; a dropped one has no message of its role and id left. The
report's counts, characters and notice must be those the prompt shows, and
each row's sentence must be true of that prompt (docs/STRATEGIES.md, "Why: the
reasons"): ``verbatim: one of the newest N outputs`` within N, and ``kept whole:
the newest whole read of its file`` only while no newer whole read of that file
came after it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.config import PromptConfig
from scoutd.strategies.cost_aware import shorten_tools_cost_aware

from .test_reasons import run

TOOL_ROLES = ("function_call", "function_call_output")
COUNTS: Counter[str] = Counter()


@dataclass(frozen=True)
class Step:
    """One pair: what the call does, on which file or search, its output's size, a remark."""

    kind: str
    target: int
    size: int
    remark: bool


def conversation(steps: list[Step]) -> list[dict[str, Any]]:
    """A plausible agent run in scoutd's roles: reads, searches, test runs and edits."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent. " * 40},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for number, step in enumerate(steps):
        if step.remark:
            messages.append({"role": "assistant", "content": f"Looking at step {number}."})
        if step.kind == "read":
            arguments: dict[str, Any] = {"path": f"src/mod{step.target}.py"}
        elif step.kind == "grep":
            arguments = {"command": f"grep -rn name{step.target} src"}
        else:
            arguments = {
                "command": "pytest -q" if step.kind == "test" else f"sed -i s/a/b/ f{number}"
            }
        name = "read" if step.kind == "read" else "bash"
        call = {"name": name, "arguments": arguments, "id": f"c{number}"}
        text = f"{number}: " + "output line\n" * (step.size // 12 + 1)
        output = {"name": name, "content": text, "id": f"c{number}"}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(output)})
    return messages


STEPS = st.lists(
    st.builds(
        Step,
        st.sampled_from(["read", "read", "grep", "test", "edit"]),
        st.integers(0, 8),
        st.sampled_from([40, 300, 900, 2500, 9000]),
        st.booleans(),
    ),
    min_size=60,
    max_size=160,
)
NEWEST = re.compile(r"verbatim: one of the newest (\d+) outputs")


def _key(message: Any) -> tuple[str, Any]:
    return message["role"], json.loads(message["content"]).get("id")


def _call_target(message: dict[str, Any]) -> str | None:
    """The whole read's file of a call message (None: not a whole read)."""
    body = json.loads(message["content"])
    path = body.get("arguments", {}).get("path")
    return path if body.get("name") == "read" and isinstance(path, str) else None


def check_prepared(messages: list[dict[str, Any]], config: dict[str, Any]) -> None:
    """Every row's fate and sentence, and the report's figures, against the prompt."""
    prepared = scoutd.prepare(messages, "shorten_tools_cost_aware", config=config, detail=True)
    report, prompt = prepared.report[0], prepared.messages
    assert report.actions is not None
    present = {id(m) for m in prompt}
    shown = {_key(m): m for m in prompt if m["role"] in TOOL_ROLES}
    fates: Counter[tuple[str, str]] = Counter()
    for row in report.actions:
        original = messages[row.index]
        fates[(row.role, row.action)] += 1
        if row.action in ("kept", "protected"):
            assert id(original) in present and row.chars_after == len(original["content"])
        elif row.action == "truncated":
            rewritten = shown[_key(original)]
            assert id(original) not in present
            assert len(rewritten["content"]) == row.chars_after < row.chars_before
        else:
            assert row.action == "dropped" and _key(original) not in shown
        said = NEWEST.fullmatch(row.why or "")
        if said is not None:
            assert row.action == "kept" and row.position <= int(said.group(1))
        if row.reason == "kept":
            COUNTS["kept rows"] += 1
            call = original if row.role == "function_call" else None
            target = None if call is None else _call_target(call)
            if target is not None:
                later = [
                    m
                    for m in messages[row.index + 1 :]
                    if m["role"] == "function_call" and _call_target(m) == target
                ]
                superseded = "a newer read came since" in (row.why or "")
                assert superseded == bool(later), (row.why, target, len(later))
                COUNTS["kept reads read again since"] += bool(later)
    for side in ("call", "output"):
        role = "function_call" if side == "call" else "function_call_output"
        for fate in ("kept", "protected", "truncated", "dropped"):
            assert getattr(report, f"{side}s_{fate}") == fates[(role, fate)], (side, fate)
    assert report.chars_before == sum(len(m["content"]) for m in messages)
    assert report.chars_after == sum(len(m["content"]) for m in prompt)
    notices = [m for m in prompt if m["content"].startswith("[Context compaction]")]
    changed = sum(n for (_, fate), n in fates.items() if fate in ("truncated", "dropped"))
    assert report.notice == bool(notices) == bool(changed)
    if notices:
        COUNTS["compacted"] += 1
        text = notices[0]["content"]
        shortened = sum(n for (_, fate), n in fates.items() if fate == "truncated")
        dropped = sum(n for (_, fate), n in fates.items() if fate == "dropped")
        assert f"{shortened} older tool messages are shown shortened" in text
        assert f"and {dropped} were removed." in text
    # the strategy's own count of the remarks it dropped: those no longer in the prompt
    _, own = shorten_tools_cost_aware(messages, PromptConfig(**config))
    remarks = [m for m in messages if m["role"] == "assistant"]
    assert own.narration_dropped == sum(id(m) not in present for m in remarks)
    # the whole call's figure, on its last report (the default chain): the remarks gone
    whole = scoutd.prepare(messages, config=config)
    kept = {id(m) for m in whole.messages}
    gone = sum(id(m) not in kept for m in remarks)
    assert whole.report[-1].narration_dropped == gone
    COUNTS["remarks dropped"] += gone


@settings(max_examples=100, derandomize=True, deadline=None)
@given(STEPS)
def reports_tell_the_prompts_truth(steps: list[Step]) -> None:
    check_prepared(conversation(steps), {})


def test_each_row_and_count_is_true_of_the_prepared_prompt() -> None:
    COUNTS.clear()
    reports_tell_the_prompts_truth()
    assert COUNTS["compacted"] >= 50, COUNTS
    assert COUNTS["kept rows"] >= 500, COUNTS
    assert COUNTS["kept reads read again since"] >= 80, COUNTS
    assert COUNTS["remarks dropped"] >= 500, COUNTS


def test_a_session_counts_the_remarks_dropped_as_prepare_does() -> None:
    """In scoutd's own format the last report's ``narration_dropped`` said 0, round by
    round and in a whole prepare, however many assistant remarks went with their pairs."""
    messages = conversation([Step("read", n % 9, 2500, True) for n in range(80)])
    session = scoutd.Session()
    ends = [n for n in range(3, len(messages) + 1) if messages[n - 1]["role"] != "assistant"]
    for end in ends:
        got = session.prepare(messages[:end])
    whole = scoutd.prepare(messages)
    assert got.messages == whole.messages
    remarks = [m for m in messages if m["role"] == "assistant"]
    gone = sum(all(m is not kept for kept in whole.messages) for m in remarks)
    assert gone > 0  # the case is what it says
    assert got.report[-1].narration_dropped == whole.report[-1].narration_dropped == gone


def test_a_kept_read_read_again_since_does_not_claim_to_be_the_newest() -> None:
    """Compacted at output 131 of 135, the retention kept the read of ``f079.py`` whole as the
    newest read of its file; the agent reads the file again after it: the row must say so."""
    messages = run(135)
    again = {"name": "read", "arguments": {"path": "f079.py"}, "id": "again"}
    output = {"name": "read", "content": "x" * 1500, "id": "again"}
    messages.append({"role": "function_call", "content": json.dumps(again)})
    messages.append({"role": "function_call_output", "content": json.dumps(output)})
    prepared = scoutd.prepare(messages, "shorten_tools_cost_aware", detail=True)
    actions = prepared.report[0].actions
    assert actions is not None and prepared.report[0].reason is not None
    assert prepared.report[0].reason.decided_at == 131  # the compaction stands
    rows: dict[str, Any] = {}  # the first call of each file
    for row in actions:
        if row.role == "function_call":
            path = json.loads(messages[row.index]["content"])["arguments"]["path"]
            rows.setdefault(path, row)
    assert rows["f079.py"].action == "protected"  # kept, and read again two outputs later
    assert rows["f079.py"].why == (
        "kept whole: the newest whole read of its file at the last compaction;"
        " a newer read came since"
    )
    assert rows["f078.py"].why == "kept whole: the newest whole read of its file"
    check_prepared(messages, {})


@settings(max_examples=25, derandomize=True, deadline=None)
@given(STEPS, st.sampled_from([8_000, 12_000, 20_000]))
def limit_sentences_are_true(steps: list[Step], window: int) -> None:
    messages = conversation(steps)
    session = scoutd.Session(config={"context_window": window})
    for end in range(3, len(messages) + 1):
        if messages[end - 1]["role"] != "function_call_output":
            continue
        reason = session.prepare(messages[:end]).report[0].reason
        if reason is None or reason.code != "over_limit":
            continue
        assert reason.prompt_tokens is not None and reason.limit_tokens is not None
        COUNTS["over the limit"] += 1
        if reason.prompt_tokens <= reason.limit_tokens:  # only its notice put it over
            COUNTS["over the limit with its notice"] += 1
            assert "and its compaction notice were over the limit" in reason.text
        else:
            assert " tokens was over the limit" in reason.text


def test_an_over_limit_sentence_is_true_of_its_figures() -> None:
    """``the prompt of 14,962 tokens was over the limit of 15,000``: a prompt that holds an
    earlier compaction's notice is held to the limit with it (133 of 824 such sentences in
    20 drawn runs said a prompt under the limit was over it)."""
    COUNTS.clear()
    limit_sentences_are_true()
    assert COUNTS["over the limit"] >= 300, COUNTS
    assert COUNTS["over the limit with its notice"] >= 30, COUNTS
