"""The scripted model behind the LiteLLM proxy of tests/integrations/test_litellm.py.

A LiteLLM custom provider (``custom_provider_map`` in the proxy's
``config.yaml``): each call records the messages that reached the model and
answers with the next turn of a recorded run, built by LiteLLM's own mock
completion (``mock_response``, ``mock_tool_calls``), so the proxy does
everything it does with a provider, without network.
"""

from __future__ import annotations

from typing import Any

import litellm
from litellm.llms.custom_llm import CustomLLM

from scoutd.inbox import write_abort
from tests.integrations.replay import ABORT_REASON, Events, Replay


class ScriptedModel(CustomLLM):
    """Answers call ``k`` with turn ``k`` of ``replay``; :meth:`start` begins a new script."""

    def __init__(self) -> None:
        super().__init__()
        self.replay: Replay | None = None
        self.events: Events | None = None
        self.seen: list[list[Any]] = []
        self.fail_once = False  # the next call fails, as a provider's 500, after an abort

    def start(self, replay: Replay, events: Events, fail_once: bool = False) -> None:
        """A new script; with ``fail_once``, its first call writes the chat's abort (as
        an operator would while the call is in flight), then fails."""
        self.replay, self.events, self.seen = replay, events, []
        self.fail_once = fail_once

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        assert self.replay is not None and self.events is not None, "no script started"
        messages = list(kwargs["messages"])
        self.seen.append(messages)
        if self.fail_once:
            self.fail_once = False
            write_abort(self.events.save_file, ABORT_REASON)
            raise litellm.InternalServerError("provider error", "scripted", str(kwargs["model"]))
        turn = self.replay.turn(self.events.model_called())
        calls = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in turn.calls
        ]
        return await litellm.acompletion(
            model="gpt-4o",
            messages=messages,
            mock_response=turn.text or "working on it",
            mock_tool_calls=calls or None,
        )


scripted_model = ScriptedModel()
