"""Hypothesis generators of well-formed provider conversations with awkward but valid
features (parallel calls, content-part lists, images, unknown part types, pending
calls at the end, extra keys, system messages in the middle, huge and non-ASCII
outputs, nested and non-object arguments). Test code only."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Message = dict[str, Any]


def output_text(data: st.DataObject, tag: str) -> str:
    """A tool output: short, long, very long, non-ASCII (with U+2028) or empty."""
    kind = data.draw(st.sampled_from(["short", "long", "huge", "unicode", "empty"]))
    texts = {
        "short": f"out {tag}",
        "long": f"{tag} " + "y" * 1500,
        "huge": f"{tag} " + "z" * 30000,
        "unicode": f"{tag} é漢😀\u2028" * 200,
        "empty": "",
    }
    return texts[kind]


def _arguments(data: st.DataObject, tag: str) -> dict[str, Any] | list[Any]:
    kind = data.draw(st.sampled_from(["small", "long", "nested", "array"]))
    if kind == "small":
        return {"cmd": f"ls {tag}"}
    if kind == "long":
        return {"cmd": "cat " + "p" * 600, "n": 1}
    if kind == "nested":
        return {"q": {"a": [{"b": "v" * 500}]}, "s": "w" * 400}
    return ["x" * 300]  # arguments that are not an object


def chat(data: st.DataObject, turns: int) -> list[Message]:
    """OpenAI Chat: assistant ``tool_calls`` answered by ``tool`` messages."""
    messages: list[Message] = [
        {"role": "system", "content": "sys", "x_extra": {"k": [1]}},
        {"role": "user", "content": "task"},
    ]
    made = 0
    for turn in range(turns):
        if data.draw(st.integers(0, 6)) == 0:
            parts = [
                {"type": "text", "text": "more"},
                {"type": "image_url", "image_url": {"url": "u"}},
            ]
            messages.append(
                {"role": "user", "content": data.draw(st.sampled_from(["more", parts]))}
            )
        if data.draw(st.integers(0, 8)) == 0:
            messages.append({"role": "system", "content": "mid system"})
        ids = [f"c{made + k}" for k in range(data.draw(st.integers(1, 3)))]
        made += len(ids)
        text = data.draw(
            st.sampled_from([None, "", "thinking aloud", [{"type": "text", "text": "t"}]])
        )
        calls = [
            {
                "id": ident,
                "type": "function",
                "function": {
                    "name": data.draw(st.sampled_from(["bash", "read_file"])),
                    "arguments": json.dumps(_arguments(data, ident)),
                },
            }
            for ident in ids
        ]
        turn_message: Message = {"role": "assistant", "content": text, "tool_calls": calls}
        if data.draw(st.booleans()):
            turn_message["reasoning_content"] = "r"
        messages.append(turn_message)
        if turn == turns - 1 and data.draw(st.integers(0, 3)) == 0:
            break  # calls still pending at the end
        for ident in ids:
            content: Any = output_text(data, ident)
            if data.draw(st.integers(0, 5)) == 0:
                content = [
                    {"type": "text", "text": content},
                    {"type": "image_url", "image_url": {"url": "u"}},
                ]
            messages.append({"role": "tool", "tool_call_id": ident, "content": content})
        if data.draw(st.integers(0, 5)) == 0:
            messages += [
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "next"},
            ]
    return messages


def _result_content(data: st.DataObject, ident: str) -> Any:
    kind = data.draw(st.integers(0, 5))
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * 2000},
    }
    if kind == 0:
        return [{"type": "text", "text": output_text(data, ident)}, image]
    if kind == 1:
        return [
            {"type": "text", "text": output_text(data, ident)},
            {"type": "unknown_part", "x": 1},
        ]
    if kind == 2:
        source = {"type": "text", "media_type": "text/plain", "data": "D" * 3000}
        return [{"type": "document", "source": source}]
    return output_text(data, ident)


def anthropic(data: st.DataObject, turns: int) -> list[Message]:
    """Anthropic Messages: ``tool_use`` blocks answered by ``tool_result`` blocks."""
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
    }
    first = data.draw(st.sampled_from(["task", [{"type": "text", "text": "task"}, image]]))
    messages: list[Message] = [{"role": "user", "content": first}]
    made = 0
    for turn in range(turns):
        ids = [f"toolu_{made + k}" for k in range(data.draw(st.integers(1, 3)))]
        made += len(ids)
        blocks: list[Message] = []
        if data.draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": "plan", "signature": "sig"})
        if data.draw(st.integers(0, 5)) == 0:
            blocks.append({"type": "redacted_thinking", "data": "xx"})
        if data.draw(st.booleans()):
            blocks.append({"type": "text", "text": "doing"})
        for ident in ids:
            tool_input = data.draw(
                st.sampled_from(
                    [{"cmd": "ls"}, {"path": "f" * 700}, {"q": {"deep": ["v" * 500]}}, {}]
                )
            )
            blocks.append({"type": "tool_use", "id": ident, "name": "bash", "input": tool_input})
        messages.append({"role": "assistant", "content": blocks})
        if turn == turns - 1 and data.draw(st.integers(0, 3)) == 0:
            break
        results: list[Message] = []
        for ident in ids:
            result: Message = {
                "type": "tool_result",
                "tool_use_id": ident,
                "content": _result_content(data, ident),
            }
            if data.draw(st.integers(0, 4)) == 0:
                result["is_error"] = True
            if result["content"] == "":
                del result["content"]
            results.append(result)
        if data.draw(st.integers(0, 3)) == 0:
            results.append({"type": "text", "text": "the user says more"})
        messages.append({"role": "user", "content": results})
        if data.draw(st.integers(0, 6)) == 0:
            messages += [
                {"role": "assistant", "content": "plain answer"},
                {"role": "user", "content": "go on"},
            ]
    return messages


def responses(data: st.DataObject, turns: int) -> list[Message]:
    """OpenAI Responses items: ``function_call`` / ``function_call_output`` by ``call_id``."""
    items: list[Message] = [{"type": "message", "role": "user", "content": "task"}]
    if data.draw(st.booleans()):
        items.insert(
            0,
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "dev"}],
            },
        )
    made = 0
    for turn in range(turns):
        if data.draw(st.booleans()):
            items.append(
                {"type": "reasoning", "id": f"rs_{turn}", "summary": [], "encrypted_content": "e"}
            )
        if data.draw(st.booleans()):
            text = {"type": "output_text", "text": "doing", "annotations": []}
            items.append(
                {"type": "message", "role": "assistant", "id": f"msg_{turn}", "content": [text]}
            )
        ids = [f"call_{made + k}" for k in range(data.draw(st.integers(1, 3)))]
        made += len(ids)
        for ident in ids:
            arguments = json.dumps(_arguments(data, ident))
            items.append(
                {
                    "type": "function_call",
                    "id": "fc_" + ident,
                    "call_id": ident,
                    "name": "bash",
                    "arguments": arguments,
                    "status": "completed",
                }
            )
        if turn == turns - 1 and data.draw(st.integers(0, 3)) == 0:
            break
        for ident in ids:
            output: Any = output_text(data, ident)
            if data.draw(st.integers(0, 5)) == 0:
                output = [
                    {"type": "input_text", "text": output},
                    {"type": "input_image", "image_url": "u"},
                ]
            items.append({"type": "function_call_output", "call_id": ident, "output": output})
        if data.draw(st.integers(0, 5)) == 0:
            items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "more"}],
                }
            )
    return items


BUILDERS: dict[str, Callable[[st.DataObject, int], list[Message]]] = {
    "openai-chat": chat,
    "anthropic": anthropic,
    "openai-responses": responses,
}
