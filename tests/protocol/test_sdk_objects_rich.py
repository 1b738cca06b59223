"""The SDKs' richer objects, read as the SDK sends them (docs/FORMATS.md, "Objects of a
provider's SDK").

Structured outputs (``parse``), hosted tool items, reasoning with summaries and
encrypted content, annotations and citations, Anthropic's server tool blocks and
streamed messages, and LiteLLM's ``Message``: in each SDK's documented loop
(tests/protocol/sdk_more.py), the oracle being the request the SDK sends.
"""

from __future__ import annotations

import copy
from typing import Any

import pydantic
import pytest

import scoutd
from scoutd.protocol.sdk_objects import sent_forms

from ..formats.validity import new_problems, thinking_problems
from .sdk_loops import recording
from .sdk_more import KINDS, litellm_loop, litellm_sent, rich_loop, sent_by

SMALL = {"context_window": 6000}
ROUNDS = 12

# ParsedChatCompletionMessage.parsed is declared None-typed, so pydantic warns as the
# SDK dumps it (and as scoutd reads it the same way): the SDK's own warning.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic.main")


def _models(conversation: list[Any]) -> int:
    """How many of the conversation's messages hold an SDK object where the SDKs put them."""
    return sum(sent_forms([message]) is not None for message in conversation)


@pytest.mark.parametrize("kind", KINDS)
def test_the_prompt_is_what_the_sdk_sends(kind: str) -> None:
    conversation, _, _ = rich_loop(kind, 4)
    before = copy.deepcopy(conversation)
    as_sent = sent_by(kind, conversation)
    prompt = scoutd.prepare_prompt(conversation, "none", format=kind)
    assert prompt == as_sent
    assert sent_by(kind, prompt) == as_sent
    assert conversation == before  # the caller's objects untouched
    assert _models(conversation) >= 4


@pytest.mark.parametrize("kind", KINDS)
def test_rich_objects_compact_as_their_json(kind: str) -> None:
    conversation, _, _ = rich_loop(kind, ROUNDS)
    before = copy.deepcopy(conversation)
    items = list(conversation)
    as_sent = sent_by(kind, conversation)
    with_objects = scoutd.prepare(conversation, config=SMALL, format=kind)
    with_json = scoutd.prepare(as_sent, config=SMALL, format=kind)
    assert with_objects.messages == with_json.messages
    assert with_objects.report == with_json.report
    compacted = with_json.report[0]
    assert compacted.outputs_dropped + compacted.outputs_truncated >= 3
    assert with_json.report[-1].malformed == 0
    assert not new_problems(kind, as_sent, with_objects.messages)
    assert not thinking_problems(kind, as_sent, with_objects.messages)
    assert conversation == before and all(map(lambda a, b: a is b, conversation, items))


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_in_the_rich_loop(kind: str) -> None:
    with scoutd.Session(config=SMALL, format=kind) as session:
        states: list[Any] = []
        prepare = recording(session, states)
        conversation, requests, helds = rich_loop(kind, ROUNDS, prepare)
    assert all(state is states[0] for state in states)
    expected = [
        scoutd.prepare_prompt(sent_by(kind, conversation[:held]), config=SMALL, format=kind)
        for held in helds
    ]
    assert requests == expected
    assert requests[-1] != sent_by(kind, conversation[: helds[-1]])  # compacted


def test_the_objects_are_the_sdks() -> None:
    """The loops hold what the SDKs' parse and stream helpers really give."""
    chat, _, _ = rich_loop("openai-chat", 1)
    responses, _, _ = rich_loop("openai-responses", 1)
    streamed, _, _ = rich_loop("anthropic", 1)
    assert type(chat[1]).__name__.startswith("ParsedChatCompletionMessage")
    assert "parsed" in chat[1].model_fields_set
    names = [type(item).__name__ for item in responses[1:6]]
    assert names[0] == "ResponseFunctionWebSearch" and names[2] == "ResponseReasoningItem"
    assert names[3].startswith("ParsedResponseOutputMessage")
    assert "parsed" not in sent_by("openai-responses", responses)[4]["content"][0]
    blocks = streamed[1]["content"]
    assert all(isinstance(block, pydantic.BaseModel) for block in blocks)
    assert [block.type for block in blocks][1:4] == [
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
    ]


def test_litellm_messages() -> None:
    """LiteLLM's ``Message`` objects: what scoutd gives LiteLLM sends as it sends the
    conversation, whole or compacted, and a session in its loop stays incremental."""
    conversation, _, _ = litellm_loop(ROUNDS)
    as_sent = litellm_sent(conversation)
    assert _models(conversation) == ROUNDS
    prompt = scoutd.prepare_prompt(conversation, "none", format="openai-chat")
    assert litellm_sent(prompt) == as_sent
    with_objects = scoutd.prepare(conversation, config=SMALL, format="openai-chat")
    with_json = scoutd.prepare(as_sent, config=SMALL, format="openai-chat")
    assert litellm_sent(with_objects.messages) == litellm_sent(with_json.messages)
    assert with_objects.report == with_json.report
    assert with_json.report[0].outputs_dropped + with_json.report[0].outputs_truncated >= 3
    with scoutd.Session(config=SMALL, format="openai-chat") as session:
        states = []

        def prepare(held: list[Any]) -> list[Any]:
            states.append(session._state)
            return session.prepare_prompt(held)

        looped, requests, helds = litellm_loop(ROUNDS, prepare)
    assert all(state is states[0] for state in states)
    expected = [
        litellm_sent(
            scoutd.prepare_prompt(litellm_sent(looped[:held]), config=SMALL, format="openai-chat")
        )
        for held in helds
    ]
    assert requests == expected
