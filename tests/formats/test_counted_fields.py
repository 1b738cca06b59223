"""The last fields of tool traffic the estimate counted short, each billed by an oracle.

A Chat ``tool`` message's ``name`` and an Anthropic ``tool_use``'s ``caller``
(other than the default ``direct``) count while their pair is whole; Chat
``audio`` known only by its id counts as the audio it names, one page by the
media rules, in drawn conversations as in ``test_counted_sent``: the oracle
bills every message's JSON at 4 characters a token and audio by id at one
page, and each prompt the default prepares must fit its window and stay valid.

Before, a tool message's name and a call's caller counted nothing, and audio by
id the characters of its id. A name or caller on a call in the shortened band is
still counted at the call's bound (docs/RELIABILITY.md, "Known limits").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd.config import PromptConfig
from scoutd.formats import scout_view
from scoutd.strategies.media import UNKNOWN_FILE_TOKENS
from scoutd.strategies.tokens import message_tokens, token_counter
from tests.formats.test_counted_sent import EXAMPLES, Drawn, _pair, _user, fits_its_window
from tests.strategies.test_media_overflow import Oracle


class _AudioOracle(Oracle):
    """The plain oracle, and one page for each assistant ``audio`` known by its id."""

    def bill(self, messages: list[Any]) -> int:
        audio = sum(
            1
            for m in messages
            if type(m) is dict and type(m.get("audio")) is dict and "data" not in m["audio"]
        )
        return super().bill(messages) + audio * UNKNOWN_FILE_TOKENS


def _segment(fmt: str, kind: str, size: int, n: int) -> tuple[bool, list[dict[str, Any]]]:
    """A segment sending about ``size`` characters (or, audio, one or two pages)
    that the estimate counted short; whether the default may remove it."""
    ident = f"x{n}"
    if kind == "tool name":
        call, answer = _pair(fmt, ident, {"path": "a"}, "done")
        answer["name"] = "n" * size
        return True, [call, answer]
    if kind == "caller":
        use, result = _pair(fmt, ident, {"path": "a"}, "done")
        caller = {"type": "code_execution_20250825", "tool_id": "t" * size}
        use["content"][0]["caller"] = caller
        return True, [use, result]
    said = [  # audio by id
        {"role": "assistant", "content": None, "audio": {"id": f"audio_{n}_{k}"}}
        for k in range(1 + size // 20_000)
    ]
    return False, [*said, _user(fmt, "go on")]


# Drawn among tool pairs: audio known by its id (a name or caller is checked while its
# pair is whole, below: in the shortened band its call is counted at its bound).
CASES = [("openai-chat", "audio by id")]


@st.composite
def conversations(draw: st.DrawFn, fmt: str, kind: str) -> Drawn:
    """A user turn, 8 to 24 pairs, and one to three segments of ``kind`` among them."""
    drawn = Drawn(fmt, oracle=_AudioOracle())
    drawn.segments.append((False, [_user(fmt, "start")]))
    pairs = draw(st.integers(8, 24))
    bodies = [
        (
            True,
            _pair(fmt, f"c{n}", {"path": f"f{n}"}, f"{n} " + "o" * draw(st.integers(800, 8_000))),
        )
        for n in range(pairs)
    ]
    for n in range(draw(st.integers(1, 3))):
        place = draw(st.integers(0, len(bodies)))
        bodies.insert(place, _segment(fmt, kind, draw(st.integers(4_000, 40_000)), n))
        drawn.kinds.append(kind)
    drawn.segments.extend(bodies)
    return drawn


@pytest.mark.parametrize(("fmt", "kind"), CASES)
def test_what_tool_traffic_sends_is_counted(fmt: str, kind: str) -> None:
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        reached["examples"] += 1
        if fits_its_window(data, data.draw(conversations(fmt, kind))):
            reached["compacted"] += 1

    check()
    assert reached["compacted"] >= 25, reached


@pytest.mark.parametrize(("fmt", "kind"), [("openai-chat", "tool name"), ("anthropic", "caller")])
def test_a_name_or_caller_counts_while_its_pair_is_whole(fmt: str, kind: str) -> None:
    """The estimate of a conversation holding a 40,000-character tool name or caller
    counts at least its characters (at 4 a token, 10,000 tokens): it counted none."""
    first = _user(fmt, "start")
    _, pair = _segment(fmt, kind, 40_000, 0)
    view = scout_view([first, *pair], format=fmt)
    counted = sum(message_tokens(view, token_counter(PromptConfig())))
    assert counted >= 10_000, counted
