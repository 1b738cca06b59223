"""What a compaction keeps whole besides its bands (scoutd.strategies.retention), and
the call classifier it reads (scoutd.strategies.tool_kinds): by tool name and
arguments, shell commands included; the newest whole read of each file and run
of each search are kept within the budget, newest first, superseded ones never.
"""

from __future__ import annotations

import json
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.config import load_config
from scoutd.strategies.cost_aware import _Tokens, effective_prices
from scoutd.strategies.cost_plan import plan_compaction
from scoutd.strategies.retention import KEEP_REASONS, Kept, Keys, PairCalls, retain, retention_key
from scoutd.strategies.tokens import token_counter
from scoutd.strategies.tool_kinds import (
    BUILD,
    EDIT,
    GIT,
    OTHER,
    READ,
    SCRIPT,
    SEARCH,
    TASKS,
    TEST,
    WEB,
    CallKind,
    call_kind,
    tool_kind,
)
from scoutd.strategies.tool_messages import index_tools

from .test_core_reference import reference_retain


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("bash", {"command": "sed -n '10,50p' src/a.py"}, CallKind(READ, "src/a.py", (10, 50))),
        ("bash", {"command": "sed -n 7p src/a.py"}, CallKind(READ, "src/a.py", (7, 7))),
        (
            "bash",
            {"command": "cd /testbed && nl -ba src/x/y.py | sed -n 5,9p"},
            CallKind(READ, "src/x/y.py", (5, 9)),
        ),
        ("bash", {"command": "cat src/a.py"}, CallKind(READ, "src/a.py", None)),
        ("bash", {"command": "head -n 40 a/b.py"}, CallKind(READ, "a/b.py", (1, 40))),
        ("bash", {"command": "tail -20 a/b.py"}, CallKind(READ, "a/b.py", (-20, None))),
        ("bash", {"command": "cat src/a.py | head -30"}, CallKind(READ, "src/a.py", (1, 30))),
        ("Read", {"file_path": "/r/b.go"}, CallKind(READ, "/r/b.go", None)),
        (
            "Read",
            {"file_path": "/r/b.go", "offset": 10, "limit": 20},
            CallKind(READ, "/r/b.go", (10, 29)),
        ),
        ("read_file", {"path": "a.py", "start": 3, "end": 9}, CallKind(READ, "a.py", (3, 9))),
        ("read_file", {"path": "a.py", "start": 3}, CallKind(READ, "a.py", (3, None))),
        # a field that is not an integer tells nothing of the lines
        (
            "Read",
            {"file_path": "a.py", "offset": 5, "limit": "9"},
            CallKind(READ, "a.py", (5, None)),
        ),
        ("read_file", {"path": "a.py", "start": True}, CallKind(READ, "a.py", None)),
        # the first file a read names is its file
        ("bash", {"command": "cat a.py b.py"}, CallKind(READ, "a.py", None)),
        ("bash", {"command": "cd /r && cat 'src/a.py'"}, CallKind(READ, "src/a.py", None)),
        ("Edit", {"file_path": "/r/b.go", "old_string": "a"}, CallKind(EDIT, "/r/b.go")),
        ("bash", {"command": "sed -i 's/a/b/' src/a.py"}, CallKind(EDIT, "src/a.py")),
        ("bash", {"command": "cat > new.py << 'EOF'\nx = 1\nEOF"}, CallKind(EDIT, "new.py")),
    ],
)
def test_reads_and_edits_name_their_file_and_lines(
    tool: str, arguments: dict[str, Any], expected: CallKind
) -> None:
    assert call_kind(tool, arguments) == expected


