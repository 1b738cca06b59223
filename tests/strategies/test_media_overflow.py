"""A prompt holding media never overflows its window, as its provider bills it.

Conversations in the three provider formats whose tool outputs hold images,
multi-page PDFs and text documents, after user turns holding a PDF, an image
and (OpenAI) audio, are prepared by the default under windows from well below
to just above their documented total. An independent oracle bills each
prepared prompt by the documented rules (tests/strategies/test_media_costs.py:
text at 4 characters a token, each medium at its provider's cost), and the
prompt must fit the window. Before, every medium counted 1,500 tokens: a
tool output holding a 40-page PDF (120,000 tokens as billed) weighed as much
as one image, and the prompts went out at up to several times their window.
The compacted prompts stay valid in their format, and recall gives back every
removed or shortened output's text (its media as placeholders) exactly.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest

import scoutd
from scoutd.formats.view import blocks_text
from tests.formats.validity import new_problems
from tests.strategies.test_media_costs import (
    AUDIO_PER_SECOND,
    PAGE,
    anthropic_image,
    openai_image,
    pdf,
    png,
    text_tokens,
    wav,
)

FORMATS = ("openai-chat", "openai-responses", "anthropic")
MEDIA_TYPES = {"image", "image_url", "input_image", "document", "file", "input_file", "input_audio"}


class Oracle:
    """The documented cost of each medium the test made, by the block's JSON text."""

    def __init__(self) -> None:
        self.costs: dict[str, int] = {}

    def add(self, block: dict[str, Any], tokens: int) -> dict[str, Any]:
        self.costs[json.dumps(block, sort_keys=True)] = tokens
        return block

    def _strip(self, value: Any, found: list[int]) -> Any:
        if isinstance(value, dict):
            if value.get("type") in MEDIA_TYPES:
                found.append(self.costs[json.dumps(value, sort_keys=True)])
                return ""
            return {key: self._strip(item, found) for key, item in value.items()}
        if isinstance(value, list):
            return [self._strip(item, found) for item in value]
        return value

    def bill(self, messages: list[Any]) -> int:
        """The prompt's tokens: its text (media removed) at 4 characters a token, and
        each medium's documented cost."""
        found: list[int] = []
        text = json.dumps(self._strip(messages, found), separators=(",", ":"))
        return math.ceil(len(text) / 4) + sum(found)


def _image(oracle: Oracle, fmt: str, width: int, height: int) -> dict[str, Any]:
    data = png(width, height, padding=2_000)
    if fmt == "anthropic":
        block = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
        return oracle.add(block, anthropic_image(width, height))
    url = f"data:image/png;base64,{data}"
    if fmt == "openai-chat":
        return oracle.add(
            {"type": "image_url", "image_url": {"url": url}}, openai_image(width, height)
        )
    return oracle.add({"type": "input_image", "image_url": url}, openai_image(width, height))


def _pdf(oracle: Oracle, fmt: str, pages: int) -> dict[str, Any]:
    data = pdf(pages, packed=pages % 2 == 1, words=40)
    if fmt == "anthropic":
        source = {"type": "base64", "media_type": "application/pdf", "data": data}
        return oracle.add({"type": "document", "source": source}, pages * PAGE)
    url = f"data:application/pdf;base64,{data}"
    if fmt == "openai-chat":
        return oracle.add(
            {"type": "file", "file": {"filename": "r.pdf", "file_data": url}}, pages * PAGE
        )
    return oracle.add({"type": "input_file", "filename": "r.pdf", "file_data": url}, pages * PAGE)


def _text_document(oracle: Oracle, fmt: str, text: str) -> dict[str, Any]:
    if fmt == "anthropic":
        source = {"type": "text", "media_type": "text/plain", "data": text}
        return oracle.add({"type": "document", "source": source}, text_tokens(text))
    url = "data:text/plain;base64," + base64.b64encode(text.encode()).decode()
    if fmt == "openai-chat":
        return oracle.add(
            {"type": "file", "file": {"filename": "r.txt", "file_data": url}}, text_tokens(text)
        )
    return oracle.add(
        {"type": "input_file", "filename": "r.txt", "file_data": url}, text_tokens(text)
    )


def _text(fmt: str, text: str) -> dict[str, Any]:
    return {"type": "input_text" if fmt == "openai-responses" else "text", "text": text}


