"""Thinking and reasoning after a compaction: sent as the provider requires, counted.

Drawn conversations in the Anthropic and Responses formats: a user task, then
tool loops whose assistant turns make 1 to 5 parallel calls, think first
(``thinking``, ``redacted_thinking``, a ``reasoning`` item with a summary and
``encrypted_content``), some between their calls too (interleaved), with user
turns between the loops; the last loop is the one in progress. File reads come
from a small pool of paths, so that the default's retention keeps some older
reads whole (a pair of a turn whose newer pairs are dropped).

Each is prepared by the default under a window drawn between the least prompt
it can send and the whole conversation: the prompt fits the window as its
provider bills it (:func:`~tests.formats.test_counted_sent.fits_its_window`),
stays valid, keeps every kept call's thinking as it was
(:func:`~tests.formats.validity.thinking_problems`), and a session fed the
conversation round by round sends what a whole prepare sends.

Before, a turn's thinking counted with its first pair, the first the default
drops, while the rebuild sends it as long as any pair of the turn is sent: with
one turn thinking much, 21 of 41 drawn Anthropic prompts and 20 of 41 Responses
prompts went past their window, up to 2.1 times it. It now counts with the
turn's last pair (its newest).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import scoutd
from tests.formats.drawn import same
from tests.formats.test_counted_sent import EXAMPLES, Drawn, _user, fits_its_window
from tests.formats.validity import new_problems, thinking_problems

FORMATS = ("anthropic", "openai-responses")
_PATHS = [f"src/m{n}.py" for n in range(6)]  # few, so that reads supersede older ones


def _thought(draw: st.DrawFn, fmt: str, n: int, most: int = 8_000) -> dict[str, Any] | None:
    """A turn's thinking of 0 (none) to ``most`` characters, as its provider sends it
    back: plain, redacted, or (Responses) summarised, encrypted, or both."""
    size = draw(st.integers(0, most))
    if not size:
        return None
    style = draw(st.sampled_from(("plain", "redacted", "both")))
    if fmt == "anthropic":
        if style == "redacted":
            return {"type": "redacted_thinking", "data": "r" * size}
        return {"type": "thinking", "thinking": "t" * size, "signature": f"s{n}" * 20}
    summary = [] if style == "redacted" else [{"type": "summary_text", "text": "y" * (size // 3)}]
    item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{n}", "summary": summary}
    if style != "plain" or not summary:
        item["encrypted_content"] = "e" * (size - size // 3)
    return item


def _calls(fmt: str, n: int, paths: list[str], outputs: list[str]) -> tuple[list[Any], list[Any]]:
    """The calls of turn ``n`` (one per path) and their answers, in the format's form."""
    idents = [f"c{n}_{k}" for k in range(len(paths))]
    if fmt == "anthropic":
        uses = [
            {"type": "tool_use", "id": i, "name": "read", "input": {"path": p}}
            for i, p in zip(idents, paths, strict=True)
        ]
        results = [
            {"type": "tool_result", "tool_use_id": i, "content": o}
            for i, o in zip(idents, outputs, strict=True)
        ]
        return uses, results
    calls = [
        {
            "type": "function_call",
            "call_id": i,
            "name": "read",
            "arguments": json.dumps({"path": p}),
        }
        for i, p in zip(idents, paths, strict=True)
    ]
    answers = [
        {"type": "function_call_output", "call_id": i, "output": o}
        for i, o in zip(idents, outputs, strict=True)
    ]
    return calls, answers


