"""The thinking and reasoning a prompt sends back are counted, and counted once.

An Anthropic assistant turn's ``thinking`` and ``redacted_thinking`` blocks and a
Responses ``reasoning`` item (its ``summary``, ``content`` and ``encrypted_content``)
are sent back with their turn. The provider requires those of the tool loop in
progress (the turns after the last user message) and bills them as input; the
models that preserve thinking (Claude Opus 4.5 and later, Sonnet 4.6 and later,
a Responses request whose reasoning context is every turn) keep, and bill, those
of earlier turns too. What the provider does with an earlier turn's thinking
depends on the model and the request, which scoutd does not see, so the
estimate counts every turn's thinking with its turn: at least the bill, and no
more than what is sent.

Drawn conversations: a user task, 8 to 24 tool pairs whose assistant turns think
(0 to 12,000 characters each, some redacted or summarised), and user turns
among them, so that some thinking is in earlier turns and some in the loop in
progress. The oracle bills each prompt as its provider's preserving models do:
every message's JSON at 4 characters a token. Under a window drawn between the
least prompt the default can send and the whole conversation, no prompt passes
its window; under a window the whole conversation fits (at the default's
share of it), nothing is compacted: the thinking is not counted twice.

Before, thinking and reasoning counted nothing: prompts went past their window.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import scoutd
from scoutd.config import PromptConfig
from tests.formats.test_counted_sent import EXAMPLES, Drawn, _pair, _user, fits_its_window

FORMATS = ("anthropic", "openai-responses")
_SHARE = PromptConfig().compaction_limit_share
_MUCH = 20_000  # characters of thinking in a conversation: "much"


def _thinking(fmt: str, size: int, redacted: bool, n: int) -> dict[str, Any]:
    """A turn's thinking of about ``size`` characters, as its provider sends it back."""
    if fmt == "anthropic":
        if redacted:
            return {"type": "redacted_thinking", "data": "r" * size}
        return {"type": "thinking", "thinking": "t" * size, "signature": f"sig{n}" * 8}
    summary = [] if redacted else [{"type": "summary_text", "text": "s" * (size // 4)}]
    return {
        "type": "reasoning",
        "id": f"rs_{n}",
        "summary": summary,
        "encrypted_content": "e" * (size - size // 4 if summary else size),
    }


def _thinking_pair(fmt: str, n: int, output: str, thought: dict[str, Any] | None) -> list[Any]:
    """A tool pair whose assistant turn sends ``thought`` back first."""
    call, answer = _pair(fmt, f"c{n}", {"path": f"f{n}"}, output)
    if thought is None:
        return [call, answer]
    if fmt == "anthropic":
        call["content"] = [thought, *call["content"]]
        return [call, answer]
    return [thought, call, answer]


def _user_turn(fmt: str, n: int, thought: dict[str, Any] | None) -> list[Any]:
    """The model's answer (thinking first) and the user's next task."""
    if fmt == "anthropic":
        blocks = [thought] if thought is not None else []
        answer = {"role": "assistant", "content": [*blocks, {"type": "text", "text": "done"}]}
        return [answer, _user(fmt, f"task {n}")]
    said = {"type": "message", "role": "assistant", "content": "done"}
    return [*([thought] if thought is not None else []), said, _user(fmt, f"task {n}")]


@st.composite
def conversations(draw: st.DrawFn, fmt: str) -> Drawn:
    """A user task, then pairs that think, with zero to three user turns among them."""
    drawn = Drawn(fmt)
    drawn.segments.append((False, [_user(fmt, "start")]))
    pairs = draw(st.integers(8, 24))
    turns = {draw(st.integers(1, pairs - 1)) for _ in range(draw(st.integers(0, 3)))}

    def thought(n: int) -> dict[str, Any] | None:
        size = draw(st.integers(0, 12_000))
        return _thinking(fmt, size, draw(st.booleans()), n) if size else None

    for n in range(pairs):
        if n in turns:
            drawn.segments.append((False, _user_turn(fmt, n, thought(1_000 + n))))
            drawn.kinds.append("user turn")
        output = f"{n} " + "o" * draw(st.integers(800, 8_000))
        drawn.segments.append((True, _thinking_pair(fmt, n, output, thought(n))))
    return drawn


_THOUGHTS = frozenset(("thinking", "redacted_thinking", "reasoning"))


def _thinks(drawn: Drawn) -> int:
    """The characters of thinking the conversation sends back."""
    found = 0
    for message in drawn.messages():
        content = message.get("content")
        for block in [message, *(content if type(content) is list else [])]:
            if type(block) is dict and block.get("type") in _THOUGHTS:
                found += len(str(block))
    return found


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_prompt_passes_its_window_with_the_thinking_it_sends(fmt: str) -> None:
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        drawn = data.draw(conversations(fmt))
        reached["examples"] += 1
        reached["with user turns"] += bool(drawn.kinds)
        reached["much thinking"] += _thinks(drawn) >= _MUCH
        if fits_its_window(data, drawn):
            reached["compacted"] += 1

    check()
    # the counts the fixed examples reach, a little below
    assert reached["compacted"] >= 30, reached
    assert reached["with user turns"] >= 25, reached
    assert reached["much thinking"] >= 25, reached


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_conversation_that_fits_is_not_compacted_for_its_thinking(fmt: str) -> None:
    """The estimate counts the thinking once: a window that holds the whole bill at
    the default's share leaves the conversation as it is."""
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(conversations(fmt))
    def check(drawn: Drawn) -> None:
        messages = drawn.messages()
        window = math.ceil(drawn.oracle.bill(messages) / _SHARE) + 1
        prepared = scoutd.prepare(messages, format=fmt, config={"context_window": window})
        assert prepared.messages == messages, (window, _thinks(drawn))
        reached["much thinking"] += _thinks(drawn) >= _MUCH

    check()
    assert reached["much thinking"] >= 18, reached
