"""The most work per byte each format can ask for: conversations built to be costly.

Each builder takes ``n`` (turns, or calls in one turn) and returns a conversation
whose size grows linearly with ``n``. The shapes are those that once took, or
could take, more than linear time: Anthropic user turns holding a
``tool_result`` and a text block (joined into one turn once their calls are
dropped), parallel calls in one turn, calls answered out of order or not at
all, repeated call ids, identical repeated calls, orphan outputs, a PDF made
of the markers its page count searches for. Small payloads, so that a megabyte
holds as many messages as it can.

Shared by the complexity tests (``tests/formats/test_linear.py``), the
in-process fuzzer (``tests/formats/test_hostile.py``), ``scripts/fuzz-rpc`` and
the CPU-per-megabyte rows of ``scripts/bench`` (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

Builder = Callable[[int], list[dict[str, Any]]]
OUT = "x" * 40  # a short output: many messages per byte


def _use(ident: str, value: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": "f", "input": {"a": value}}


def _result(ident: str, content: Any = OUT) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": ident, "content": content}


def anthropic_result_and_text(n: int) -> list[dict[str, Any]]:
    """User turns holding a result and a text block: dropped calls join them all."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        messages.append({"role": "assistant", "content": [_use(f"t{i}", i)]})
        text = {"type": "text", "text": "go on"}
        messages.append({"role": "user", "content": [_result(f"t{i}"), text]})
    return messages


def anthropic_two_calls(n: int) -> list[dict[str, Any]]:
    """Two calls a turn, the second repeated identically, results and text after."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        messages.append({"role": "assistant", "content": [_use(f"a{i}", i), _use(f"b{i}", 0)]})
        blocks = [_result(f"a{i}"), _result(f"b{i}", "y"), {"type": "text", "text": "t"}]
        messages.append({"role": "user", "content": blocks})
    return messages


def anthropic_parallel(n: int) -> list[dict[str, Any]]:
    """One turn of ``n`` calls, one turn of their results (listed in reverse)."""
    uses = [_use(f"t{i}", i) for i in range(n)]
    results = [_result(f"t{i}", [{"type": "text", "text": OUT}]) for i in reversed(range(n))]
    return [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": [{"type": "text", "text": "all at once"}, *uses]},
        {"role": "user", "content": [*results, {"type": "text", "text": "go"}]},
        {"role": "assistant", "content": "done"},
    ]


def anthropic_narrated(n: int) -> list[dict[str, Any]]:
    """Turns of thinking, text and a call; results as block lists."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
        text = {"type": "text", "text": "let me"}
        messages.append({"role": "assistant", "content": [thinking, text, _use(f"t{i}", i)]})
        content = [{"type": "text", "text": OUT}]
        messages.append({"role": "user", "content": [_result(f"t{i}", content)]})
    return messages


def anthropic_misplaced(n: int) -> list[dict[str, Any]]:
    """Every result before its call: all malformed, passed through."""
    messages: list[dict[str, Any]] = []
    for i in range(n):
        text = {"type": "text", "text": "t"}
        messages.append({"role": "user", "content": [_result(f"t{i}"), text]})
        messages.append({"role": "assistant", "content": [_use(f"t{i}", i)]})
    return messages


# The structure a PDF's page count looks for (scoutd/strategies/media_data.py, pdf_pages):
# object stream markers, with and without a stream after them, page tree nodes and
# counts, a page. Each object stream marker once looked for its stream's end up to the
# data's end: a PDF of such markers cost time growing with the square of its size.
PDF_MARKERS = b"/Type/ObjStm stream\n/FlateDecode/Type/ObjStm /Type /Pages /Count 1 /Type /Page "


def anthropic_pdf_markers(n: int) -> list[dict[str, Any]]:
    """A user turn holding a PDF made of ``n`` runs of :data:`PDF_MARKERS`, then a call and
    its result (a conversation with a finished round is counted whole)."""
    data = base64.b64encode(b"%PDF-1.7\n" + PDF_MARKERS * n).decode()
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    document = {"type": "document", "source": source}
    return [
        {"role": "user", "content": [document, {"type": "text", "text": "read it"}]},
        {"role": "assistant", "content": [_use("t0", 0)]},
        {"role": "user", "content": [_result("t0")]},
    ]


def _call(ident: str, value: Any, name: str = "f") -> dict[str, Any]:
    arguments = json.dumps({"a": value})
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_pairs(n: int) -> list[dict[str, Any]]:
    """One call a turn, its ``tool`` message after."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        messages.append({"role": "assistant", "content": None, "tool_calls": [_call(f"c{i}", i)]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": OUT})
    return messages


def chat_parallel_reversed(n: int) -> list[dict[str, Any]]:
    """One message of ``n`` calls, answered in reverse order."""
    calls = [_call(f"c{i}", i) for i in range(n)]
    answers = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": OUT} for i in reversed(range(n))
    ]
    return [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": "all at once", "tool_calls": calls},
        *answers,
        {"role": "user", "content": "next"},
    ]


def chat_parallel_unanswered(n: int) -> list[dict[str, Any]]:
    """One message of ``n`` calls, its first answer missing: the group is malformed."""
    messages = chat_parallel_reversed(n)
    del messages[-2]
    return messages


def chat_text_and_two_calls(n: int) -> list[dict[str, Any]]:
    """Text as blocks beside two calls, the second repeated identically."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        content = [{"type": "text", "text": "let me"}]
        calls = [_call(f"c{i}", i), _call(f"d{i}", 0, "g")]
        messages.append({"role": "assistant", "content": content, "tool_calls": calls})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": OUT})
        messages.append({"role": "tool", "tool_call_id": f"d{i}", "content": "y"})
    return messages


