"""An image in a message counts in tokens in the default's estimate, not as its data.

Before: one 750 KB image in a user message counted as about 250,000 tokens,
and the default dropped every tool output of a short chat to fit the window.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

import scoutd
from scoutd.config import PromptConfig
from scoutd.strategies.media import MEDIA_CHARS, MEDIA_KEY, counted_content, is_media, media_tokens
from scoutd.strategies.tokens import message_tokens, token_counter

DATA = base64.b64encode(bytes(range(256)) * 3_000).decode()  # 1 MB of base64

# The same image, as each format's user message carries it.
IMAGES = {
    "openai-chat": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{DATA}"}},
    "openai-responses": {"type": "input_image", "image_url": f"data:image/png;base64,{DATA}"},
    "anthropic": {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": DATA},
    },
}
TEXTS = {"openai-chat": "text", "openai-responses": "input_text", "anthropic": "text"}


def chat(format: str, image: bool, pairs: int = 30) -> list[dict[str, Any]]:
    """A user turn (with the image or not), then ``pairs`` reads of 2,000 characters."""
    parts: list[Any] = [{"type": TEXTS[format], "text": "look at this"}]
    if image:
        parts.append(IMAGES[format])
    messages: list[dict[str, Any]] = [{"role": "user", "content": parts}]
    for n in range(pairs):
        if format == "openai-chat":
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "read", "arguments": "{}"},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "line\n" * 400})
        elif format == "openai-responses":
            messages.append(
                {"type": "function_call", "call_id": f"c{n}", "name": "read", "arguments": "{}"}
            )
            messages.append(
                {"type": "function_call_output", "call_id": f"c{n}", "output": "line\n" * 400}
            )
        else:
            use = {"type": "tool_use", "id": f"c{n}", "name": "read", "input": {}}
            messages.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": f"c{n}", "content": "line\n" * 400}
            messages.append({"role": "user", "content": [result]})
    return messages


@pytest.mark.parametrize("format", list(IMAGES))
def test_an_image_does_not_make_the_default_drop_every_output(format: str) -> None:
    with_image = scoutd.prepare(chat(format, image=True), format=format)
    without = scoutd.prepare(chat(format, image=False), format=format)
    (counted,) = [r for r in with_image.report if r.strategy == "shorten_tools_cost_aware"]
    assert counted.outputs_dropped == counted.outputs_truncated == 0  # before: 30 dropped
    assert with_image.messages[1:] == without.messages[1:]  # the same decisions
    assert with_image.messages[0]["content"][1] is IMAGES[format]  # sent as it came


def test_a_media_block_counts_apart_from_its_text_and_other_content_as_before() -> None:
    count = token_counter(PromptConfig())

    def estimate(content: Any) -> int:  # the JSON's characters / 4, rounded up, + 4 a message
        return -(-len(json.dumps(content, separators=(",", ":"))) // 4) + 4

    plain = [{"type": "text", "text": "x" * 100}, {"type": "text", "text": "y"}]
    assert counted_content(plain) is plain
    assert message_tokens([{"role": "user", "content": plain}], count) == [estimate(plain)]
    # an image whose size its data does not tell: OpenAI's at the floor, Anthropic's at its cap
    costs = {"openai-chat": 1_500, "openai-responses": 1_500, "anthropic": 1_600}
    for format, image in IMAGES.items():
        alone = message_tokens([{"role": "user", "content": [image]}], count)
        assert alone == [estimate([""]) + costs[format]]


@pytest.mark.parametrize(
    ("block", "media"),
    [
        ({"type": "image"}, True),
        ({"type": "image_url"}, True),
        ({"type": "input_image"}, True),
        ({"type": "file"}, True),
        ({"type": "input_file"}, True),
        ({"type": "document"}, True),
        ({"type": "input_audio"}, True),
        ({"type": "text", "text": "an image"}, False),
        ({"type": "tool_result"}, False),
        ({"type": 7}, False),
        ("image", False),
    ],
)
def test_what_is_media(block: Any, media: bool) -> None:
    assert is_media(block) is media


@pytest.mark.parametrize("format", ["anthropic", "openai-responses"])
def test_screenshots_in_tool_outputs_count_while_the_outputs_are_whole(format: str) -> None:
    """A computer-use run: each tool output is a screenshot. Before, each counted as its
    ``[image]`` placeholder, and 60 of them (about 90,000 tokens as billed) went out
    uncompacted under a 40,000-token window."""
    shot = IMAGES[format] if format == "anthropic" else {**IMAGES[format], "type": "input_image"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "use the computer"}]
    for n in range(60):
        if format == "anthropic":
            use = {"type": "tool_use", "id": f"c{n}", "name": "computer", "input": {"n": n}}
            messages.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": f"c{n}", "content": [shot]}
            messages.append({"role": "user", "content": [result]})
        else:
            messages.append(
                {"type": "function_call", "call_id": f"c{n}", "name": "computer", "arguments": "{}"}
            )
            messages.append({"type": "function_call_output", "call_id": f"c{n}", "output": [shot]})
    window = 40_000
    prepared = scoutd.prepare(messages, format=format, config={"context_window": window})
    sent = json.dumps(prepared.messages)
    images = sent.count(DATA)  # screenshots sent whole, each billed about 1,500 tokens
    # the newest 20 whole, and the shortened band's 2 (a screenshot has no text to
    # shorten): within the window as billed, where before all 60 were sent
    assert 0 < images <= 22 and images * 1_500 < window, images


def test_only_a_marked_view_message_adds_its_media() -> None:
    """A message that is no dict, a text that names the key, a mark that is not a
    positive count: nothing added, nothing raised."""
    messages: list[Any] = [
        7,
        "scoutd.media",
        {MEDIA_KEY: "2"},
        {MEDIA_KEY: -1},
        {MEDIA_KEY: 2, "role": "function_call_output"},
        ["scoutd.media"],
        {"role": "user"},
    ]
    assert media_tokens(messages, len) == [(4, 2 * MEDIA_CHARS)]
    assert media_tokens([{"role": "user"}] * 3, len) == []


@pytest.mark.parametrize("format", ["anthropic", "openai-responses"])
def test_a_short_output_with_a_screenshot_counts_whole_in_the_shortened_band(format: str) -> None:
    """An output whose text is too short to shorten is sent with its screenshot when
    its pair is shortened. Before, the estimate counted it as shortened text only:
    with a wide shortened band, 40 screenshots (about 60,000 tokens as billed) went
    out under a 40,000-token window."""
    shot = IMAGES[format] if format == "anthropic" else {**IMAGES[format], "type": "input_image"}
    said = {"type": "text" if format == "anthropic" else "input_text", "text": "clicked"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "use the computer"}]
    for n in range(60):
        if format == "anthropic":
            use = {"type": "tool_use", "id": f"c{n}", "name": "computer", "input": {"n": n}}
            messages.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": f"c{n}", "content": [said, shot]}
            messages.append({"role": "user", "content": [result]})
        else:
            messages.append(
                {"type": "function_call", "call_id": f"c{n}", "name": "computer", "arguments": "{}"}
            )
            messages.append(
                {"type": "function_call_output", "call_id": f"c{n}", "output": [said, shot]}
            )
    window = 40_000
    config = {"context_window": window, "cost_compacted_tool_calls": 40}
    prepared = scoutd.prepare(messages, format=format, config=config)
    images = json.dumps(prepared.messages).count(DATA)
    assert images > 0 and images * 1_500 < window, images
    # a session, which counts only the new rounds, counts them alike
    with scoutd.Session(format=format, config=config) as session:
        for end in range(3, len(messages) + 1, 2):
            last = session.prepare(messages[:end])
    assert last.messages == prepared.messages
