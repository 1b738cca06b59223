"""Responses reasoning in LangChain messages (``langchain-openai``'s ``responses/v1``
content), streamed and not, through ``create_agent`` with scoutd's middleware.

Each turn's ``AIMessage`` holds, as that content does, a ``reasoning`` block (a
summary and ``encrypted_content``), a text block and three ``function_call``
blocks: the Responses items themselves, each call's item ``id`` (``fc_...``)
besides its ``call_id`` (the id of the message's ``tool_calls``). LangChain's
OpenAI model sends those blocks back as input items, and makes one from
``tool_calls`` only for a call no block holds (after all the blocks).

Every request must keep each kept call's ``function_call`` item as the model
made it, after its turn's reasoning, and no dropped call's; fit the window by a
plain oracle (4 characters of item JSON per token); not mutate the agent's
messages; and a streamed run must send what the same script's unstreamed run
sends, the streaming's own keys aside.

Before, a turn scoutd had to edit (a call of it dropped) lost the blocks of its
kept calls too: their items came back rebuilt from ``tool_calls``, without their
``id``, after the text.

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

from scoutd.integrations._langchain_messages import from_chat, to_chat
from tests.formats.validity import responses_problems, thinking_problems
from tests.integrations.scripted_chat import ScriptedChat
from tests.integrations.test_stream_thinking_langchain import Snapshots, run_agent

WINDOW = 8_000
TURNS = 12
CALLS = 3


def command(turn: int, n: int) -> str:
    """A call's command: long, as a file written by the shell is (scoutd may shorten it)."""
    return f"cat > f{turn}.{n} <<EOF\n" + "line of the file\n" * 150 + "EOF"


def blocks(turn: int) -> list[dict[str, Any]]:
    """The content of turn ``turn``'s message, as ``responses/v1`` holds it."""
    summary = [{"type": "summary_text", "text": f"turn {turn} " + "ponder " * 400}]
    reasoning = {
        "type": "reasoning",
        "id": f"rs_{turn}",
        "summary": summary,
        "encrypted_content": "e" * 1_500,
    }
    made: list[dict[str, Any]] = [reasoning]
    if turn % 2 == 0:  # a text between the reasoning and the calls, every other turn
        made.append({"type": "text", "text": f"step {turn}", "id": f"msg_{turn}"})
    made += [
        {
            "type": "function_call",
            "name": "bash",
            "arguments": json.dumps({"command": command(turn, n)}),
            "call_id": f"call_{turn}_{n}",
            "id": f"fc_{turn}_{n}",
        }
        for n in range(CALLS)
    ]
    return made


def calls(turn: int) -> list[Any]:
    return [
        {
            "name": "bash",
            "args": {"command": command(turn, n)},
            "id": f"call_{turn}_{n}",
            "type": "tool_call",
        }
        for n in range(CALLS)
    ]


class ResponsesStyle(ScriptedChat):
    """Answers (or streams, block by block) a turn of reasoning, text and calls."""

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
        content: list[Any] = list(blocks(turn))
        message = AIMessage(content=content, tool_calls=calls(turn))
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
        for index, block in enumerate(blocks(turn)):
            chunks: list[Any] = []
            if block["type"] == "function_call":
                chunks = [
                    {
                        "name": "bash",
                        "args": block["arguments"],
                        "id": block["call_id"],
                        "index": index,
                    }
                ]
            content: list[Any] = [{**block, "index": index}]
            message = AIMessageChunk(content=content, tool_call_chunks=chunks)
            yield ChatGenerationChunk(message=message)


@tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    return f"{command}: " + "output line\n" * 60


def items(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """The Responses input items an OpenAI model of LangChain sends for ``messages``:
    an assistant message's item blocks as they are (their stream index aside), its text
    as a message, then a call of ``tool_calls`` no block holds."""
    sent: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, AIMessage):
            if message.type == "tool":
                output = {"call_id": getattr(message, "tool_call_id", None)}
                sent.append({"type": "function_call_output", **output, "output": message.content})
            else:
                sent.append({"type": "message", "role": "user", "content": message.content})
            continue
        content = message.content if isinstance(message.content, list) else [message.content]
        for block in content:
            if isinstance(block, str):
                sent.append({"type": "message", "role": "assistant", "content": block})
            elif block.get("type") == "text":
                said = {"type": "message", "role": "assistant", "content": block["text"]}
                sent.append(said | {"id": block.get("id")})
            elif block.get("type") in ("reasoning", "function_call"):
                sent.append({k: v for k, v in block.items() if k != "index"})
        held = {item.get("call_id") for item in sent if item.get("type") == "function_call"}
        for call in message.tool_calls:
            if call["id"] not in held:
                arguments = json.dumps(call["args"])
                sent.append(
                    {"type": "function_call", "name": call["name"], "arguments": arguments}
                    | {"call_id": call["id"]}
                )
    return sent