@pytest.mark.parametrize(
    ("tool", "arguments", "kind"),
    [
        ("bash", {"command": "grep -rn foo src/"}, SEARCH),
        ("bash", {"command": "cd /testbed && find . -name '*.py'"}, SEARCH),
        ("Grep", {"pattern": "Foo", "path": "/r"}, SEARCH),
        ("bash", {"command": "python -m pytest tests/test_a.py -q"}, TEST),
        ("Bash", {"command": "mise run test", "description": "Run tests"}, TEST),
        ("Bash", {"command": "mise run lint", "description": "Run golangci-lint"}, BUILD),
        ("bash", {"command": "git diff"}, GIT),
        ("bash", {"command": "git grep Foo"}, SEARCH),
        ("bash", {"command": "python reproduce.py"}, SCRIPT),
        ("bash", {"command": "curl -s https://example.org"}, WEB),
        ("WebFetch", {"url": "https://example.org"}, WEB),
        ("TodoWrite", {"todos": []}, TASKS),
        ("TaskUpdate", {"taskId": "1"}, TASKS),
        ("frobnicate", {"x": 1}, OTHER),
        (None, None, OTHER),
        ("bash", {"command": "echo 'unbalanced"}, OTHER),
    ],
)
def test_every_call_has_a_kind(tool: str | None, arguments: Any, kind: str) -> None:
    assert tool_kind(tool, arguments) == kind


def test_a_search_is_known_by_its_command() -> None:
    first = call_kind("bash", {"command": "grep -rn foo src/"})
    assert first == call_kind("bash", {"command": "grep -rn foo src/"})
    assert first.key != call_kind("bash", {"command": "grep -rn bar src/"}).key


def kept_of(
    calls: list[CallKind], sizes: list[int], number: int, band_end: int, budget: int, lookback: int
) -> Kept:
    """What :func:`retain` keeps of pairs 1, 2, ... (``calls``, oldest first) whose
    outputs add ``sizes`` each (all of the band dropped)."""
    keys = Keys()
    keys.extend([retention_key(call) for call in calls])
    bare = list(accumulate(sizes, initial=0))
    nothing = [0] * len(bare)
    bands = (band_end, band_end)
    numbers, tokens = retain(keys, (nothing, nothing, bare), number, bands, budget, lookback)
    assert tokens == sum(sizes[pair - 1] for pair in numbers)
    return keys.kept(numbers)


WHOLE_A = CallKind(READ, "a.py")
WHOLE_B = CallKind(READ, "b.py")
RANGE_A = CallKind(READ, "a.py", (1, 20))
GREP = CallKind(SEARCH, key="grep -rn foo")
TESTS = CallKind(TEST, key="pytest")


def test_the_newest_whole_read_and_search_are_kept_not_the_rest() -> None:
    """Pairs 1-6 are being compacted; 7-8 stay whole (and supersede older ones)."""
    calls = [WHOLE_A, GREP, TESTS, RANGE_A, WHOLE_B, GREP, TESTS, WHOLE_B]
    kept = kept_of(calls, [10] * 8, 8, 6, 1_000, 40)
    # 1: newest whole read of a.py (4 reads a range, which supersedes nothing); 6: newest
    # grep (2 is superseded by it); 5 is superseded by 8; test runs and ranges never kept
    assert kept.numbers == (1, 6)
    assert kept.reasons == (KEEP_REASONS[READ], KEEP_REASONS[SEARCH])


def test_the_budget_takes_the_newest_first_and_skips_what_no_longer_fits() -> None:
    calls = [CallKind(READ, "a"), CallKind(READ, "b"), CallKind(READ, "c")]
    assert kept_of(calls, [5, 30, 20], 3, 3, 30, 40).numbers == (1, 3)
    assert kept_of(calls, [5, 30, 20], 3, 3, 0, 40).numbers == ()


def test_the_lookback_bounds_how_old_a_kept_output_may_be() -> None:
    calls = [CallKind(READ, f"f{n}") for n in range(1, 11)]
    assert kept_of(calls, [1] * 10, 10, 8, 100, 3).numbers == (6, 7, 8)