def _tool_turn(draw: st.DrawFn, fmt: str, n: int, reached: Counter[str], most: int) -> list[Any]:
    """An assistant turn of 1 to 5 parallel calls (2 to 5 mostly), thinking first (up to
    ``most`` characters) and perhaps between its calls, with a remark or not, and the
    answers to its calls."""
    width = draw(st.sampled_from((1, 2, 2, 3, 4, 5)))
    paths = [draw(st.sampled_from(_PATHS)) for _ in range(width)]
    outputs = [f"{n}.{k} " + "o" * draw(st.integers(600, 5_000)) for k in range(width)]
    calls, answers = _calls(fmt, n, paths, outputs)
    first = _thought(draw, fmt, n, most)
    between = _thought(draw, fmt, 500 + n) if width > 1 and draw(st.booleans()) else None
    said = draw(st.booleans())
    reached["parallel"] += width > 1
    reached["thinking"] += first is not None
    reached["interleaved"] += between is not None
    if between is not None:
        calls.insert(draw(st.integers(1, width - 1)), between)
    if fmt == "anthropic":
        text = [{"type": "text", "text": f"reading {width}"}] if said else []
        head = [first] if first is not None else []
        return [{"role": "assistant", "content": [*head, *text, *calls]}, _user_of(answers)]
    remark = [{"type": "message", "role": "assistant", "content": f"reading {width}"}]
    return [*([first] if first is not None else []), *(remark if said else []), *calls, *answers]


def _user_of(blocks: list[Any]) -> dict[str, Any]:
    return {"role": "user", "content": blocks}


def _answer(draw: st.DrawFn, fmt: str, n: int) -> list[Any]:
    """The model's answer to a task (thinking first, or none) and the user's next task."""
    thought = _thought(draw, fmt, 900 + n)
    head = [thought] if thought is not None else []
    if fmt == "anthropic":
        done = {"role": "assistant", "content": [*head, {"type": "text", "text": "done"}]}
        return [done, _user(fmt, f"task {n}")]
    said = {"type": "message", "role": "assistant", "content": "done"}
    return [*head, said, _user(fmt, f"task {n}")]


@st.composite
def conversations(draw: st.DrawFn, fmt: str, reached: Counter[str], most: int = 8_000) -> Drawn:
    """A user task, then 5 to 14 tool turns with up to three user turns between them;
    a turn thinks up to ``most`` characters first."""
    drawn = Drawn(fmt)
    drawn.segments.append((False, [_user(fmt, "start")]))
    turns = draw(st.integers(5, 14))
    breaks = {draw(st.integers(1, turns - 1)) for _ in range(draw(st.integers(0, 3)))}
    for n in range(turns):
        if n in breaks:
            drawn.segments.append((False, _answer(draw, fmt, n)))
            drawn.kinds.append("user turn")
        drawn.segments.append((True, _tool_turn(draw, fmt, n, reached, most)))
    return drawn


@pytest.mark.parametrize("fmt", FORMATS)
def test_thinking_is_counted_and_kept_when_a_turn_is_partly_compacted(fmt: str) -> None:
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        drawn = data.draw(conversations(fmt, reached))
        reached["examples"] += 1
        messages = drawn.messages()
        if fits_its_window(data, drawn):
            reached["compacted"] += 1
        window = data.draw(st.integers(2_000, 12_000))
        prepared = scoutd.prepare(messages, format=fmt, config={"context_window": window})
        assert new_problems(fmt, messages, prepared.messages) == {}
        assert thinking_problems(fmt, messages, prepared.messages) == {}
        reached["partly kept"] += _partly_kept(fmt, messages, prepared.messages)

    check()
    assert reached["compacted"] >= 25, reached
    assert reached["partly kept"] >= 10, reached
    assert min(reached[k] for k in ("parallel", "thinking", "interleaved")) >= 100, reached


def _partly_kept(fmt: str, given: list[Any], prepared: list[Any]) -> int:
    """The turns of calls with thinking of which ``prepared`` keeps some calls, not all."""
    key, kinds = ("id", ("tool_use",)) if fmt == "anthropic" else ("call_id", ("function_call",))
    sent = {str(b.get(key)) for b in _blocks(fmt, prepared) if b.get("type") in kinds}
    found = 0
    for turn in _thinking_turns(fmt, given):
        kept = [i in sent for i in turn]
        found += any(kept) and not all(kept)
    return found


