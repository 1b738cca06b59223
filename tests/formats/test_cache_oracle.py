"""Where the Anthropic cache hint goes, and how long the stable prefix is, against a
plain reading of docs/FORMATS.md: the hint marks the last block that can carry it
among the first ``prefix`` messages; the prefix without a strategy's promise is the
input's own messages before any tool traffic."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scoutd.formats import adapter
from scoutd.formats.cache import hinted, stable_prefix, with_cache_control

from .test_cache import blocks, json_values

EPHEMERAL = {"type": "ephemeral"}


def markable(block: Any) -> bool:
    """A block that may carry the hint: a mapping with a string type, no thinking, and
    not a text block whose text is blank (a missing text is blank)."""
    if not isinstance(block, Mapping) or type(block.get("type")) is not str:
        return False
    if block["type"] in ("thinking", "redacted_thinking"):
        return False
    text = block.get("text", "")
    return not (block["type"] == "text" and isinstance(text, str) and text.strip() == "")


def expected_mark(prompt: list[Any], prefix: int) -> tuple[int, int] | None:
    """(message, block) of the block the hint goes on, or None."""
    for position in reversed(range(min(prefix, len(prompt)))):
        message = prompt[position]
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str) and content != "":
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            continue
        for slot in reversed(range(len(content))):
            if markable(content[slot]):
                return position, slot
    return None


# Messages of any shape, some not mappings at all; no mark of the agent's own in them.
message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"])},
        optional={"content": st.lists(blocks | json_values, max_size=4) | json_values},
    ),
    json_values,
)


def _has_own_mark(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "cache_control" in value or any(_has_own_mark(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_own_mark(v) for v in value)
    return False


@settings(max_examples=400, deadline=None)
@given(st.lists(message, max_size=6), st.integers(min_value=0, max_value=8))
def test_the_hint_goes_on_the_last_block_that_can_carry_it(prompt: list[Any], prefix: int) -> None:
    assume(not _has_own_mark(prompt))  # an agent's own mark: no hint at all (tested apart)
    before = copy.deepcopy(prompt)
    marked = with_cache_control(prompt, prefix)
    assert prompt == before  # the caller's messages are not changed
    where = expected_mark(prompt, prefix)
    if where is None:
        assert marked is prompt
        return
    position, slot = where
    assert (
        marked[:position] == prompt[:position] and marked[position + 1 :] == prompt[position + 1 :]
    )
    content = marked[position]["content"]
    assert content[slot]["cache_control"] == EPHEMERAL
    plain = dict(content[slot])
    del plain["cache_control"]
    original = prompt[position]["content"]
    original = [{"type": "text", "text": original}] if isinstance(original, str) else original
    assert plain == original[slot]
    assert content[:slot] == original[:slot] and content[slot + 1 :] == original[slot + 1 :]


def test_the_hint_passes_over_what_cannot_carry_it_to_an_earlier_message() -> None:
    """Messages that are no mapping, contents of another kind, blocks that are no
    mapping and a text block with no text are passed over, in that order back."""
    prompt: list[Any] = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        "not a message",
        {"role": "assistant", "content": 42},
        {"role": "user", "content": [{"type": "text", "text": "third"}, "odd", {"type": "text"}]},
        {"role": "user", "content": None},
    ]
    marked = with_cache_control(prompt, 6)
    assert marked[4]["content"][0] == {"type": "text", "text": "third", "cache_control": EPHEMERAL}
    marked = with_cache_control(prompt[:4], 4)
    assert marked[1]["content"][0]["cache_control"] == EPHEMERAL
    marked = with_cache_control(prompt, 1)
    assert marked[0]["content"] == [{"type": "text", "text": "first", "cache_control": EPHEMERAL}]


def _tools() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix it"},
        {"role": "function_call", "content": '{"name": "ls", "arguments": {}, "id": "1"}'},
        {"role": "function_call_output", "content": '{"name": "ls", "content": "a", "id": "1"}'},
        {"role": "assistant", "content": "done"},
    ]


def test_without_a_promise_the_prefix_ends_at_the_first_tool_message() -> None:
    messages = _tools()
    assert stable_prefix(False, messages, list(messages), 0, 0, False) == 2
    assert stable_prefix(True, messages, list(messages), 0, 1, False) == 2  # a protected repeat
    rewritten = [messages[0], {"role": "user", "content": "fix it"}, *messages[2:]]
    assert stable_prefix(False, messages, rewritten, 0, 0, False) == 1  # an equal copy is not it
    assert stable_prefix(False, messages, [messages[0]], 0, 0, False) == 1
    assert stable_prefix(False, [], list(messages), 0, 0, False) == 0


def test_with_the_promise_the_prefix_is_all_but_the_notices() -> None:
    messages = _tools()
    prompt = [*messages, {"role": "user", "content": "a notice"}, {"role": "user", "content": "b"}]
    assert stable_prefix(True, messages, prompt, 0, 0, False) == 7
    assert stable_prefix(True, messages, prompt, 2, 0, False) == 5
    assert stable_prefix(True, messages, prompt, 2, 0, True) == 6  # joined into one turn
    assert stable_prefix(True, messages, prompt[:1], 3, 0, False) == 0


def test_the_reports_say_what_the_prefix_leaves_out() -> None:
    """The notices the strategies delivered (one message each, or one turn for a format
    whose notices join the last user turn), and the repeats they protected."""
    messages = _tools()
    prompt = [*messages, {"role": "user", "content": "a notice"}, {"role": "user", "content": "b"}]

    def report(delivered: int = 0, calls: int = 0, outputs: int = 0) -> SimpleNamespace:
        return SimpleNamespace(
            inbox_delivered=delivered, calls_protected=calls, outputs_protected=outputs
        )

    reports = [report(delivered=1), report(delivered=1)]
    assert hinted(True, messages, prompt, reports, None, False) == (prompt, 5)
    joined = adapter("anthropic")
    assert joined is not None and joined.notices_join_turn
    assert hinted(True, messages, prompt, reports, joined, False) == (prompt, 6)
    assert hinted(False, messages, prompt, reports, None, False)[1] == 2
    protecting = [report(calls=1, outputs=1)]  # a repeat kept whole: its call and output
    assert hinted(True, messages, prompt, protecting, None, False)[1] == 2
    hinted_prompt, stable = hinted(True, messages, prompt, [report()], joined, True)
    assert stable == 7 and hinted_prompt[6]["content"][0]["cache_control"] == EPHEMERAL
