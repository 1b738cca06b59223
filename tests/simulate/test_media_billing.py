"""`scoutd simulate` bills media by the estimate's rules in every format, not by their data.

Before, the OpenAI Chat and Anthropic replays billed an image, a PDF or audio
as the characters of its base64 data: a small image padded to 300 KB cost
about 100,000 tokens a round, and a 200-page PDF about 140,000 where the
provider bills 600,000; the Responses replay billed every medium as one image.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from scoutd.simulate.provider import replay_in_format
from scoutd.simulate.replay import Settings, run_strategy
from scoutd.simulate.workload import Workload
from tests.strategies.test_media_costs import anthropic_image, openai_image, png
from tests.strategies.test_media_overflow import Oracle, _image, _pdf

FORMATS = ("openai-chat", "openai-responses", "anthropic")


def _turns(fmt: str, media: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A user turn holding ``media``, the model's answer, and a short user turn."""
    text = "input_text" if fmt == "openai-responses" else "text"
    first = {"role": "user", "content": [{"type": text, "text": "look"}, *media]}
    answer: dict[str, Any] = {"role": "assistant", "content": "seen"}
    if fmt == "openai-responses":
        first = {"type": "message", **first}
        answer = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "seen"}],
        }
    return [first, answer, {"role": "user", "content": "and now?"}]


def _padded_image(oracle: Oracle, fmt: str) -> dict[str, Any]:
    """A 1,200 x 900 image whose data is 300 KB: billed by its pixels, not its bytes."""
    data = png(1200, 900, padding=225_000)
    if fmt == "anthropic":
        source = {"type": "base64", "media_type": "image/png", "data": data}
        return oracle.add({"type": "image", "source": source}, anthropic_image(1200, 900))
    url = f"data:image/png;base64,{data}"
    if fmt == "openai-chat":
        return oracle.add({"type": "image_url", "image_url": {"url": url}}, openai_image(1200, 900))
    return oracle.add({"type": "input_image", "image_url": url}, openai_image(1200, 900))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_replay_bills_media_by_what_they_hold(fmt: str) -> None:
    oracle = Oracle()
    checked = 0
    for media in (
        [_padded_image(oracle, fmt)],
        [_pdf(oracle, fmt, 200)],
        [_image(oracle, fmt, 640, 480), _pdf(oracle, fmt, 7)],
    ):
        messages = _turns(fmt, media)
        documented = oracle.bill(messages)
        result = replay_in_format(messages, fmt, "none", Settings())
        # at least what the provider bills, and no more than a page's image and text
        # beyond it (the estimate's upper bounds), never the data's characters
        assert documented <= result.peak_prompt_tokens, (fmt, result.peak_prompt_tokens, documented)
        assert result.peak_prompt_tokens <= math.ceil(documented * 1.6) + 1_600, (
            fmt,
            result.peak_prompt_tokens,
            documented,
        )
        checked += 1
    assert checked == 3


def test_a_scout_replay_bills_a_user_turns_media_by_what_they_hold() -> None:
    """The scout-view replay (``scoutd simulate --chat`` of a scout-format chat) billed a
    user turn's image and PDF by their data too."""
    oracle = Oracle()
    media = [_padded_image(oracle, "openai-chat"), _pdf(oracle, "openai-chat", 200)]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, *media]},
        {
            "role": "function_call",
            "content": json.dumps({"name": "ls", "id": "1", "arguments": {}}),
        },
        {"role": "function_call_output", "content": json.dumps({"id": "1", "content": "a b c"})},
    ]
    documented = oracle.bill(messages)
    result = run_strategy(Workload(messages, "test", {}), "none", Settings())
    assert documented <= result.peak_prompt_tokens <= math.ceil(documented * 1.6) + 1_600, (
        result.peak_prompt_tokens,
        documented,
    )