def _blocks(fmt: str, messages: list[Any]) -> list[Any]:
    if fmt != "anthropic":
        return messages
    return [b for m in messages if isinstance(m.get("content"), list) for b in m["content"]]


def _thinking_turns(fmt: str, messages: list[Any]) -> list[list[str]]:
    """The call ids of each turn of calls that thinks."""
    turns: list[list[str]] = []
    if fmt == "anthropic":
        for message in messages:
            blocks = message.get("content")
            if (
                message.get("role") == "assistant"
                and isinstance(blocks, list)
                and any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks)
            ):
                turns.append([b["id"] for b in blocks if b.get("type") == "tool_use"])
        return turns
    thinks = False
    for item in messages:
        kind = item.get("type")
        if kind == "reasoning":
            thinks = True
            turns.append([])
        elif kind == "function_call" and thinks:
            turns[-1].append(item["call_id"])
        elif kind != "function_call" and not (
            kind == "message" and item.get("role") == "assistant"
        ):
            thinks = False
    return [t for t in turns if t]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_session_fed_round_by_round_sends_what_a_whole_prepare_sends(fmt: str) -> None:
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        messages = data.draw(conversations(fmt, reached)).messages()
        config = {"context_window": data.draw(st.integers(2_500, 10_000))}
        # every prefix, or the rounds a client sends: several items at once, ending anywhere
        every = data.draw(st.booleans())
        ends = list(range(1, len(messages) + 1))
        if not every:
            ends = sorted({*data.draw(st.lists(st.sampled_from(ends), max_size=12)), ends[-1]})
        with scoutd.Session(format=fmt, config=config) as session:
            for end in ends:
                part = messages[:end]
                prompt = session.prepare_prompt(part)
                whole = scoutd.prepare(part, format=fmt, config=config).messages
                assert same(prompt, whole), end
                reached["compacted"] += whole != part
        reached["examples"] += 1

    check()
    assert reached["compacted"] >= 200, reached


@st.composite
def heavy(draw: st.DrawFn, fmt: str, reached: Counter[str]) -> Drawn:
    """A user task and 6 to 10 tool turns, one of them (not among the newest two) of 2
    to 5 parallel calls that thinks 16,000 to 60,000 characters first, a dozen outputs'
    worth; the others think up to 2,000."""
    drawn = Drawn(fmt)
    drawn.segments.append((False, [_user(fmt, "start")]))
    turns = draw(st.integers(6, 10))
    big = draw(st.integers(0, turns - 3))
    for n in range(turns):
        if n != big:
            drawn.segments.append((True, _tool_turn(draw, fmt, n, reached, 2_000)))
            continue
        width = draw(st.integers(2, 5))
        paths = [f"src/big{k}.py" for k in range(width)]
        outputs = [f"{n}.{k} " + "o" * draw(st.integers(600, 5_000)) for k in range(width)]
        calls, answers = _calls(fmt, n, paths, outputs)
        thought = _thinking(fmt, draw(st.integers(16_000, 60_000)), draw(st.booleans()), n)
        if fmt == "anthropic":
            turn = [{"role": "assistant", "content": [thought, *calls]}, _user_of(answers)]
        else:
            turn = [thought, *calls, *answers]
        drawn.segments.append((True, turn))
    return drawn


