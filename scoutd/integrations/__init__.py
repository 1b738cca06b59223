"""Drop-in hooks for agent frameworks (docs/INTEGRATIONS.md).

- :mod:`scoutd.integrations.openai_agents`: a ``call_model_input_filter`` for
  the OpenAI Agents SDK (extra ``scoutd[openai-agents]``).
- :mod:`scoutd.integrations.langchain`: an agent middleware for LangChain's
  ``create_agent`` (extra ``scoutd[langchain]``).
- :mod:`scoutd.integrations.pydantic_ai`: a capability for Pydantic AI's
  ``Agent`` (extra ``scoutd[pydantic-ai]``).
- :mod:`scoutd.integrations.mini_swe_agent`: a model class for mini-swe-agent's
  config (extra ``scoutd[mini-swe-agent]``).
- :mod:`scoutd.integrations.litellm`: a pre-call callback for LiteLLM's proxy,
  for agents in any language (extra ``scoutd[litellm]``).

Each is imported on its own; ``import scoutd`` never imports a framework.
"""

from __future__ import annotations

__all__: list[str] = []
