"""Drawn Pydantic AI histories through the capability's mapping and a real prepare.

Histories are built from Pydantic AI's own classes: responses with thinking,
text, one or several tool calls (nested JSON arguments, as a dict or a JSON
text) and native tool calls; requests answering the calls in any order, with
plain returns, retried returns and legacy ``RetryPromptPart`` retries; user
prompts with images, audio and documents; retry feedback; lone surrogates;
huge outputs; calls left unanswered on the last turn. Three oracles:

- identity: with a window large enough, what comes back is the agent's own
  objects, in order, and nothing it was given changed;
- validity under compaction (small windows, the default strategy): every tool
  return answers a call kept in the response just before it, every call kept
  (but the last turn's) is answered, the history survives Pydantic AI's own
  ``ModelMessagesTypeAdapter``, and the newest turn's returns are verbatim;
- an image or a document weighs what the default counts for media, not the
  text of its data.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

from hypothesis import event, given
from hypothesis import strategies as st
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CompactionPart,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)

from scoutd.formats import OPENAI_CHAT
from scoutd.integrations._pydantic_ai_messages import from_chat, to_chat
from scoutd.integrations._run import RunPreparer

from .drawn import SETTINGS, output

TEXTS = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["", "héllo ☃ 𝄞", "a\nb\r\n", "\x00nul"]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8,
)


def retry_prompt(content: str, tool_name: str | None, call_id: str) -> RetryPromptPart:
    """A legacy retry part (deprecated, still accepted in a history held in memory)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RetryPromptPart(content, tool_name=tool_name, tool_call_id=call_id)


