"""LangChain messages to OpenAI Chat messages and back (the middleware's mapping)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="needs the extra scoutd[langchain]")

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import scoutd
from scoutd.integrations._langchain_messages import ORIGIN, from_chat, to_chat


def call(call_id: str, command: str) -> dict[str, Any]:
    return {"name": "bash", "args": {"command": command}, "id": call_id, "type": "tool_call"}


def conversation() -> list[Any]:
    return [
        HumanMessage(content="fix the bug", id="h1"),
        AIMessage(
            content=[
                {"type": "text", "text": "two looks"},
                {"type": "tool_use", "id": "a", "name": "bash", "input": {}},
                {"type": "tool_use", "id": "b", "name": "bash", "input": {}},
            ],
            tool_calls=[call("a", "cat " + "x" * 3000), call("b", "ls")],
            additional_kwargs={"tool_calls": ["raw provider copy"], "refusal": None},
            id="ai1",
        ),
        ToolMessage(content="A" * 5000, tool_call_id="a", artifact={"rows": 3}, id="t1"),
        ToolMessage(content="B", tool_call_id="b", id="t2"),
    ]


def test_to_chat_is_the_openai_chat_view() -> None:
    chat = to_chat(conversation())
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "tool"]
    assert [m[ORIGIN] for m in chat] == [0, 1, 2, 3]
    assert chat[1]["content"] == "two looks" and type(chat[1]["content"]) is str
    assert json.loads(chat[1]["tool_calls"][0]["function"]["arguments"])["command"].startswith(
        "cat x"
    )
    assert chat[2]["tool_call_id"] == "a"


def test_unchanged_messages_come_back_as_the_same_objects() -> None:
    messages = conversation()
    chat = to_chat(messages)
    copies = json.loads(json.dumps(chat))  # as decoded from the daemon's answer
    for prepared in (chat, copies):
        back = from_chat(prepared, chat, messages)
        assert all(a is b for a, b in zip(back, messages, strict=True))


def test_edited_messages_keep_everything_but_the_edit() -> None:
    messages = conversation()
    chat = to_chat(messages)
    prepared = json.loads(json.dumps(chat))
    arguments = json.dumps({"command": "cat xxx[truncated]"})
    prepared[1]["tool_calls"] = [dict(prepared[1]["tool_calls"][0])]
    prepared[1]["tool_calls"][0]["function"] = {"name": "bash", "arguments": arguments}
    prepared[2]["content"] = "Truncated (5000): AAA"
    del prepared[3]  # the output of the dropped call goes with it
    notice = {"role": "user", "content": "[Context compaction] ..."}
    prepared.insert(1, notice)
    back = from_chat(prepared, chat, messages)
    assert isinstance(back[1], HumanMessage) and back[1].content == notice["content"]
    assert back[0] is messages[0]
    ai, tool = back[2], back[3]
    assert isinstance(ai, AIMessage) and isinstance(tool, ToolMessage)
    assert ai.id == "ai1" and [c["id"] for c in ai.tool_calls] == ["a"]
    assert ai.tool_calls[0]["args"] == {"command": "cat xxx[truncated]"}
    assert "tool_calls" not in ai.additional_kwargs and "refusal" in ai.additional_kwargs
    assert [b["id"] for b in ai.content if b["type"] == "tool_use"] == ["a"]  # type: ignore[index]
    assert tool.content == "Truncated (5000): AAA"
    assert (tool.id, tool.tool_call_id, tool.artifact) == ("t1", "a", {"rows": 3})
    # The agent's own messages were not touched.
    assert len(messages[1].tool_calls) == 2 and messages[2].content == "A" * 5000


@pytest.mark.parametrize(
    "item",
    [
        {"role": "user", "content": "x", ORIGIN: 99},
        {"role": "user", "content": "x", ORIGIN: -1},
        {"role": "user", "content": "x", ORIGIN: True},
        {"role": "user", "content": "x", ORIGIN: "0"},
        {"role": "user", "content": ["not", "text"]},
        {"role": "system", "content": "sys"},
    ],
)
def test_unknown_origins_are_added_messages(item: dict[str, Any]) -> None:
    messages = [HumanMessage(content="hi")]
    back = from_chat([item], to_chat(messages), messages)
    assert len(back) == 1 and back[0] is not messages[0]
    expected = SystemMessage if item["role"] == "system" else HumanMessage
    assert isinstance(back[0], expected)


def test_arguments_that_are_not_an_object_survive() -> None:
    messages = [
        AIMessage(content="", tool_calls=[call("a", "ls")]),
        ToolMessage("o", tool_call_id="a"),
    ]
    chat = to_chat(messages)
    prepared = json.loads(json.dumps(chat))
    prepared[0]["tool_calls"][0]["function"]["arguments"] = "[1, 2"
    back = from_chat(prepared, chat, messages)
    assert back[0].tool_calls[0]["args"] == {"arguments": "[1, 2"}  # type: ignore[attr-defined]


turns = st.lists(
    st.tuples(st.text(max_size=30), st.text(max_size=200), st.booleans()), min_size=1, max_size=12
)


@given(turns)
def test_scoutd_over_the_mapping_keeps_the_agents_objects(
    spec: list[tuple[str, str, bool]],
) -> None:
    """Any prepared prompt maps back: kept messages are the agent's, nothing is mutated."""
    messages: list[Any] = [HumanMessage(content="start")]
    for n, (text, output, with_call) in enumerate(spec):
        if with_call:
            messages.append(AIMessage(content=text, tool_calls=[call(f"c{n}", text)]))
            messages.append(ToolMessage(content=output, tool_call_id=f"c{n}"))
        else:
            messages.append(AIMessage(content=text))
    before = [m.model_dump() for m in messages]
    chat = to_chat(messages)
    config = {"max_tool_calls": 2, "full_tool_outputs": 1, "max_tool_chars": 20}
    prepared = scoutd.prepare(chat, "shorten_tools", config=config, format="openai-chat")
    back = from_chat(prepared.messages, chat, messages)
    assert [m.model_dump() for m in messages] == before
    calls = {c["id"] for m in back if isinstance(m, AIMessage) for c in m.tool_calls}
    for item, message in zip(prepared.messages, back, strict=True):
        origin = item.get(ORIGIN)
        if origin is not None and item is chat[origin]:
            assert message is messages[origin]
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in calls  # every output still has its call


def test_blocks_whose_type_or_id_is_not_a_string_are_never_hashed() -> None:
    """A block with a list or object ``type`` is no call block; one with such an ``id``
    belongs to no kept call (docs/RELIABILITY.md, "What a client may configure")."""
    messages = conversation()
    odd: list[Any] = [
        {"type": ["tool_use"], "id": "a"},
        {"type": {"a": 1}, "id": "b"},
        {"type": "tool_use", "id": ["a"], "name": "bash", "input": {}},
    ]
    messages[1] = messages[1].model_copy(update={"content": [*messages[1].content, *odd]})
    chat = to_chat(messages)
    prepared = json.loads(json.dumps(chat))
    prepared[1]["tool_calls"] = [dict(prepared[1]["tool_calls"][0])]
    del prepared[3]
    back = from_chat(prepared, chat, messages)
    content = back[1].content
    assert odd[0] in content and odd[1] in content  # not call blocks: kept as they were
    assert odd[2] not in content  # a call block of no kept call: gone with its call
