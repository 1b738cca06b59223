"""An OpenAI-compatible provider's ``reasoning_content`` (DeepSeek-style) through
LangChain's own loop with scoutd's middleware, streamed and not.

``langchain-deepseek`` keeps the thinking of a turn in the ``AIMessage``'s
``additional_kwargs["reasoning_content"]`` (streamed, in pieces that LangChain
joins); LangChain's OpenAI-compatible models do not send it back, and scoutd
does not count it (docs/FORMATS.md). What must hold: every request fits the
window by a plain oracle of what such a model sends (4 characters of content
and calls JSON per token); a kept turn keeps its ``reasoning_content``
unmodified, with its kept calls, so that a model made to send it back (DeepSeek's
thinking mode wants it with the calls of the tool loop) sends each turn's own;
the agent's messages are not mutated; streamed and unstreamed runs of one
script send the same requests.

In process, and through a real daemon.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool

from tests.integrations.scripted_chat import ScriptedChat
from tests.integrations.test_stream_thinking_langchain import Snapshots, run_agent

WINDOW = 8_000
TURNS = 12
CALLS = 3


def reasoning(turn: int) -> str:
    return f"turn {turn} " + "ponder " * 600


def command(turn: int, n: int) -> dict[str, Any]:
    return {"command": f"ls {turn}.{n}"}


class DeepSeekStyle(ScriptedChat):
    """Answers (or streams) a turn of reasoning_content, text and parallel calls."""

    streamed: int = 0

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = self.record(messages)
        if turn > TURNS:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="done"))])
        calls: list[Any] = [
            {"name": "bash", "args": command(turn, n), "id": f"c{turn}_{n}", "type": "tool_call"}
            for n in range(CALLS)
        ]
        message = AIMessage(
            content=f"step {turn}",
            additional_kwargs={"reasoning_content": reasoning(turn)},
            tool_calls=calls,
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self.streamed += 1
        turn = self.record(messages)
        if turn > TURNS:
            yield ChatGenerationChunk(message=AIMessageChunk(content="done"))
            return
        whole = reasoning(turn)
        for start in range(0, len(whole), 1_000):
            piece = {"reasoning_content": whole[start : start + 1_000]}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", additional_kwargs=piece))
        yield ChatGenerationChunk(message=AIMessageChunk(content=f"step {turn}"))
        for n in range(CALLS):
            chunk: Any = {
                "name": "bash",
                "args": json.dumps(command(turn, n)),
                "id": f"c{turn}_{n}",
                "index": n,
            }
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[chunk]))


@tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    return f"{command}: " + "output line\n" * 200


def sent(messages: list[BaseMessage], thinking: bool) -> list[dict[str, Any]]:
    """What an OpenAI-compatible model sends: content and calls, and (``thinking``)
    the reasoning_content of a turn of calls, as a model made to send it back would."""
    said = []
    for message in messages:
        item: dict[str, Any] = {"role": message.type, "content": message.content}
        if isinstance(message, AIMessage) and message.tool_calls:
            item["calls"] = [(c["id"], c["args"]) for c in message.tool_calls]
            if thinking and "reasoning_content" in message.additional_kwargs:
                item["reasoning_content"] = message.additional_kwargs["reasoning_content"]
        said.append(item)
    return said


def billed(items: list[dict[str, Any]]) -> int:
    """The oracle: 4 characters of JSON per token."""
    return sum(len(json.dumps(item)) for item in items) // 4


def run(streamed: bool, socket: str | None) -> tuple[DeepSeekStyle, Snapshots, list[Any]]:
    model = DeepSeekStyle()
    recorder, final = run_agent(model, [bash], streamed, socket)
    return model, recorder, final


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_reasoning_content_stays_with_its_kept_turn(
    socket: tuple[str | None, str], streamed: bool
) -> None:
    model, recorder, final = run(streamed, socket[0])
    assert model.streamed == (TURNS + 1 if streamed else 0)
    assert len(model.seen) == TURNS + 1
    bills = [billed(sent(messages, thinking=False)) for messages in model.seen]
    assert not [bill for bill in bills if bill > WINDOW], bills
    assert billed(sent(recorder.full[-1], thinking=False)) > 2 * WINDOW  # compacting needed
    kept_turns = 0
    for messages in model.seen:
        for message in messages:
            if isinstance(message, AIMessage) and message.tool_calls:
                kept_turns += 1
                turn = int(str(message.content).split()[1])
                assert message.additional_kwargs["reasoning_content"] == reasoning(turn)
    assert kept_turns >= TURNS  # the floor: kept turns of calls were looked at
    assert len(recorder.dumps) == TURNS + 1
    for dumps in recorder.dumps:
        assert [m.model_dump() for m in final[: len(dumps)]] == dumps
    if streamed:
        unstreamed, _, _ = run(False, socket[0])
        assert [sent(m, True) for m in model.seen] == [sent(m, True) for m in unstreamed.seen]


def test_reasoning_content_sent_back_is_not_counted() -> None:
    """The known limit (docs/RELIABILITY.md): a model made to send reasoning_content
    back bills more than scoutd counted. Its figures, so that a change shows."""
    model, _, _ = run(False, None)
    counted = [billed(sent(messages, thinking=False)) for messages in model.seen]
    with_thinking = [billed(sent(messages, thinking=True)) for messages in model.seen]
    assert max(counted) <= WINDOW < max(with_thinking), (counted, with_thinking)