def snapshot(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A deep copy (copying a legacy retry part builds one again: its warning is not ours)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return copy.deepcopy(messages)


@st.composite
def media(draw: st.DrawFn) -> UserContent:
    kind = draw(st.sampled_from(["png", "wav", "pdf", "url", "audio_url", "doc_url"]))
    if kind == "png":
        return BinaryContent(
            b"\x89PNG" + b"\x07" * draw(st.sampled_from([10, 400_000])), media_type="image/png"
        )
    if kind == "wav":
        return BinaryContent(b"RIFF" + b"\x01" * 300_000, media_type="audio/wav")
    if kind == "pdf":
        return BinaryContent(b"%PDF" + b"\x02" * 300_000, media_type="application/pdf")
    if kind == "url":
        return ImageUrl("data:image/png;base64," + "A" * draw(st.sampled_from([8, 400_000])))
    if kind == "audio_url":
        return AudioUrl("https://example.com/a.mp3")
    return DocumentUrl("https://example.com/a.pdf")


@st.composite
def user_prompt(draw: st.DrawFn) -> UserPromptPart:
    if draw(st.integers(0, 3)) < 3:
        return UserPromptPart(draw(TEXTS))
    items: list[UserContent] = draw(st.lists(TEXTS | media(), min_size=1, max_size=3))
    return UserPromptPart(items)


class History(list[ModelMessage]):
    """A drawn history whose repr is short: each message's parts, with sizes."""

    def __repr__(self) -> str:
        rows = []
        for message in self:
            parts = [
                f"{type(p).__name__}({getattr(p, 'tool_call_id', '')}"
                f"{len(repr(getattr(p, 'content', '')))})"
                for p in message.parts
            ]
            rows.append(f"{type(message).__name__}[{', '.join(parts)}]")
        return "History(" + "; ".join(rows) + ")"


@st.composite
def histories(draw: st.DrawFn) -> History:
    """A run's history: a first request, then turns; the last may leave calls open."""
    first: list[ModelRequestPart] = []
    if draw(st.booleans()):
        first.append(SystemPromptPart(draw(TEXTS)))
    first.append(draw(user_prompt()))
    messages = History([ModelRequest(parts=first)])
    turns = draw(st.integers(1, 9))
    shared = draw(st.booleans())  # one id reused by every turn's first call
    for turn in range(turns):
        parts: list[ModelResponsePart] = []
        if draw(st.booleans()):
            parts.append(ThinkingPart(draw(TEXTS), signature=f"sig-{turn}"))
        if draw(st.booleans()):
            parts.append(TextPart(draw(TEXTS)))
        count = draw(st.integers(0, 3)) if turn < turns - 1 else draw(st.integers(1, 3))
        ids = ["dup" if shared and k == 0 else f"c{turn}.{k}" for k in range(count)]
        for call_id in ids:
            args: Any = draw(st.dictionaries(TEXTS, JSON, max_size=3))
            if draw(st.booleans()):
                args = json.dumps(args)
            parts.append(ToolCallPart("bash", args, tool_call_id=call_id))
        native = draw(st.integers(0, 5)) == 0
        if native:
            parts.append(NativeToolCallPart("web_search", {"q": "x"}, tool_call_id=f"n{turn}"))
            parts.append(NativeToolReturnPart("web_search", "found", tool_call_id=f"n{turn}"))
        if not parts:
            parts.append(TextPart(""))
        messages.append(ModelResponse(parts=parts))
        last = turn == turns - 1
        if last and ids and draw(st.integers(0, 3)) == 3:
            break  # the calls of the last turn are not answered yet
        answers: list[ModelRequestPart] = []
        for call_id in draw(st.permutations(ids)):
            kind = draw(st.sampled_from(["plain", "plain", "plain", "retried", "legacy"]))
            text = output(draw, turn)
            if kind == "legacy":
                answers.append(retry_prompt(text, "bash", call_id))
                continue
            retried = {"outcome": "retried", "retry": RetryInfo("model_retry")}
            extra: dict[str, Any] = retried if kind == "retried" else {}
            answers.append(ToolReturnPart("bash", text, tool_call_id=call_id, **extra))
        if draw(st.integers(0, 4)) == 0:
            answers.append(RetryFeedbackPart("say more", retry=RetryInfo("model_retry")))
        if not ids and draw(st.booleans()):
            answers.append(draw(user_prompt()))
        if answers:
            messages.append(ModelRequest(parts=answers))
    return messages


def prepared(messages: list[ModelMessage], config: dict[str, Any]) -> list[ModelMessage]:
    """What the capability gives the model for ``messages`` (its mapping and a real prepare)."""
    sent = to_chat(messages)
    with RunPreparer(format=OPENAI_CHAT, recall=True, config=config) as preparer:
        chat = preparer.prepare(sent.chat).messages
    return from_chat(chat, sent, messages)


def answers_of(message: ModelMessage) -> list[str]:
    """The call ids a request's parts answer (a legacy retry naming a tool answers one)."""
    if not isinstance(message, ModelRequest):
        return []
    found: list[str] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_name is not None:
            found.append(part.tool_call_id)
    return found


def calls_of(message: ModelMessage) -> list[str]:
    if not isinstance(message, ModelResponse):
        return []
    return [p.tool_call_id for p in message.parts if type(p) is ToolCallPart]


def adapter_round_trip(messages: list[ModelMessage]) -> int | None:
    """How many messages Pydantic AI's own adapter loads back from its dump of ``messages``
    (None: it cannot dump them, as for a lone surrogate, which JSON cannot carry)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a legacy retry part loads as what it meant
        try:
            dumped = ModelMessagesTypeAdapter.dump_json(messages)
        except ValueError:
            return None
        return len(ModelMessagesTypeAdapter.validate_json(dumped))


def check_valid(back: list[ModelMessage], given: list[ModelMessage]) -> None:
    """Every return answers a call of the response just before it; every call is answered
    but the last response's; Pydantic AI's own adapter dumps and loads the history
    whenever it can the agent's."""
    for index, message in enumerate(back):
        answers = answers_of(message)
        if answers:
            before = back[index - 1] if index else None
            assert before is not None and set(answers) <= set(calls_of(before)), index
        calls = calls_of(message)
        if calls and index < len(back) - 1:
            assert set(calls) <= set(answers_of(back[index + 1])), index
    if adapter_round_trip(given) is not None:
        assert adapter_round_trip(back) == len(back)


def test_with_nothing_to_compact_the_agent_gets_its_own_objects() -> None:
    """Identity: a window large enough gives back the agent's objects, untouched."""
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(histories())
    def check(messages: list[ModelMessage]) -> None:
        before = snapshot(messages)
        back = prepared(messages, {"context_window": 2_000_000})
        assert len(back) == len(messages)
        assert all(a is b for a, b in zip(back, messages, strict=True))
        assert messages == before
        seen["media"] += any(
            isinstance(p, UserPromptPart) and type(p.content) is list
            for m in messages
            for p in m.parts
        )

    check()
    assert seen["media"] >= 20, seen


def plain_texts(messages: list[ModelMessage]) -> bool:
    """Whether every part's content is a text that UTF-8 can carry."""
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", "")
            if not isinstance(content, str):
                return False
            try:
                content.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def newest_verbatim(messages: list[ModelMessage], back: list[ModelMessage], window: int) -> str:
    """Which case of the newest-returns oracle a round reached (asserting it)."""
    newest = messages[-1]
    if not answers_of(newest):
        return "no returns last"
    if not plain_texts(messages):
        # A media item may weigh a whole small window; an output holding a lone surrogate
        # is kept by the default whatever its age (a defect of the strategy, not of the
        # mapping): the newest can then go first.
        return "not plain"
    if any(m is newest for m in back):
        return "newest kept"
    size = sum(len(str(getattr(p, "content", ""))) for p in newest.parts)
    if size >= window:  # a quarter of the window's characters or more: may be shortened
        return "newest large"
    kept = [m for m in back if answers_of(m)]
    assert kept and kept[-1].parts == newest.parts
    return "newest small"


def test_a_compacted_history_is_one_pydantic_ai_accepts() -> None:
    """Validity: small windows, the default strategy."""
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(histories(), st.sampled_from([1_500, 3_000, 6_000]))
    def check(messages: list[ModelMessage], window: int) -> None:
        before = snapshot(messages)
        back = prepared(messages, {"context_window": window})
        assert messages == before
        check_valid(back, messages)
        if len(back) != len(messages) or any(
            a is not b for a, b in zip(back, messages, strict=False)
        ):
            seen["compacted"] += 1
        case = newest_verbatim(messages, back, window)
        seen[case] += 1
        event(case)

    check()
    assert seen["compacted"] >= 30, seen
    assert seen["newest kept"] + seen["newest small"] >= 30, seen


def tool_turns(count: int, legacy_every: int) -> list[ModelMessage]:
    """A run of ``count`` turns of two calls; every ``legacy_every``-th turn's second call
    answered by a legacy ``RetryPromptPart`` (0: none)."""
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("fix the tests")])]
    for n in range(count):
        calls = [ToolCallPart("bash", {"n": n, "k": k}, tool_call_id=f"c{n}.{k}") for k in (0, 1)]
        messages.append(ModelResponse(parts=[TextPart(f"step {n}"), *calls]))
        second: ModelRequestPart = ToolReturnPart("bash", "y" * 3_000, tool_call_id=f"c{n}.1")
        if legacy_every and n % legacy_every == 0:
            second = retry_prompt("bad arguments " * 200, "bash", f"c{n}.1")
        first = ToolReturnPart("bash", "x" * 3_000, tool_call_id=f"c{n}.0")
        messages.append(ModelRequest(parts=[first, second]))
    return messages


