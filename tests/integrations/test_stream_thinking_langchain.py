"""Streamed thinking through LangChain's own loop (``create_agent``) with scoutd's middleware.

The scripted model streams each turn as ``langchain-anthropic`` streams one:
chunks of a ``thinking`` block (its text in pieces, then its signature), a text
block and three ``tool_use`` blocks with their ``tool_call_chunks``, every
block tagged with its ``index``. LangChain merges the chunks into the turn's
message, which keeps the indexes and the arguments' ``partial_json``. The same
script answers a non-streamed run with the message a non-streamed call gives.

Both runs must send valid requests (a kept turn keeps its thinking first and
as the turn made it, with the call blocks of its kept calls), each fitting the
window by a plain oracle (4 characters of content and calls JSON per token),
without mutating the agent's messages; and the two runs must send the same
requests, but for the streaming's own keys.

In process, and through a real daemon.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool

from scoutd.integrations.langchain import ScoutdMiddleware
from tests.integrations.scripted_chat import ScriptedChat
from tests.integrations.test_langchain import Recorder

WINDOW = 8_000
TURNS = 12
CALLS = 3
# Keys only a streamed message's blocks carry: where each block stood in the stream,
# and the arguments' text as it came.
STREAM_KEYS = ("index", "partial_json")


def thought(turn: int) -> str:
    return f"turn {turn} " + "ponder " * 900


def command(turn: int, n: int) -> dict[str, Any]:
    """A call's arguments: long, as a file written by the shell is (scoutd may shorten
    them, and then edits the turn)."""
    return {"command": f"cat > f{turn}.{n} <<EOF\n" + "line of the file\n" * 150 + "EOF"}


def call_id(turn: int, n: int) -> str:
    return f"c{turn}_{n}"


class StreamingThinker(ScriptedChat):
    """Streams (or answers whole) a turn of thinking, text and parallel calls; records
    what it was sent."""

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
        content: list[Any] = [
            {"type": "thinking", "thinking": thought(turn), "signature": f"s{turn}"},
            {"type": "text", "text": f"step {turn}"},
        ]
        content += [
            {"type": "tool_use", "id": call_id(turn, n), "name": "bash", "input": command(turn, n)}
            for n in range(CALLS)
        ]
        calls: list[Any] = [
            {"name": "bash", "args": command(turn, n), "id": call_id(turn, n), "type": "tool_call"}
            for n in range(CALLS)
        ]
        message = AIMessage(content=content, tool_calls=calls)
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
        pieces = [f"turn {turn} "] + ["ponder " * 300] * 3
        for piece in pieces:
            block = {"type": "thinking", "thinking": piece, "index": 0}
            yield ChatGenerationChunk(message=AIMessageChunk(content=[block]))
        signed = {"type": "thinking", "thinking": "", "signature": f"s{turn}", "index": 0}
        yield ChatGenerationChunk(message=AIMessageChunk(content=[signed]))
        text = {"type": "text", "text": f"step {turn}", "index": 1}
        yield ChatGenerationChunk(message=AIMessageChunk(content=[text]))
        for n in range(CALLS):
            index, ident = 2 + n, call_id(turn, n)
            start = {"type": "tool_use", "id": ident, "name": "bash", "input": {}, "index": index}
            head: Any = {"name": "bash", "args": "", "id": ident, "index": index}
            yield ChatGenerationChunk(
                message=AIMessageChunk(content=[start], tool_call_chunks=[head])
            )
            arguments = json.dumps(command(turn, n))
            delta = {"type": "input_json_delta", "partial_json": arguments, "index": index}
            rest: Any = {"name": None, "args": arguments, "id": None, "index": index}
            yield ChatGenerationChunk(
                message=AIMessageChunk(content=[delta], tool_call_chunks=[rest])
            )


@tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    return f"{command}: " + "output line\n" * 60


def billed(messages: list[BaseMessage]) -> int:
    """The oracle: 4 characters of each message's content and calls JSON per token."""
    chars = 0
    for message in messages:
        calls = message.tool_calls if isinstance(message, AIMessage) else []
        chars += len(json.dumps({"content": message.content, "calls": calls}))
    return chars // 4


