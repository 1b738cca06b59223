"""Format detection's quick path agrees with the message-by-message one (docs/PERFORMANCE.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.formats import detect
from scoutd.formats.detect import _role_signals, _signal, signals


def one_by_one(messages: Sequence[Any]) -> dict[str, tuple[int, str]]:
    """The signals found by asking every message."""
    found: dict[str, tuple[int, str]] = {}
    for position, message in enumerate(messages):
        signal = _signal(message)
        if signal is not None and signal[0] not in found:
            found[signal[0]] = (position, signal[1])
    return found


class Role(str):
    """A string subclass: not a scout role for detection."""


_roles = st.sampled_from(
    ["user", "assistant", "system", "tool", "function_call", "function_call_output", None, 3]
)
_contents = st.sampled_from(
    ["text", None, [{"type": "tool_use"}], [{"type": "text"}], ["x"], {"k": 1}]
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["role"] = draw(_roles)
    if draw(st.integers(0, 9)):
        message["content"] = draw(_contents)
    extra = draw(st.integers(0, 12))
    if extra == 0:
        message["type"] = draw(st.sampled_from(["message", "function_call", "reasoning"]))
    elif extra == 1:
        message["tool_calls"] = draw(st.sampled_from([[], None, [{"id": "a"}]]))
    elif extra == 2:
        message["role"] = Role("function_call")
    elif extra == 3:
        return draw(st.sampled_from(["not a mapping", 7, ["role", "tool"]]))
    return message


@settings(max_examples=300, deadline=None)
@given(st.lists(messages(), max_size=12))
def test_signals_match_the_message_by_message_answer(listed: list[Any]) -> None:
    assert signals(listed) == one_by_one(listed)
    quick = _role_signals(listed)
    assert quick is None or quick == one_by_one(listed)


def test_plain_scout_and_chat_lists_take_the_quick_path() -> None:
    scout = [
        {"role": "user", "content": "hi"},
        {"role": "function_call_output", "content": "{}"},
        {"role": "function_call", "content": "{}"},
    ]
    assert _role_signals(scout) == {"scout": (1, "role 'function_call_output'")}
    mixed = [*scout, {"role": "tool", "content": "x"}]
    assert _role_signals(mixed) == one_by_one(mixed)
    assert len(_role_signals(mixed) or {}) == 2
    assert _role_signals([{"role": "user", "content": [{"type": "tool_use"}]}]) is None
    assert _role_signals([{"role": "user"}]) is None
    assert detect.detect_format(scout) == "scout"
