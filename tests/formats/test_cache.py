"""The Anthropic cache hint over malformed blocks (scoutd/formats/cache.py).

A block's ``type`` is read from the caller's messages: whatever JSON value it
holds, ``with_cache_control`` compares it only once it is a string, never
hashes it, never raises, and marks only a well-formed block.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.formats.cache import with_cache_control

EPHEMERAL = {"type": "ephemeral"}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
block_types = st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use", "image"])
blocks = st.fixed_dictionaries(
    {"type": block_types | json_values}, optional={"text": json_values | st.text(max_size=8)}
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"])},
    optional={"content": st.lists(blocks | json_values, max_size=4) | json_values},
)


def test_a_type_that_is_a_list_or_an_object_is_skipped() -> None:
    """It used to raise ``TypeError: unhashable type`` (``-32603`` in the daemon)."""
    for odd in (["text"], {"type": "text"}, None, 3):
        prompt: list[Any] = [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}, {"type": odd}]},
        ]
        marked = with_cache_control(prompt, 2)
        assert marked[1]["content"] == [
            {"type": "text", "text": "hi", "cache_control": EPHEMERAL},
            {"type": odd},
        ]
        only_odd = [{"role": "user", "content": [{"type": odd, "text": "x"}]}]
        assert with_cache_control(only_odd, 1) is only_odd  # nothing well-formed to mark


def test_an_empty_text_is_skipped_whatever_its_text_holds() -> None:
    prompt: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": " "}]},
        {"role": "user", "content": [{"type": "text", "text": [1]}]},
    ]
    marked = with_cache_control(prompt, 2)
    assert marked[1]["content"][0]["cache_control"] == EPHEMERAL  # not a string: markable
    marked = with_cache_control(prompt, 1)
    assert marked[0]["content"] == [
        {"type": "text", "text": "a", "cache_control": EPHEMERAL},
        {"type": "text", "text": " "},
    ]


@settings(max_examples=300, deadline=None)
@given(prompt=st.lists(messages | json_values, max_size=5), prefix=st.integers(-1, 6))
def test_any_prompt_gets_at_most_one_hint_on_a_well_formed_block(
    prompt: list[Any], prefix: int
) -> None:
    before = copy.deepcopy(prompt)
    marked = with_cache_control(prompt, prefix)
    assert prompt == before  # the input is never changed
    changed = [i for i, (a, b) in enumerate(zip(prompt, marked, strict=True)) if a is not b]
    assert len(changed) <= 1
    for position in changed:
        content = prompt[position]["content"]
        was = [{"type": "text", "text": content}] if type(content) is str else content
        now = marked[position]["content"]
        # identity first: a NaN block left alone is the same object, yet unequal to itself
        differ = [
            slot for slot, (a, b) in enumerate(zip(was, now, strict=True)) if a is not b and a != b
        ]
        assert len(differ) == 1
        block = now[differ[0]]
        assert block == {**was[differ[0]], "cache_control": EPHEMERAL}
        assert type(block["type"]) is str and "thinking" not in block["type"]


def test_a_prompt_with_marks_of_its_own_gets_none() -> None:
    """Anthropic refuses a fifth mark (system and tools count too, unseen here) and a
    5-minute mark before a 1-hour one: an agent that marks its own messages, even
    inside a tool result, places every mark itself."""
    hour = {"type": "ephemeral", "ttl": "1h"}
    prompts: list[list[Any]] = [
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a", "cache_control": EPHEMERAL}],
            },
            {"role": "assistant", "content": "b"},
        ],
        [
            {"role": "user", "content": "a"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "text", "text": "out", "cache_control": hour}],
                    }
                ],
            },
        ],
    ]
    for prompt in prompts:
        assert with_cache_control(prompt, len(prompt)) is prompt
        unmarked = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
        assert with_cache_control(unmarked, 2)[1]["content"][0]["cache_control"] == EPHEMERAL