def conversation(fmt: str, oracle: Oracle, pairs: int = 36) -> list[dict[str, Any]]:
    """A user turn with a PDF and an image (and audio, in OpenAI formats), then
    ``pairs`` calls whose outputs hold in turn an image, a PDF of up to 40 pages, a
    text document and plain text."""
    first: list[Any] = [
        _text(fmt, "review these"),
        _pdf(oracle, fmt, 3),
        _image(oracle, fmt, 1200, 900),
    ]
    if fmt != "anthropic":
        audio = {
            "type": "input_audio",
            "input_audio": {"data": wav(20, rate=8_000), "format": "wav"},
        }
        first.append(oracle.add(audio, 20 * AUDIO_PER_SECOND))
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for n in range(pairs):
        said = _text(fmt, f"result {n}: " + "detail " * 30)
        kind = n % 4
        if kind == 0:
            output: Any = [said, _image(oracle, fmt, 800 + 37 * n, 600 + 11 * n)]
        elif kind == 1:
            output = [said, _pdf(oracle, fmt, 5 + n)]
        elif kind == 2:
            body = "".join(f"row {n}.{r}: some text of the document\n" for r in range(200 + 40 * n))
            output = [said, _text_document(oracle, fmt, body)]
        else:
            output = f"plain output {n}\n" + "x" * 3_000
        ident, arguments = f"call_{n}", json.dumps({"path": f"file{n}.pdf"})
        if fmt == "openai-chat":
            call = {
                "id": ident,
                "type": "function",
                "function": {"name": "fetch", "arguments": arguments},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": ident, "content": output})
        elif fmt == "openai-responses":
            messages.append(
                {"type": "function_call", "call_id": ident, "name": "fetch", "arguments": arguments}
            )
            messages.append({"type": "function_call_output", "call_id": ident, "output": output})
        else:
            use = {"type": "tool_use", "id": ident, "name": "fetch", "input": json.loads(arguments)}
            messages.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": ident, "content": output}
            messages.append({"role": "user", "content": [result]})
    return messages


def _outputs(fmt: str, messages: list[Any]) -> list[Any]:
    """Each tool output's content, in order."""
    if fmt == "openai-chat":
        return [m["content"] for m in messages if m.get("role") == "tool"]
    if fmt == "openai-responses":
        return [m["output"] for m in messages if m.get("type") == "function_call_output"]
    return [
        block["content"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_window_is_overflowed_as_the_provider_bills(fmt: str) -> None:
    oracle = Oracle()
    messages = conversation(fmt, oracle)
    total = oracle.bill(messages)
    assert total > 500_000  # the PDFs and documents weigh far more than their count of blocks
    compacted = 0
    for share in (0.3, 0.45, 0.6, 0.75, 0.9, 1.0, 1.02):
        window = int(total * share)
        prepared = scoutd.prepare(messages, format=fmt, config={"context_window": window})
        billed = oracle.bill(prepared.messages)
        assert billed <= window, (fmt, share, billed, window)
        assert new_problems(fmt, messages, prepared.messages) == {}
        # every output left whole is sent with its media, the others are texts now
        whole = [o for o in _outputs(fmt, prepared.messages) if o in _outputs(fmt, messages)]
        compacted += len(whole) < len(_outputs(fmt, messages))
    assert compacted >= 5  # most windows needed a compaction


@pytest.mark.parametrize("fmt", FORMATS)
def test_recall_gives_back_each_output_with_media_as_placeholders(fmt: str) -> None:
    oracle = Oracle()
    messages = conversation(fmt, oracle, pairs=24)
    window = oracle.bill(messages) // 3
    prepared = scoutd.prepare(
        messages, format=fmt, config={"context_window": window, "recall": True}
    )
    sent = _outputs(fmt, prepared.messages)
    originals = _outputs(fmt, messages)
    recalled = 0
    for number, original in enumerate(originals, start=1):
        if original in sent:
            continue
        expected = blocks_text(original)
        assert expected is not None
        assert (
            "[image]" in expected
            or "[document]" in expected
            or "[file]" in expected
            or number % 4 == 0
        )
        assert scoutd.recall_output(messages, f"#{number}", format=fmt) == expected
        recalled += 1
    assert recalled >= 10


def test_chat_tool_outputs_with_images_count_while_whole() -> None:
    """A Chat run whose tool messages return screenshots (content parts, as gateways
    accept them). Before, the Chat view showed each as ``[image]`` and counted nothing
    for it: 60 screenshots (at least 765 tokens each at high detail) were sent whole
    under a 12,000-token window."""
    oracle = Oracle()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "use the computer"}]
    for n in range(60):
        ident = f"c{n}"
        call = {"id": ident, "type": "function", "function": {"name": "shot", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        shot = [{"type": "text", "text": "clicked"}, _image(oracle, "openai-chat", 1024, 768)]
        messages.append({"role": "tool", "tool_call_id": ident, "content": shot})
    window = 12_000
    prepared = scoutd.prepare(messages, format="openai-chat", config={"context_window": window})
    billed = oracle.bill(prepared.messages)
    assert oracle.bill(messages) > 3 * window
    assert billed <= window, billed
    assert new_problems("openai-chat", messages, prepared.messages) == {}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_session_counts_media_as_the_whole_replay_does(fmt: str) -> None:
    """A session, which counts only each round's new messages, plans alike: its last
    prompt is the whole conversation's prepared at once."""
    oracle = Oracle()
    messages = conversation(fmt, oracle, pairs=20)
    config = {"context_window": oracle.bill(messages) // 2}
    prepared = scoutd.prepare(messages, format=fmt, config=config)
    with scoutd.Session(format=fmt, config=config) as session:
        for end in range(3, len(messages) + 1, 2):
            last = session.prepare(messages[:end])
    assert last.messages == prepared.messages
    assert len(_outputs(fmt, prepared.messages)) < 20  # it compacted