def _thinking(fmt: str, size: int, redacted: bool, n: int) -> dict[str, Any]:
    """Thinking of ``size`` characters: redacted (encrypted only) or not."""
    if fmt == "anthropic":
        if redacted:
            return {"type": "redacted_thinking", "data": "r" * size}
        return {"type": "thinking", "thinking": "t" * size, "signature": f"s{n}" * 20}
    summary = [] if redacted else [{"type": "summary_text", "text": "y" * (size // 3)}]
    encrypted = "e" * (size - sum(len(part["text"]) for part in summary))
    return {
        "type": "reasoning",
        "id": f"rs_{n}",
        "summary": summary,
        "encrypted_content": encrypted,
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_turn_that_thinks_much_counts_while_any_of_its_calls_is_sent(fmt: str) -> None:
    """A window cutting through the turn that thinks much drops the older of its calls
    and keeps the newer: the thinking sent with them must count."""
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        drawn = data.draw(heavy(fmt, reached))
        messages = drawn.messages()
        reached["compacted"] += fits_its_window(data, drawn)
        least = int(drawn.floor(1) / 0.7) + 1
        window = data.draw(st.integers(least, max(least, drawn.oracle.bill(messages))))
        config = {"context_window": window, "cost_full_tool_outputs": 1}
        prepared = scoutd.prepare(messages, format=fmt, config=config)
        billed = drawn.oracle.bill(prepared.messages)
        assert billed <= window, (billed, window)
        assert thinking_problems(fmt, messages, prepared.messages) == {}
        reached["partly kept"] += _partly_kept(fmt, messages, prepared.messages)

    check()
    assert reached["compacted"] >= 30, reached
    assert reached["partly kept"] >= 6, reached


def _reasoning_turn(n: int, width: int, size: int) -> list[Any]:
    """A Responses turn: reasoning of ``size`` characters, ``width`` calls, their outputs."""
    outputs = [f"{n}.{k} " + "o" * 3_000 for k in range(width)]
    calls, answers = _calls("openai-responses", n, [f"f{n}_{k}" for k in range(width)], outputs)
    return [_thinking("openai-responses", size, True, n), *calls, *answers]


@pytest.mark.parametrize("window", range(3_000, 20_000, 1_000))
def test_a_session_whose_rounds_end_at_a_reasoning_item_sends_what_a_prepare_sends(
    window: int,
) -> None:
    """A round may end with a reasoning item whose calls and outputs come next round:
    the session views that turn again, as a whole prepare sees it at once."""
    messages: list[Any] = [_user("openai-responses", "go")]
    ends = []
    for n in range(8):
        ends.append(len(messages) + 1)  # right after the reasoning item
        messages += _reasoning_turn(n, 3, 20_000 if n == 1 else 100)
        ends.append(len(messages))
    config = {"context_window": window}
    compacted = 0
    with scoutd.Session(format="openai-responses", config=config) as session:
        for end in ends:
            prompt = session.prepare_prompt(messages[:end])
            whole = scoutd.prepare(messages[:end], format="openai-responses", config=config)
            assert same(prompt, whole.messages), end
            compacted += whole.messages != messages[:end]
    assert compacted >= 1


def test_the_checker_sees_thinking_lost_moved_or_orphaned() -> None:
    """:func:`thinking_problems` finds what a rebuild could break (so that its silence
    in the properties above means something)."""
    thought = _thinking("anthropic", 50, False, 0)
    uses, results = _calls("anthropic", 0, ["a", "b"], ["x", "y"])
    turn = {"role": "assistant", "content": [thought, *uses]}
    given = [_user("anthropic", "go"), turn, _user_of(results)]
    lost = [given[0], {"role": "assistant", "content": uses}, given[2]]
    moved = [given[0], {"role": "assistant", "content": [uses[0], thought, uses[1]]}, given[2]]
    assert thinking_problems("anthropic", given, given) == {}
    assert set(thinking_problems("anthropic", given, lost)) == {
        ("thinking not kept as it was", "c0_0")
    }
    assert set(thinking_problems("anthropic", given, moved)) == {("thinking moved", "c0_0")}
    items = [_user("openai-responses", "go"), *_reasoning_turn(0, 2, 50)]
    orphaned = [item for item in items if item.get("type") != "reasoning"]
    assert thinking_problems("openai-responses", items, items) == {}
    assert set(thinking_problems("openai-responses", items, orphaned)) == {
        ("call without its reasoning", "c0_0"),
        ("call without its reasoning", "c0_1"),
    }
