"""A stand-in for the ``openai`` SDK (tests only): a scripted model, no network."""

from __future__ import annotations

from typing import Any

from _scripted import COMMAND, Obj, record


def _chat(**request: Any) -> Obj:
    if record(request["messages"]) == 0:
        call = Obj(id="call_1", type="function", function=Obj(name="bash", arguments=COMMAND))
        message = Obj(role="assistant", content=None, tool_calls=[call])
    else:
        message = Obj(role="assistant", content="done", tool_calls=None)
    return Obj(choices=[Obj(message=message)])


def _responses(**request: Any) -> Obj:
    if record(request["input"]) == 0:
        call = Obj(type="function_call", call_id="call_1", name="bash", arguments=COMMAND)
        return Obj(output=[call], output_text="")
    text = Obj(
        type="message",
        role="assistant",
        content=[{"type": "output_text", "text": "done"}],
    )
    return Obj(output=[text], output_text="done")


class OpenAI:
    def __init__(self) -> None:
        self.chat = Obj(completions=Obj(create=_chat))
        self.responses = Obj(create=_responses)


class AsyncOpenAI:
    def __init__(self) -> None:
        async def create(**request: Any) -> Obj:
            return _responses(**request)

        self.responses = Obj(create=create)
