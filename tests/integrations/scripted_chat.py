"""A LangChain chat model that answers from a script, for the agent loops of these
tests: no provider is called. It records every request it gets (``seen``) and
binds any tools (the script says which it calls); a subclass says what each
turn answers (``_generate``, and ``_stream`` where a test streams)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import ConfigDict, Field


class ScriptedChat(BaseChatModel):
    """The model a test's agent calls; ``record`` numbers its turns from 1."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def record(self, messages: Sequence[BaseMessage]) -> int:
        """Keep a copy of the request; the turn it is."""
        self.seen.append(list(messages))
        return len(self.seen)
