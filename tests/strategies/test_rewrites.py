"""Rewriting one tool message, with and without a session's :class:`RewriteCache`.

The shortened contents are checked against the plain reference in ``oracle.py``
(``oracle.rewritten``), first computed, then remembered: a remembered rewrite
must be the one computed, and the cache must count and bound what it holds.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scoutd.strategies.rewrites import (
    RewriteCache,
    shortened_call,
    shortened_output,
)
from scoutd.strategies.tool_messages import ToolBody, index_tools

from . import oracle
from .conversations import agent_conversations, call, output

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rewrite(
    body: ToolBody, content: str, is_call: bool, cache: RewriteCache | None = None
) -> str | None:
    return (shortened_call if is_call else shortened_output)(body, content, cache)


@PROPERTY
@given(messages=agent_conversations(max_steps=30))
def test_rewrites_match_the_reference_computed_and_remembered(messages: list[Any]) -> None:
    index = index_tools(messages)
    reference = oracle.pair(messages)
    expected = [oracle.rewritten(tool) for tool in reference.tools]
    for rewrite in expected:
        event("rewritten" if rewrite is not None else "unchanged")
    contents = [index.content(messages, slot) for slot in range(len(index.indices))]
    plain = [
        _rewrite(body, text, is_call)
        for body, text, is_call in zip(index.bodies, contents, index.is_call, strict=True)
    ]
    assert plain == expected
    cache = RewriteCache()
    for _ in range(2):  # the second pass finds every rewrite remembered
        got = [
            _rewrite(body, text, is_call, cache)
            for body, text, is_call in zip(index.bodies, contents, index.is_call, strict=True)
        ]
        assert got == expected
    computed = len(cache.calls) + len(cache.outputs)
    assert cache.misses == computed
    assert cache.hits >= computed  # every remembered content was asked again
    remembered = {**cache.calls, **cache.outputs}
    for text, rewrite in zip(contents, expected, strict=True):
        if text in remembered:
            assert remembered[text] == rewrite


def _long_call(n: int) -> tuple[ToolBody, str]:
    message = call("read", {"path": f"{n}:" + "p" * 300}, f"c{n}")
    index = index_tools([message])
    return index.bodies[0], message["content"]


def test_a_remembered_rewrite_is_counted_as_a_hit_and_not_recomputed() -> None:
    body, content = _long_call(1)
    first = shortened_call(body, content)
    assert first is not None and len(first) < len(content)
    cache = RewriteCache()
    assert shortened_call(body, content, cache) == first
    assert (cache.hits, cache.misses) == (0, 1)
    assert cache.calls == {content: first} and cache.outputs == {}
    cache.calls[content] = "remembered"  # what the cache holds is what is returned
    assert shortened_call(body, content, cache) == "remembered"
    assert shortened_call(body, content, cache) == "remembered"
    assert (cache.hits, cache.misses) == (2, 1)


def test_an_output_that_stays_short_is_remembered_as_unchanged() -> None:
    """Its JSON text is long (escapes) but the decoded content fits: None, remembered."""
    message = output("read", "\n" * 300, "c1")  # 300 characters, 600 in JSON
    index = index_tools([message])
    body, content = index.bodies[0], message["content"]
    cache = RewriteCache()
    assert shortened_output(body, content, cache) is None
    assert cache.outputs == {content: None}
    assert shortened_output(body, content, cache) is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_only_the_cache_passed_is_used_and_none_without_one() -> None:
    body, content = _long_call(2)
    outer, inner = RewriteCache(), RewriteCache()
    shortened_call(body, content, inner)
    assert (inner.misses, outer.misses) == (1, 0)
    shortened_call(body, content, outer)
    assert (inner.misses, outer.misses) == (1, 1)
    expected = shortened_call(body, content)
    assert (inner.misses, outer.misses, inner.hits, outer.hits) == (1, 1, 0, 0)
    assert expected == outer.calls[content]


def test_the_cache_starts_afresh_past_its_limit() -> None:
    cache = RewriteCache(limit=3)
    assert RewriteCache().limit == 8192
    calls = [_long_call(n) for n in range(7)]
    sizes = []
    for body, content in calls:
        shortened_call(body, content, cache)
        sizes.append(len(cache.calls))
    # three entries at most: the fourth rewrite finds the table full and clears it
    assert sizes == [1, 2, 3, 1, 2, 3, 1]
    assert cache.misses == 7 and cache.hits == 0
    assert list(cache.calls) == [calls[6][1]]


def test_the_limit_is_per_table() -> None:
    cache = RewriteCache(limit=2)
    for n in range(2):
        body, content = _long_call(n)
        shortened_call(body, content, cache)
    message = output("read", "o" * 500, "c9")
    index = index_tools([message])
    shortened_output(index.bodies[0], message["content"], cache)
    assert len(cache.calls) == 2 and len(cache.outputs) == 1


def test_forget_drops_every_rewrite_but_keeps_the_counts() -> None:
    cache = RewriteCache()
    body, content = _long_call(3)
    message = output("read", "o" * 500, "c9")
    index = index_tools([message])
    shortened_call(body, content, cache)
    shortened_output(index.bodies[0], message["content"], cache)
    cache.forget()
    assert cache.calls == {} and cache.outputs == {}
    shortened_call(body, content, cache)
    assert (cache.hits, cache.misses) == (0, 3)
    assert len(cache.calls) == 1


@given(st.integers(min_value=0, max_value=3))
def test_cache_counts_are_exact(repeats: int) -> None:
    body, content = _long_call(4)
    cache = RewriteCache()
    for _ in range(repeats + 1):
        shortened_call(body, content, cache)
    assert (cache.hits, cache.misses) == (repeats, 1)
    remembered = cache.calls[content]
    assert remembered is not None
    decoded = json.loads(remembered)
    assert decoded["arguments"]["path"].startswith("Truncated (302): 4:")


def _output_of_raw_size(size: int, kind: str) -> dict[str, Any]:
    """An output whose ``content`` is ``size`` characters of JSON text, of the given kind."""
    if kind == "string":
        value: Any = "s" * (size - 2)
    elif kind == "spaced list":  # JSON longer than its compact text
        return {
            "role": "function_call_output",
            "content": '{"id": "c", "content": [' + " " * (size - 3) + "1]}",
        }
    else:
        value = [7] * ((size - 1) // 2)
        assert len(json.dumps(value, separators=(",", ":"))) == size
    return output("read", value, "c")


@given(
    st.integers(min_value=396, max_value=404),
    st.sampled_from(["string", "spaced list", "list"]),
)
def test_only_outputs_whose_json_passes_the_limit_are_rewritten_or_remembered(
    size: int, kind: str
) -> None:
    """An output is shortened when its text passes 400 characters; one whose JSON
    content fits is not even decoded, so the session cache does not fill with it."""
    if kind == "list" and size % 2 == 0:
        size += 1  # a list of 7s has an odd length
    message = _output_of_raw_size(size, kind)
    index = index_tools([message])
    (tool,) = oracle.pair([message]).tools
    cache = RewriteCache()
    got = shortened_output(index.bodies[0], message["content"], cache)
    assert got == oracle.rewritten(tool)
    event(f"{kind}: {'rewritten' if got is not None else 'unchanged'}")
    if size <= 400:
        assert got is None
        assert cache.outputs == {} and cache.misses == 0
    else:
        assert cache.misses == 1 and list(cache.outputs) == [message["content"]]