def chat_orphans(n: int) -> list[dict[str, Any]]:
    """``tool`` messages answering nothing."""
    orphans = [{"role": "tool", "tool_call_id": f"c{i}", "content": OUT} for i in range(n)]
    return [{"role": "user", "content": "start"}, *orphans]


def _function_call(ident: str, value: Any) -> dict[str, Any]:
    arguments = json.dumps({"a": value})
    return {"type": "function_call", "call_id": ident, "name": "f", "arguments": arguments}


def _function_output(ident: str, output: Any = OUT) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": ident, "output": output}


def responses_turns(n: int) -> list[dict[str, Any]]:
    """Reasoning, assistant text, a call and its output, turn after turn."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "start"}]
    for i in range(n):
        text = [{"type": "output_text", "text": "hm"}]
        items.append({"type": "reasoning", "id": f"r{i}", "summary": []})
        items.append({"type": "message", "role": "assistant", "content": text})
        items.append(_function_call(f"c{i}", i))
        items.append(_function_output(f"c{i}", [{"type": "input_text", "text": OUT}]))
    return items


def responses_one_turn(n: int) -> list[dict[str, Any]]:
    """One reasoning item, ``n`` calls, then their outputs in reverse."""
    calls = [_function_call(f"c{i}", i) for i in range(n)]
    outputs = [_function_output(f"c{i}") for i in reversed(range(n))]
    start = {"type": "message", "role": "user", "content": "start"}
    return [start, {"type": "reasoning", "id": "r", "summary": []}, *calls, *outputs]


def responses_same_id(n: int) -> list[dict[str, Any]]:
    """Every call and output with one call id: all malformed."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "start"}]
    for i in range(n):
        items += [_function_call("same", i), _function_output("same")]
    return items


def _scout_call(ident: str, value: Any) -> dict[str, Any]:
    body = {"name": "f", "id": ident, "arguments": {"a": value}}
    return {"role": "function_call", "content": json.dumps(body)}


def _scout_output(ident: str) -> dict[str, Any]:
    return {"role": "function_call_output", "content": json.dumps({"id": ident, "content": OUT})}


def scout_pairs(n: int) -> list[dict[str, Any]]:
    """Call, output, call, output."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        messages += [_scout_call(f"c{i}", i), _scout_output(f"c{i}")]
    return messages


def scout_repeats(n: int) -> list[dict[str, Any]]:
    """The same call again and again: every pair a repeat of the first."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        messages += [_scout_call(f"c{i}", 0), _scout_output(f"c{i}")]
    return messages


def scout_calls_then_outputs(n: int) -> list[dict[str, Any]]:
    """``n`` calls, then their outputs: every pair open across the others."""
    calls = [_scout_call(f"c{i}", i) for i in range(n)]
    outputs = [_scout_output(f"c{i}") for i in range(n)]
    return [{"role": "user", "content": "start"}, *calls, *outputs]


def scout_repeats_answered_backwards(n: int) -> list[dict[str, Any]]:
    """``n`` identical calls, then their outputs newest call first: every pair
    completes before all the pairs already seen, in call order."""
    calls = [_scout_call(f"c{i}", 0) for i in range(n)]
    outputs = [_scout_output(f"c{i}") for i in reversed(range(n))]
    return [{"role": "user", "content": "start"}, *calls, *outputs]


def scout_interrupted(n: int) -> list[dict[str, Any]]:
    """A user message between each call and its output."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(n):
        interjection = {"role": "user", "content": "wait"}
        messages += [_scout_call(f"c{i}", i), interjection, _scout_output(f"c{i}")]
    return messages


WORST: dict[str, tuple[Builder, ...]] = {
    "anthropic": (
        anthropic_result_and_text,
        anthropic_two_calls,
        anthropic_parallel,
        anthropic_narrated,
        anthropic_misplaced,
        anthropic_pdf_markers,
    ),
    "openai-chat": (
        chat_pairs,
        chat_parallel_reversed,
        chat_parallel_unanswered,
        chat_text_and_two_calls,
        chat_orphans,
    ),
    "openai-responses": (responses_turns, responses_one_turn, responses_same_id),
    "scout": (
        scout_pairs,
        scout_repeats,
        scout_calls_then_outputs,
        scout_repeats_answered_backwards,
        scout_interrupted,
    ),
}