def billed(sent: list[dict[str, Any]]) -> int:
    """The oracle: 4 characters of each item's JSON per token."""
    return sum(len(json.dumps(item)) for item in sent) // 4


def run(streamed: bool, socket: str | None) -> tuple[ResponsesStyle, Snapshots, list[Any]]:
    model = ResponsesStyle()
    recorder, final = run_agent(model, [bash], streamed, socket)
    return model, recorder, final


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_kept_calls_keep_their_items_after_their_reasoning(
    socket: tuple[str | None, str], streamed: bool
) -> None:
    model, recorder, final = run(streamed, socket[0])
    assert model.streamed == (TURNS + 1 if streamed else 0)
    assert len(model.seen) == len(recorder.full) == TURNS + 1
    made = {
        item["call_id"]: item
        for turn in range(1, TURNS + 1)
        for item in blocks(turn)
        if item["type"] == "function_call"
    }
    bills, kept, edited = [], 0, 0
    for k, (history, seen) in enumerate(zip(recorder.full, model.seen, strict=True)):
        given, sent = items(history), items(seen)
        bills.append(billed(sent))
        assert not responses_problems(sent), k
        assert not thinking_problems("openai-responses", given, sent), k
        arguments = {
            call["id"]: call["args"]
            for message in seen
            if isinstance(message, AIMessage)
            for call in message.tool_calls
        }
        for position, item in enumerate(sent):
            if item.get("type") == "function_call":  # as made, with the arguments sent
                kept += 1
                ident = item["call_id"]
                assert {**item, "arguments": ""} == {**made[ident], "arguments": ""}, (k, item)
                assert json.loads(item["arguments"]) == arguments[ident], (k, ident)
            if item.get("type") == "reasoning":  # followed by an item of its turn, by id
                turn = item["id"].removeprefix("rs_")
                following = sent[position + 1].get("id", "")
                assert following.startswith((f"fc_{turn}_", f"msg_{turn}")), (k, position)
        for message in seen:
            if isinstance(message, AIMessage) and message not in recorder.full[k]:
                edited += 1  # scoutd's copy: a call dropped or shortened
    assert not [bill for bill in bills if bill > WINDOW], bills
    assert billed(items(recorder.full[-1])) > 2 * WINDOW  # compacting was needed
    assert kept >= TURNS and edited >= TURNS // 2, (kept, edited)  # the floors
    assert len(recorder.dumps) == TURNS + 1
    for dumps in recorder.dumps:
        assert [m.model_dump() for m in final[: len(dumps)]] == dumps
    if streamed:
        unstreamed, _, _ = run(False, socket[0])
        assert [items(m) for m in model.seen] == [items(m) for m in unstreamed.seen]


def test_a_dropped_custom_call_takes_its_item_along() -> None:
    """A freeform (custom) call is a ``custom_tool_call`` block whose ``call_id`` is the
    call's id: dropped, its block goes (sent, it would be a call with no output); kept,
    it stays. Before, such blocks were no call's and stayed whatever became of the call."""
    content: list[Any] = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
        {"type": "custom_tool_call", "call_id": "c1", "id": "ctc_1", "name": "patch", "input": "a"},
        {"type": "custom_tool_call", "call_id": "c2", "id": "ctc_2", "name": "patch", "input": "b"},
    ]
    made: list[Any] = [
        {"name": "patch", "args": {"__arg1": text}, "id": ident, "type": "tool_call"}
        for ident, text in (("c1", "a"), ("c2", "b"))
    ]
    history: list[BaseMessage] = [AIMessage(content=content, tool_calls=made)]
    sent = to_chat(history)
    kept = {**sent[0], "tool_calls": sent[0]["tool_calls"][1:]}  # c1 dropped
    (back,) = from_chat([kept], sent, history)
    assert isinstance(back, AIMessage)
    assert [call["id"] for call in back.tool_calls] == ["c2"]
    assert back.content == [content[0], content[2]]
    assert history[0].content == content  # the agent's message as it was
