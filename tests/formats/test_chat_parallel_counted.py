"""An OpenAI Chat assistant message of parallel calls is counted while it is sent.

The rebuild keeps an assistant message, its text and the fields it sends beside
it (a ``refusal``, a ``name``: docs/FORMATS.md), while any of its calls stays. A window
that cuts through such a group drops its older calls and keeps the newer: what
the message sends with them must still count. Drawn conversations: a user task,
then groups of 2 to 5 parallel calls whose assistant message says up to 30,000
characters, in its text or in a field beside it; each is prepared by
the default under a window between the least prompt it can send and the whole
conversation, and the prompt, billed by the plain oracle of
:mod:`tests.formats.test_counted_sent`, must fit.

Before, the message's text and fields counted with its first call, the first
the default drops, so prompts went past their window (8,866 tokens billed
under a 3,358 window). They now count with its last call, the newest pair.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import scoutd
from tests.formats.test_counted_sent import EXAMPLES, Drawn, _user, fits_its_window
from tests.formats.validity import new_problems


def _group(draw: st.DrawFn, n: int, reached: Counter[str]) -> list[dict[str, Any]]:
    """An assistant message of 2 to 5 calls, with a remark and perhaps reasoning, and
    the answers to its calls."""
    width = draw(st.integers(2, 5))
    idents = [f"c{n}_{k}" for k in range(width)]
    calls = [
        {
            "id": ident,
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"path": f"f{n}_{k}.py"})},
        }
        for k, ident in enumerate(idents)
    ]
    size = draw(st.sampled_from((0, 8_000, 30_000)))
    said = f"reading {width} " + "r" * size
    message: dict[str, Any] = {"role": "assistant", "content": said, "tool_calls": calls}
    if size and draw(st.booleans()):  # said in a field beside the text instead
        message["content"], message["name"] = f"reading {width}", said
        reached["field"] += 1
    reached["says much"] += bool(size)
    answers = [
        {"role": "tool", "tool_call_id": ident, "content": f"{n}.{k} " + "o" * 1_500}
        for k, ident in enumerate(idents)
    ]
    return [message, *answers]


@st.composite
def conversations(draw: st.DrawFn, reached: Counter[str]) -> Drawn:
    drawn = Drawn("openai-chat")
    drawn.segments.append((False, [_user("openai-chat", "start")]))
    for n in range(draw(st.integers(4, 10))):
        drawn.segments.append((True, _group(draw, n, reached)))
    return drawn


def _partly_kept(messages: list[dict[str, Any]], prompt: list[dict[str, Any]]) -> int:
    """The groups the prompt sends with some of their calls only."""
    given_calls = {id(m): len(m["tool_calls"]) for m in messages if m.get("tool_calls")}
    found = 0
    for message in prompt:
        calls = message.get("tool_calls")
        if calls and id(message) not in given_calls:
            found += 1  # a copy: some of its calls were dropped
    return found


def test_a_group_of_calls_counts_while_any_of_its_calls_is_sent() -> None:
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        drawn = data.draw(conversations(reached))
        messages = drawn.messages()
        reached["compacted"] += fits_its_window(data, drawn)
        # a window near the least prompt: groups are cut through
        least = int(drawn.floor(1) / 0.7) + 1
        window = data.draw(st.integers(least, max(least, drawn.oracle.bill(messages))))
        config = {"context_window": window, "cost_full_tool_outputs": 1}
        prepared = scoutd.prepare(messages, format="openai-chat", config=config)
        assert drawn.oracle.bill(prepared.messages) <= window, window
        assert new_problems("openai-chat", messages, prepared.messages) == {}
        reached["partly kept"] += _partly_kept(messages, prepared.messages)
        # round by round, a session sends what the whole prepare sends
        session = scoutd.Session(config=config, format="openai-chat")
        ends = [n for n in range(2, len(messages) + 1) if messages[n - 1]["role"] == "tool"]
        for end in ends:
            got = session.prepare(messages[:end])
        assert got.messages == prepared.messages

    check()
    assert reached["compacted"] >= 20, reached
    assert reached["partly kept"] >= 10, reached
    assert reached["field"] >= 20, reached
