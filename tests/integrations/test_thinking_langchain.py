"""An agent's thinking through LangChain's own loop (``create_agent``) with scoutd's middleware.

Each model turn holds an Anthropic ``thinking`` block (as ``langchain-anthropic``
puts it in an ``AIMessage``'s content), a text and three parallel calls with
their ``tool_use`` blocks. The thinking is sent back to the provider, so it must
be counted: every request the model gets fits the window by a plain oracle (4
characters of content and calls JSON per token), a kept turn keeps its thinking
first and unchanged, and the agent's own messages are not mutated.

Before, the middleware's view held a message's text only: the thinking counted
for nothing and the requests went far past the window uncompacted.

In process, and through a real daemon.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

import scoutd
from scoutd.integrations._langchain_messages import from_chat, to_chat
from scoutd.integrations.langchain import ScoutdMiddleware
from tests.integrations.scripted_chat import ScriptedChat
from tests.integrations.test_langchain import Recorder

WINDOW = 8_000
TURNS = 12
CALLS = 3


def thinking(turn: int) -> dict[str, Any]:
    return {
        "type": "thinking",
        "thinking": f"turn {turn} " + "ponder " * 900,
        "signature": f"s{turn}",
    }


class ThinkingModel(ScriptedChat):
    """Answers with a turn of thinking, text and parallel calls; records what it was sent."""

    made: list[tuple[AIMessage, Any]] = Field(default_factory=list)

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
        calls = [
            {
                "name": "bash",
                "args": {"command": f"ls {turn}.{n}"},
                "id": f"c{turn}_{n}",
                "type": "tool_call",
            }
            for n in range(CALLS)
        ]
        content: list[Any] = [thinking(turn), {"type": "text", "text": f"step {turn}"}]
        content += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            for c in calls
        ]
        message = AIMessage(content=content, tool_calls=calls)
        self.made.append((message, copy.deepcopy(message.model_dump())))
        return ChatResult(generations=[ChatGeneration(message=message)])


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


def test_thinking_is_counted_kept_and_not_mutated(socket: tuple[str | None, str]) -> None:
    model = ThinkingModel()
    middleware = ScoutdMiddleware(socket=socket[0], config={"context_window": WINDOW})
    recorder = Recorder()
    stack: list[Any] = [recorder, middleware]  # the recorder sees what scoutd is handed
    agent = create_agent(model, [bash], system_prompt="You are terse.", middleware=stack)
    agent.invoke(
        {"messages": [{"role": "user", "content": "look around"}]}, {"recursion_limit": 200}
    )
    middleware.close()
    assert len(model.seen) == TURNS + 1
    bills = [billed(messages) for messages in model.seen]
    over = [bill for bill in bills if bill > WINDOW]
    assert not over, bills
    thought = sum(len(json.dumps(made[1]["content"])) for made in model.made) // 4
    assert thought > 2 * WINDOW  # the run needed compacting, often
    kept_turns = 0
    for messages in model.seen:
        for message in messages:
            if isinstance(message, AIMessage) and message.tool_calls:
                kept_turns += 1
                first = message.content[0]
                assert isinstance(first, dict) and first["type"] == "thinking"
                turn = int(first["thinking"].split()[1])
                assert first == thinking(turn)
                ids = {c["id"] for c in message.tool_calls}
                blocks = {
                    b["id"]
                    for b in message.content
                    if isinstance(b, dict) and b["type"] == "tool_use"
                }
                assert ids == blocks
    assert kept_turns >= TURNS  # the floor: kept turns of calls were looked at
    config = {"context_window": WINDOW, "recall": True}
    for k, history in enumerate(recorder.full):  # each round is what a whole prepare gives
        view = to_chat(history)
        prepared = scoutd.prepare(view, config=config, format="openai-chat").messages
        assert from_chat(prepared, view, history) == model.seen[k][1:], k
    for message, dumped in model.made:  # the run names each message after it was made
        assert {**message.model_dump(), "id": None} == dumped
