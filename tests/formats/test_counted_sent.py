"""Everything a prompt sends is counted: no prepared prompt overflows its window.

The default strategy counts the scout view of a conversation, whose messages
carry the provider's content; whatever the adapter passes through must still be
counted for what it sends. Drawn conversations in the three provider formats
hold tool pairs and, among them, messages that send more than a plain content:
outputs and calls that pair with none, items of types the adapter does not
know, duplicate call ids, an assistant's refusal or audio, a user's name, the
calls of a malformed group or a legacy ``function_call``, a server tool's
result, text and an image beside tool results, the citations of a text block,
a message of one of scoutd's own tool roles.
Each is prepared by the default under a window drawn between the least prompt
its configuration can send (the newest outputs whole, everything it may not
remove, a notice) and the whole conversation. An independent oracle bills the
prepared prompt as its provider would (every message's JSON at 4 characters a
token, an image at its documented cost): it must fit the window, and stay
valid in its format.

Before, a Responses output of no call, a call whose output never came, an item
of an unknown type and duplicate calls were counted as empty, as were a Chat
refusal, audio, name, the calls of a group passed through, and an Anthropic
text block's citations, and a message of a scout tool role (``function_call_output``)
in any format: a prompt holding one went past its window uncompacted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoutd
from tests.formats.drawn import SETTINGS
from tests.formats.validity import new_problems
from tests.strategies.test_media_costs import anthropic_image, png
from tests.strategies.test_media_overflow import Oracle

FORMATS = ("openai-chat", "openai-responses", "anthropic")
# What the prompt holds beyond what it may remove: room for the shortened pairs
# (two by default) and the compaction notice, in tokens.
_SLACK = 1_500
# Fewer examples than the other drawn properties: there is one property per kind.
EXAMPLES = settings(SETTINGS, max_examples=40)
# The share of the window the default fills at most (``compaction_limit_share``),
# a little below: what the oracle bills beyond the estimate (each message's keys).
_FILL = 0.7


@dataclass
class Drawn:
    """A conversation made of segments: pairs (which the default may remove) and the
    rest, which it keeps."""

    fmt: str
    oracle: Oracle = field(default_factory=Oracle)
    segments: list[tuple[bool, list[dict[str, Any]]]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    def messages(self) -> list[dict[str, Any]]:
        return [m for _, segment in self.segments for m in segment]

    def floor(self, newest: int) -> int:
        """The least prompt the default can send: every segment but the pairs older than
        the ``newest`` whole ones, and room for the shortened pairs and the notice."""
        pairs = [i for i, (pair, _) in enumerate(self.segments) if pair]
        removable = set(pairs[: max(0, len(pairs) - newest)])
        kept = [m for i, (_, seg) in enumerate(self.segments) if i not in removable for m in seg]
        return self.oracle.bill(kept) + _SLACK


def _pair(fmt: str, ident: str, arguments: dict[str, Any], output: str) -> list[dict[str, Any]]:
    if fmt == "openai-chat":
        function = {"name": "read", "arguments": json.dumps(arguments)}
        call = {"id": ident, "type": "function", "function": function}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": ident, "content": output},
        ]
    if fmt == "openai-responses":
        return [
            {
                "type": "function_call",
                "call_id": ident,
                "name": "read",
                "arguments": json.dumps(arguments),
            },
            {"type": "function_call_output", "call_id": ident, "output": output},
        ]
    use = {"type": "tool_use", "id": ident, "name": "read", "input": arguments}
    result = {"type": "tool_result", "tool_use_id": ident, "content": output}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def _user(fmt: str, text: str) -> dict[str, Any]:
    if fmt == "openai-responses":
        return {"type": "message", "role": "user", "content": text}
    return {"role": "user", "content": text}


def _chat_call(ident: str, arguments: str) -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": "run", "arguments": arguments}}


def _extra(drawn: Drawn, kind: str, big: str, n: int) -> tuple[bool, list[dict[str, Any]]]:
    """A segment that sends ``big`` outside the plain content the estimate reads;
    whether the default may remove it (it is a pair)."""
    ident, fmt = f"x{n}", drawn.fmt
    if kind == "foreign role":  # a message of a scout tool role, in a provider format
        foreign = {"role": "function_call_output", "content": big}
        if fmt == "openai-responses":
            foreign = {"type": "message", **foreign}
        return False, [foreign, _user(fmt, "go on")] if fmt == "anthropic" else [foreign]
    if fmt == "openai-responses":
        items: dict[str, list[dict[str, Any]]] = {
            "orphan output": [{"type": "function_call_output", "call_id": ident, "output": big}],
            "orphan custom output": [
                {"type": "custom_tool_call_output", "call_id": ident, "output": big}
            ],
            "orphan call": [
                {
                    "type": "function_call",
                    "call_id": ident,
                    "name": "run",
                    "arguments": json.dumps({"script": big}),
                },
                _user(fmt, "never mind"),
            ],
            "unknown item": [{"type": "vendor_note", "id": ident, "note": big}],
            "item without type": [{"id": ident, "note": big}],
            "duplicate calls": [
                {"type": "function_call", "call_id": ident, "name": "run", "arguments": "{}"},
                {"type": "function_call", "call_id": ident, "name": "run", "arguments": "{}"},
                {"type": "function_call_output", "call_id": ident, "output": big},
            ],
            "refusal": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "refusal", "refusal": big}],
                }
            ],
        }
        return False, items[kind]
    if fmt == "openai-chat":
        answered = [{"role": "tool", "tool_call_id": ident, "content": "done"}]
        segments: dict[str, tuple[bool, list[dict[str, Any]]]] = {
            "orphan tool": (  # after a user turn: right after a group, it would join it
                False,
                [_user(fmt, "fyi"), {"role": "tool", "tool_call_id": ident, "content": big}],
            ),
            "unanswered calls": (
                False,
                [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [_chat_call(ident, json.dumps({"script": big}))],
                    },
                    _user(fmt, "never mind"),
                ],
            ),
            "legacy call": (
                False,
                [
                    {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "run", "arguments": json.dumps({"s": big})},
                    },
                    {"role": "function", "name": "run", "content": "done"},
                ],
            ),
            "refusal": (False, [{"role": "assistant", "content": None, "refusal": big}]),
            "user name": (False, [{"role": "user", "content": "hello", "name": big}]),
            "audio": (False, [{"role": "assistant", "content": None, "audio": {"id": big}}]),
            "refusal beside calls": (
                True,
                [
                    {
                        "role": "assistant",
                        "content": "let me see",
                        "refusal": big,
                        "tool_calls": [_chat_call(ident, "{}")],
                    },
                    *answered,
                ],
            ),
            # DeepSeek's thinking mode takes back every tool turn's reasoning
            "reasoning beside calls": (
                True,
                [
                    {
                        "role": "assistant",
                        "content": "let me see",
                        "reasoning_content": big,
                        "tool_calls": [_chat_call(ident, "{}")],
                    },
                    *answered,
                ],
            ),
            "refusal part beside calls": (
                True,
                [
                    {
                        "role": "assistant",
                        "content": [{"type": "refusal", "refusal": big}],
                        "tool_calls": [_chat_call(ident, "{}")],
                    },
                    *answered,
                ],
            ),
        }
        return segments[kind]
    reply = {"role": "assistant", "content": "noted"}
    use = {"type": "tool_use", "id": ident, "name": "run", "input": {"script": big}}
    anthropic: dict[str, tuple[bool, list[dict[str, Any]]]] = {
        "orphan result": (
            False,
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": ident, "content": big}],
                },
                reply,
            ],
        ),
        "unanswered use": (
            False,
            [{"role": "user", "content": "go"}, {"role": "assistant", "content": [use]}],
        ),
        "server tool": (
            False,
            [
                {"role": "user", "content": "search"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "server_tool_use",
                            "id": ident,
                            "name": "web_fetch",
                            "input": {"url": "https://example.com"},
                        },
                        {
                            "type": "web_fetch_tool_result",
                            "tool_use_id": ident,
                            "content": {"type": "web_fetch_result", "text": big},
                        },
                    ],
                },
            ],
        ),
    }
    if kind in anthropic:
        return anthropic[kind]
    if kind == "citations":  # a turn of calls whose text cites a source: they go with it
        cited = {
            "type": "char_location",
            "cited_text": big,
            "document_index": 0,
            "start_char_index": 0,
            "end_char_index": len(big),
        }
        first, answer = _pair(fmt, ident, {"path": "a"}, "done")
        text = {"type": "text", "text": "as the page says", "citations": [cited]}
        first["content"] = [text, *first["content"]]
        return True, [first, answer]
    # text and an image beside the results of a pair: they stay when the pair goes
    image = drawn.oracle.add(
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": png(900, 700, 4_000)},
        },
        anthropic_image(900, 700),
    )
    first, answer = _pair(fmt, ident, {"path": "a"}, "done")
    answer["content"] = [*answer["content"], {"type": "text", "text": big}, image]
    return False, [first, answer]


KINDS = {
    "openai-responses": [
        "orphan output",
        "orphan custom output",
        "orphan call",
        "unknown item",
        "item without type",
        "duplicate calls",
        "refusal",
        "foreign role",
    ],
    "openai-chat": [
        "orphan tool",
        "unanswered calls",
        "legacy call",
        "refusal",
        "user name",
        "audio",
        "refusal beside calls",
        "reasoning beside calls",
        "refusal part beside calls",
        "foreign role",
    ],
    "anthropic": [
        "orphan result",
        "unanswered use",
        "server tool",
        "beside results",
        "citations",
        "foreign role",
    ],
}


@st.composite
def conversations(draw: st.DrawFn, fmt: str, kind: str) -> Drawn:
    """A user turn, 8 to 24 pairs, a segment of ``kind`` and up to two of other kinds,
    each sending 1,000 to 40,000 characters more than plain content."""
    drawn = Drawn(fmt)
    drawn.segments.append((False, [_user(fmt, "start")]))
    pairs = draw(st.integers(8, 24))
    extras = [kind, *draw(st.lists(st.sampled_from(KINDS[fmt]), max_size=2))]
    places = [draw(st.integers(0, pairs)) for _ in extras]
    bodies: list[tuple[bool, list[dict[str, Any]]]] = [
        (
            True,
            _pair(fmt, f"c{n}", {"path": f"f{n}"}, f"{n} " + "o" * draw(st.integers(800, 8_000))),
        )
        for n in range(pairs)
    ]
    for n, (extra, place) in sorted(enumerate(zip(extras, places, strict=True)), key=_place):
        big = "b" * draw(st.integers(1_000, 40_000))
        bodies.insert(place + len(drawn.kinds), _extra(drawn, extra, big, n))
        drawn.kinds.append(extra)
    drawn.segments.extend(bodies)
    last = drawn.messages()[-1]
    if fmt == "anthropic" and last["role"] == "assistant" and "tool_use" in json.dumps(last):
        drawn.segments.append((False, [_user(fmt, "skip that")]))
    return drawn


def _place(numbered: tuple[int, tuple[str, int]]) -> int:
    return numbered[1][1]


CASES = [(fmt, kind) for fmt in FORMATS for kind in KINDS[fmt]]


def fits_its_window(data: st.DataObject, drawn: Drawn) -> bool:
    """Prepare ``drawn`` with a window drawn between the least prompt the default can
    send and the whole conversation: the oracle's bill of the prompt fits the window,
    and the prompt stays valid in its format. Whether a compaction was needed and
    took place."""
    fmt, messages = drawn.fmt, drawn.messages()
    newest = data.draw(st.integers(1, 3))
    floor, total = drawn.floor(newest), drawn.oracle.bill(messages)
    least = int(floor / _FILL) + 1
    window = data.draw(st.integers(least, max(least, total - 1)))  # below the whole
    config = {"context_window": window, "cost_full_tool_outputs": newest}
    prepared = scoutd.prepare(messages, format=fmt, config=config)
    billed = drawn.oracle.bill(prepared.messages)
    assert billed <= window, (drawn.kinds, billed, window, total, floor)
    assert new_problems(fmt, messages, prepared.messages) == {}  # still valid
    return total > window and prepared.messages != messages


@pytest.mark.parametrize(("fmt", "kind"), CASES)
def test_no_prompt_passes_its_window_as_its_provider_counts(fmt: str, kind: str) -> None:
    reached: Counter[str] = Counter()

    @EXAMPLES
    @given(st.data())
    def check(data: st.DataObject) -> None:
        reached["examples"] += 1
        if fits_its_window(data, data.draw(conversations(fmt, kind))):
            reached["compacted"] += 1  # the window needed a compaction, which took place

    check()
    # most examples needed a compaction: the hidden size decided whether they fit
    assert reached["compacted"] >= 25, reached
