"""The format-overhead figures of ``scripts/bench`` (docs/PERFORMANCE.md).

The same synthetic conversation is prepared in the scout format and in the
OpenAI Chat format (each scout call an assistant message's ``tool_calls``
entry, each output a ``tool`` message); the ratio of the two medians is the
cost of reading and writing the provider format. Like an agent, each call
sends the same message objects again with the texts it keeps for its
conversation (``prepare(texts=...)``, a :class:`scoutd.ConversationTexts`),
so the OpenAI Chat view reuses the texts of the previous call and the
strategies what they parsed from them; ``format_openai_chat_cold_ms_N`` is the
same call without them (a conversation seen for the first time).

``format_anthropic_ms_N`` and ``format_openai_responses_ms_N`` are the same
conversation as Anthropic Messages and OpenAI Responses input items (converted
from the OpenAI Chat form by :mod:`scoutd.testing.derive`), each timed in turn
with the scout format on its own, each with texts of its own. Their ratios to
the scout format are recorded, not judged.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

import scoutd
from scoutd.testing.derive import to_anthropic, to_responses

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def as_openai_chat(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scout conversation in OpenAI Chat form; calls in a row share one message."""
    out: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] | None = None
    for message in messages:
        role = message["role"]
        if role == "function_call":
            body = _decode(message["content"])
            if calls is None:
                calls = []
                out.append({"role": "assistant", "content": None, "tool_calls": calls})
            arguments = _encode(body.get("arguments") or {}).decode()
            calls.append(
                {
                    "id": body["id"],
                    "type": "function",
                    "function": {"name": body["name"], "arguments": arguments},
                }
            )
            continue
        calls = None
        if role == "function_call_output":
            body = _decode(message["content"])
            content = body["content"]
            text = content if isinstance(content, str) else _encode(content).decode()
            out.append({"role": "tool", "tool_call_id": body["id"], "content": text})
        else:
            out.append(message)
    return out


def bench_formats(
    results: dict[str, Any],
    key: int,
    messages: list[dict[str, Any]],
    runs: int,
    warmup: int,
    interleaved: Callable[..., dict[str, list[float]]],
) -> None:
    """``format_scout_ms_N``, ``format_openai_chat_ms_N`` and their ratio ``format_overhead_N``;
    ``format_openai_chat_cold_ms_N`` and ``format_overhead_cold_N`` without the reused texts."""
    chat = as_openai_chat(messages)
    snapshot = scoutd.load_config()
    check = scoutd.prepare(chat, config=snapshot).report[-1]
    assert check.format == "openai-chat" and check.malformed == 0, "conversion is not faithful"

    kept = scoutd.ConversationTexts()  # what the agent keeps for its conversation
    samples = interleaved(
        {
            "scout": lambda: scoutd.prepare_prompt(messages, config=snapshot),
            "chat": lambda: scoutd.prepare_prompt(chat, config=snapshot, texts=kept),
            # the texts (and parsed bodies) of no previous call
            "cold": lambda: scoutd.prepare_prompt(chat, config=snapshot),
        },
        runs,
        warmup,
    )
    scout = statistics.median(samples["scout"])
    openai = statistics.median(samples["chat"])
    cold = statistics.median(samples["cold"])
    results[f"format_scout_ms_{key}"] = round(scout * 1000, 3)
    results[f"format_openai_chat_ms_{key}"] = round(openai * 1000, 3)
    results[f"format_overhead_{key}"] = round(openai / scout, 3) if scout else None
    results[f"format_openai_chat_cold_ms_{key}"] = round(cold * 1000, 3)
    results[f"format_overhead_cold_{key}"] = round(cold / scout, 3) if scout else None
    for name, converted in (
        ("anthropic", to_anthropic(chat)),
        ("openai_responses", to_responses(chat)),
    ):
        check = scoutd.prepare(converted, config=snapshot).report[-1]
        assert check.malformed == 0, f"the {name} conversion is not faithful"
        own = scoutd.ConversationTexts()  # this conversation's, as its agent keeps them
        samples = interleaved(
            {
                "scout": lambda: scoutd.prepare_prompt(messages, config=snapshot),
                name: lambda m=converted, k=own: scoutd.prepare_prompt(m, config=snapshot, texts=k),
            },
            runs,
            warmup,
        )
        provider = statistics.median(samples[name])
        scout = statistics.median(samples["scout"])
        results[f"format_{name}_ms_{key}"] = round(provider * 1000, 3)
        results[f"format_{name}_overhead_{key}"] = round(provider / scout, 3) if scout else None
