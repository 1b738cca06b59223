"""A stand-in for the ``anthropic`` SDK (tests only): a scripted model, no network."""

from __future__ import annotations

from typing import Any

from _scripted import Obj, record


def _create(**request: Any) -> Obj:
    if record(request["messages"]) == 0:
        use = Obj(type="tool_use", id="toolu_1", name="bash", input={"command": "echo scripted"})
        return Obj(content=[use], stop_reason="tool_use")
    return Obj(content=[Obj(type="text", text="done")], stop_reason="end_turn")


class Anthropic:
    def __init__(self) -> None:
        self.messages = Obj(create=_create)