def read_run(files: int, size: int) -> list[dict[str, Any]]:
    """A run that reads ``files`` different files whole, then greps and tests in turn."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the build."},
    ]
    for number in range(files):
        name, arguments = (
            ("bash", {"command": f"cat src/m{number}.py"})
            if number % 2
            else ("bash", {"command": f"python -m pytest -q tests/t{number}.py"})
        )
        ident = f"c{number}"
        call = {"name": name, "arguments": arguments, "id": ident}
        output = {"name": name, "content": f"{number} " + "word_x1 " * (size // 8), "id": ident}
        messages.append({"role": "assistant", "content": f"Step {number}."})
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(output)})
    return messages


def test_the_default_keeps_old_reads_whole_and_drops_old_test_logs() -> None:
    """Every kept pair is an old whole read, never a test run, and its remark goes."""
    messages = read_run(200, 2_000)
    config = load_config(None).prompt
    prepared = scoutd.prepare(messages, ["shorten_tools_cost_aware"], config=config, detail=True)
    report = prepared.report[0]
    protected = [a for a in report.actions or [] if a.action == "protected"]
    assert report.outputs_protected > 0 and report.outputs_dropped > 0
    assert len(protected) == 2 * report.outputs_protected  # the call and its output
    for action in protected:
        assert action.position > config.cost_full_tool_outputs
        body = json.loads(messages[action.index]["content"])
        if action.role == "function_call":
            assert body["arguments"]["command"].startswith("cat ")
        assert messages[action.index] in prepared.messages  # the very message, whole
    remarks = {m["content"] for m in prepared.messages if m["role"] == "assistant"}
    index = index_tools(messages)
    tokens = _Tokens(messages, index, token_counter(config))
    plan = plan_compaction(tokens, index.outputs, config, effective_prices(config, None))
    in_dropped_band = [k for k in plan.kept.numbers if k <= plan.dropped]
    assert in_dropped_band and len(plan.kept.numbers) == report.outputs_protected
    for k in in_dropped_band:  # pair k is call c{k-1}, after the remark "Step {k-1}."
        assert f"Step {k - 1}." not in remarks  # dropped band: its remark goes
    for k in range(plan.shortened + 1, index.outputs + 1):
        assert f"Step {k - 1}." in remarks  # the whole band keeps its remarks
    # without the retention the same run keeps nothing old whole
    off = scoutd.prepare(messages, ["shorten_tools_cost_aware"], config={"cost_keep_share": 0})
    assert off.report[0].outputs_protected == 0


def test_kept_outputs_stay_within_their_share_of_what_a_compaction_removes() -> None:
    messages = read_run(200, 2_000)
    config = load_config(None).prompt
    index = index_tools(messages)
    tokens = _Tokens(messages, index, token_counter(config))
    plan = plan_compaction(tokens, index.outputs, config, effective_prices(config, None))
    assert plan.kept.numbers and all(k <= plan.shortened for k in plan.kept.numbers)
    assert len(plan.kept.reasons) == len(plan.kept.numbers)
    kept = sum(tokens.bare[k] - tokens.bare[k - 1] for k in plan.kept.numbers if k <= plan.dropped)
    assert kept <= config.cost_keep_share * tokens.saved(plan.dropped, plan.shortened)


def test_a_session_keeps_what_a_prepare_from_scratch_keeps() -> None:
    """Round by round, the session's plan (kept outputs included) is the whole replay's."""
    messages = read_run(160, 2_000)
    ends = [i + 1 for i, m in enumerate(messages) if m["role"] == "function_call_output"]
    protected = 0
    with scoutd.Session(strategies=["shorten_tools_cost_aware"]) as session:
        for end in ends:
            got = session.prepare(messages[:end])
            expected = scoutd.prepare(messages[:end], ["shorten_tools_cost_aware"])
            assert got.messages == expected.messages
            protected = max(protected, expected.report[0].outputs_protected)
    assert protected > 0


def test_what_is_kept_never_overflows_the_window() -> None:
    """A window the run outgrows: every round's prompt, kept outputs included, stays
    under the limit; some compaction keeps old outputs whole, and one is forced (it
    keeps nothing besides its bands)."""
    messages = read_run(200, 2_000)
    overrides = {"context_window": 80_000, "cost_keep_share": 1.0}  # keeps all it can
    config = load_config(None, overrides=overrides).prompt
    index = index_tools(messages)
    tokens = _Tokens(messages, index, token_counter(config))
    prices = effective_prices(config, None)
    limit = config.compaction_limit_share * config.context_window
    kept_any = forced_any = False
    for number in range(1, index.outputs + 1):
        plan = plan_compaction(tokens, number, config, prices)
        prompt = tokens.cumulative[tokens.output_end[number]]
        prompt -= tokens.saved(plan.dropped, plan.shortened)
        for k in plan.kept.numbers:  # what keeping each adds back
            if k > plan.dropped:
                prompt += tokens.whole[k] - tokens.whole[k - 1]
                prompt -= tokens.shortened[k] - tokens.shortened[k - 1]
            else:
                prompt += tokens.bare[k] - tokens.bare[k - 1]
        assert prompt <= limit
        kept_any = kept_any or bool(plan.kept.numbers)
        if plan.decision is not None and plan.decision.forced and plan.decision.compacted:
            forced_any = True
            assert plan.kept.numbers == ()
    assert kept_any and forced_any


# Calls of a few kinds: whole reads of two files, a read of some lines, two searches,
# a test run; the same key recurs, so newer ones supersede older ones.
CALLS = [
    ("bash", {"command": "cat a.py"}),
    ("read_file", {"path": "b.py"}),
    ("bash", {"command": "sed -n 5,9p a.py"}),
    ("grep", {"pattern": "foo", "path": "src"}),
    ("bash", {"command": "ls src"}),
    ("bash", {"command": "pytest -q"}),
]


def pair_run(calls: list[int]) -> list[dict[str, Any]]:
    """One pair per entry of ``calls`` (indices into :data:`CALLS`), oldest first."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for at, which in enumerate(calls):
        name, arguments = CALLS[which]
        call = {"name": name, "arguments": arguments, "id": f"c{at}"}
        output = {"name": name, "content": f"out {at}", "id": f"c{at}"}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(output)})
    return messages


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_replays_retention_keeps_what_the_rule_keeps(data: st.DataObject) -> None:
    """:func:`retain` (with keys found as the replay finds them, at rounds that only
    grow) against the rule as written (``reference_retain``, walking every pair),
    with sizes from a plain count."""
    calls = data.draw(st.lists(st.integers(0, len(CALLS) - 1), min_size=3, max_size=30))
    pairs = PairCalls(index_tools(pair_run(calls)))
    size = len(calls)
    # whole pairs of 10-60 tokens, shortened ones of 0-10, without remarks 5-50
    whole, short, bare = (
        list(accumulate(data.draw(st.lists(step, min_size=size, max_size=size)), initial=0))
        for step in (st.integers(10, 60), st.integers(0, 10), st.integers(5, 50))
    )
    rounds = sorted(data.draw(st.lists(st.integers(1, len(calls)), min_size=1, max_size=5)))
    for number in rounds:
        band_end = max(0, number - data.draw(st.integers(0, 4)))  # the verbatim band
        dropped = data.draw(st.integers(0, band_end))
        budget, lookback = data.draw(st.integers(0, 300)), data.draw(st.integers(0, 15))

        def size_of(pair: int, dropped: int = dropped) -> int:
            if pair > dropped:
                return (whole[pair] - whole[pair - 1]) - (short[pair] - short[pair - 1])
            return bare[pair] - bare[pair - 1]

        keys = [None, *(retention_key(call_kind(*CALLS[c])) for c in calls)]
        expected = reference_retain(keys, size_of, number, band_end, budget, lookback)
        found = pairs.keys_to(number)
        numbers, tokens = retain(
            found, (whole, short, bare), number, (dropped, band_end), budget, lookback
        )
        assert found.kept(numbers) == expected
        assert tokens == sum(map(size_of, expected.numbers))
        event("kept some" if expected.numbers else "kept none")
        if any(
            keys[p] is not None and keys[p] in keys[p + 1 : number + 1]
            for p in range(1, band_end + 1)
        ):
            event("a superseded output in the band")
