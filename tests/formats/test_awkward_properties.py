"""Properties of every strategy over every provider format, on conversations drawn
with awkward but valid shapes (awkward_conversations.py): the input is never
changed, the prompt is a valid request of its format, a session's round is the
whole conversation's prepare byte for byte, and inside an epoch the stable
prefix stays byte for byte (docs/FORMATS.md, docs/STRATEGIES.md)."""

from __future__ import annotations

import contextlib
import copy
import json
from collections import Counter
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd import PromptConfig, prepare
from scoutd.formats import scout_view

from .awkward_conversations import BUILDERS
from .validity import CHECKERS

TIGHT = PromptConfig(
    epoch_tool_call_threshold=1,
    epoch_full_tool_calls=1,
    epoch_compacted_tool_calls=1,
    epoch_size=1,
    context_window=3000,
    cost_full_tool_outputs=1,
    max_tool_calls=2,
    full_tool_outputs=1,
    max_tool_chars=0,
)
STRATEGIES = [
    "none",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools_cost_aware",
    "shorten_tools_epoch,shorten_tools_cost_aware",
]
QUICK = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def _bytes(messages: Any) -> bytes:
    return json.dumps(messages, ensure_ascii=False).encode()


def _compacted(prepared: scoutd.Prepared) -> bool:
    return any(r.outputs_dropped or r.outputs_truncated for r in prepared.report)


def test_every_strategy_gives_a_valid_request_and_leaves_the_input() -> None:
    seen: Counter[str] = Counter()

    @QUICK
    @given(
        data=st.data(),
        fmt=st.sampled_from(sorted(BUILDERS)),
        turns=st.integers(1, 8),
        strategy=st.sampled_from(STRATEGIES),
        recall=st.booleans(),
        cache=st.booleans(),
    )
    def check(
        data: st.DataObject, fmt: str, turns: int, strategy: str, recall: bool, cache: bool
    ) -> None:
        messages = BUILDERS[fmt](data, turns)
        snapshot, before = copy.deepcopy(messages), _bytes(messages)
        config = msgspec.structs.replace(TIGHT, recall=recall)
        prepared = prepare(messages, strategy, config=config, format=fmt, cache_control=cache)
        assert messages == snapshot and _bytes(messages) == before
        check_format = CHECKERS[fmt]
        assert not check_format(prepared.messages) - check_format(messages)
        assert prepared.report[-1].malformed == 0
        seen["compacted" if _compacted(prepared) else "kept"] += 1

    check()
    assert seen["compacted"] > 0, seen


def test_a_session_round_is_the_whole_prepare_byte_for_byte() -> None:
    seen: Counter[str] = Counter()

    @QUICK
    @given(
        data=st.data(),
        fmt=st.sampled_from(sorted(BUILDERS)),
        turns=st.integers(1, 5),
        strategy=st.sampled_from(STRATEGIES[1:]),
        recall=st.booleans(),
        cache=st.booleans(),
    )
    def check(
        data: st.DataObject, fmt: str, turns: int, strategy: str, recall: bool, cache: bool
    ) -> None:
        messages = BUILDERS[fmt](data, turns)
        config = msgspec.structs.replace(TIGHT, recall=recall)
        options: dict[str, Any] = {"config": config, "cache_control": cache}
        with scoutd.Session(format=fmt, strategies=strategy, **options) as session:
            for end in range(1, len(messages) + 1):
                part = messages[:end]
                whole = prepare(part, strategy, format=fmt, **options)
                assert _bytes(session.prepare_prompt(part)) == _bytes(whole.messages)
                seen["compacted" if _compacted(whole) else "kept"] += 1

    check()
    assert seen["compacted"] > 0, seen


def _anthropic_blocks(value: Any) -> Any:
    """``value`` without cache marks, a string content as its one text block: what
    Anthropic caches the same (the hint moves as the stable prefix grows)."""
    if isinstance(value, dict):
        content = value.get("content")
        if isinstance(content, str) and value.get("role") in ("user", "assistant"):
            value = {**value, "content": [{"type": "text", "text": content}]}
        return {k: _anthropic_blocks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_anthropic_blocks(v) for v in value]
    return value


def _outputs(messages: list[Any], fmt: str) -> int:
    """Usable tool outputs of the scout view (the epoch arithmetic's N)."""
    count = 0
    for message in scout_view(messages, format=fmt):
        if message.get("role") == "function_call_output":
            with contextlib.suppress(TypeError, ValueError):
                count += isinstance(json.loads(message["content"]), dict)
    return count


def test_inside_an_epoch_the_stable_prefix_stays_byte_for_byte() -> None:
    threshold, size = 3, 3
    config = PromptConfig(
        epoch_tool_call_threshold=threshold,
        epoch_full_tool_calls=2,
        epoch_compacted_tool_calls=2,
        epoch_size=size,
    )
    seen: Counter[str] = Counter()

    @QUICK
    @given(
        data=st.data(),
        fmt=st.sampled_from(sorted(BUILDERS)),
        turns=st.integers(3, 9),
        cache=st.booleans(),
    )
    def check(data: st.DataObject, fmt: str, turns: int, cache: bool) -> None:
        messages = BUILDERS[fmt](data, turns)
        previous: tuple[list[Any], int, int | None] | None = None
        for end in range(1, len(messages) + 1):
            prepared = prepare(
                messages[:end],
                "shorten_tools_epoch",
                config=config,
                format=fmt,
                cache_control=cache,
            )
            outputs = _outputs(messages[:end], fmt)
            pinned = (
                threshold + ((outputs - threshold - 1) // size) * size
                if outputs > threshold
                else None
            )
            if previous is not None and previous[2] == pinned:
                earlier, stable = previous[0], previous[1]
                assert _anthropic_blocks(prepared.messages[:stable]) == _anthropic_blocks(
                    earlier[:stable]
                )
                seen["compacted epoch" if pinned is not None else "before the threshold"] += 1
            previous = (prepared.messages, prepared.report[-1].stable_prefix, pinned)

    check()
    assert seen["compacted epoch"] > 0, seen