def plain(block: Any) -> Any:
    """A content block without the keys only streaming gives it."""
    if not isinstance(block, dict):
        return block
    return {k: v for k, v in block.items() if k not in STREAM_KEYS}


def request(messages: list[BaseMessage]) -> list[Any]:
    """What a request says, the streaming's own keys aside: each message's kind, text,
    content blocks (a tool_use block's arguments as its call has them) and calls."""
    said: list[Any] = []
    for message in messages:
        content = message.content
        if isinstance(content, list):
            content = [plain(block) for block in content]
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    block.pop("input", None)
        calls = message.tool_calls if isinstance(message, AIMessage) else []
        said.append((message.type, content, [(c["id"], c["args"]) for c in calls]))
    return said


class Snapshots(Recorder):
    """The recorder, keeping also a deep copy of each history as its call began."""

    def __init__(self) -> None:
        super().__init__()
        self.dumps: list[list[Any]] = []

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.dumps.append([copy.deepcopy(m.model_dump()) for m in request.messages])
        return super().wrap_model_call(request, handler)


def run_agent(
    model: BaseChatModel, tools: list[Any], streamed: bool, socket: str | None
) -> tuple[Snapshots, list[Any]]:
    """One agent run of ``model``, streamed or not, through the middleware: the
    recorder of what the model was handed, and the run's final messages."""
    middleware = ScoutdMiddleware(socket=socket, config={"context_window": WINDOW})
    recorder = Snapshots()
    stack: list[Any] = [recorder, middleware]
    agent = create_agent(model, tools, system_prompt="You are terse.", middleware=stack)
    given: Any = {"messages": [{"role": "user", "content": "look around"}]}
    limits: Any = {"recursion_limit": 200}
    try:
        if streamed:
            state: Any = None
            for mode, chunk in agent.stream(given, limits, stream_mode=["messages", "values"]):
                if mode == "values":
                    state = chunk
        else:
            state = agent.invoke(given, limits)
    finally:
        middleware.close()
    return recorder, state["messages"]


def run(streamed: bool, socket: str | None) -> tuple[StreamingThinker, Snapshots, list[Any]]:
    """One run of the script, streamed or not; the model, the recorder and the final
    messages with a deep copy of each as the run left it."""
    model = StreamingThinker()
    recorder, final = run_agent(model, [bash], streamed, socket)
    return model, recorder, final


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_streamed_thinking_is_counted_kept_and_sent_as_unstreamed(
    socket: tuple[str | None, str], streamed: bool
) -> None:
    model, recorder, final = run(streamed, socket[0])
    assert model.streamed == (TURNS + 1 if streamed else 0)
    assert len(model.seen) == TURNS + 1
    bills = [billed(messages) for messages in model.seen]
    assert not [bill for bill in bills if bill > WINDOW], bills
    assert billed(recorder.full[-1]) > 2 * WINDOW  # the run needed compacting, often
    kept_turns = edited = 0
    for k, messages in enumerate(model.seen):
        for message in messages:
            if isinstance(message, AIMessage) and message.tool_calls:
                kept_turns += 1
                edited += not any(message is given for given in recorder.full[k])
                first = plain(message.content[0])
                assert isinstance(first, dict) and first["type"] == "thinking"
                turn = int(first["thinking"].split()[1])
                assert first == {
                    "type": "thinking",
                    "thinking": thought(turn),
                    "signature": f"s{turn}",
                }
                ids = [c["id"] for c in message.tool_calls]
                blocks = [
                    b["id"]
                    for b in message.content
                    if isinstance(b, dict) and b.get("type") == "tool_use"
                ]
                assert blocks == ids  # a call block for each kept call, in order
    assert kept_turns >= TURNS and edited >= 3, (kept_turns, edited)  # the floors
    # The agent's messages, as each call began, are as the run ends with them.
    assert len(recorder.dumps) == TURNS + 1
    for dumps in recorder.dumps:
        assert [m.model_dump() for m in final[: len(dumps)]] == dumps
    if streamed:  # the same requests as the unstreamed run of the same script
        unstreamed, _, _ = run(False, socket[0])
        assert [request(m) for m in model.seen] == [request(m) for m in unstreamed.seen]