def test_a_legacy_retry_answers_its_call() -> None:
    """A ``RetryPromptPart`` naming a tool is its call's answer: scoutd once saw those
    calls unanswered and kept their turns whole however old, and shortened the newest
    outputs instead (3,000 characters to 429)."""
    messages = tool_turns(12, legacy_every=3)
    back = prepared(messages, {"context_window": 6_000})
    check_valid(back, messages)
    assert back[-1] is messages[-1] and back[-3] is messages[-3]  # the two newest turns
    kept_old = [m for m in back if any(m is old for old in messages[1:13])]
    assert kept_old == []  # nothing of the first six turns is kept as it was


def test_a_request_of_framework_parts_only_stays() -> None:
    """A request none of whose parts scoutd is sent (a summary of Pydantic AI's own
    compaction, a legacy retry) is no longer lost on the way back."""
    summary = ModelRequest(parts=[CompactionPart(content="what happened so far")])
    messages: list[ModelMessage] = [
        summary,
        ModelRequest(parts=[UserPromptPart("go on")]),
        ModelResponse(parts=[ToolCallPart("bash", {}, tool_call_id="c")]),
        ModelRequest(parts=[retry_prompt("bad", None, "r")]),
    ]
    back = prepared(messages, {})
    assert len(back) == len(messages)
    assert all(a is b for a, b in zip(back, messages, strict=True))


def test_an_image_weighs_what_media_weighs() -> None:
    """A 300 KB screenshot in the first prompt once reached scoutd as 1,053,397
    characters of text, and the default dropped every turn of a short run."""
    image = BinaryContent(b"\x89PNG" + b"\x07" * 300_000, media_type="image/png")
    first = ModelRequest(parts=[UserPromptPart(["what is on this screen?", image])])
    messages = [first, *tool_turns(6, legacy_every=0)[1:]]
    sent = to_chat(messages)
    assert len(json.dumps(sent.chat)) < 50_000
    back = prepared(messages, {})
    assert all(a is b for a, b in zip(back, messages, strict=True))


def test_through_the_daemon_the_mapping_is_the_same(socket: tuple[str | None, str]) -> None:
    """Legacy retries and a screenshot, in process and through a real daemon: the
    history is compacted the same way, valid, the two newest turns as they were."""
    path, directory = socket
    image = BinaryContent(b"\x89PNG" + b"\x07" * 300_000, media_type="image/png")
    messages = tool_turns(12, legacy_every=3)
    messages[0] = ModelRequest(parts=[UserPromptPart(["what is on this screen?", image])])
    sent = to_chat(messages)
    with RunPreparer(
        format=OPENAI_CHAT,
        socket=path,
        save_file=f"{directory}/run.chat",
        config={"context_window": 8_000},
    ) as preparer:
        back = from_chat(preparer.prepare(sent.chat).messages, sent, messages)
    check_valid(back, messages)
    assert back[0] is messages[0] and back[-1] is messages[-1] and back[-3] is messages[-3]
