"""A scripted provider shared by the stand-in SDKs: one tool call, then a final answer.

Each request's prompt is appended as one JSON line to ``$SDK_STUB_LOG``, so that a
test can read what the model was sent.
"""

from __future__ import annotations

import json
import os
from typing import Any


class Obj:
    """An SDK response object: attributes, and ``model_dump`` as pydantic gives it."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        out = {}
        for key, value in self.__dict__.items():
            if exclude_none and value is None:
                continue
            out[key] = value.model_dump(exclude_none) if isinstance(value, Obj) else value
        return out


def record(prompt: Any) -> int:
    """Log the prompt; return how many requests came before this one."""
    path = os.environ["SDK_STUB_LOG"]
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(prompt) + "\n")
    with open(path, encoding="utf-8") as log:
        return sum(1 for _ in log) - 1


COMMAND = json.dumps({"command": "echo scripted"})
