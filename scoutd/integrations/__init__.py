"""Drop-in hooks for agent frameworks (docs/INTEGRATIONS.md).

- :mod:`scoutd.integrations.openai_agents`: a ``call_model_input_filter`` for
  the OpenAI Agents SDK (extra ``scoutd[openai-agents]``).
- :mod:`scoutd.integrations.langchain`: an agent middleware for LangChain's
  ``create_agent`` (extra ``scoutd[langchain]``).

Each is imported on its own; ``import scoutd`` never imports a framework.
"""

from __future__ import annotations

__all__: list[str] = []
