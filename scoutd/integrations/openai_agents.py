"""scoutd in front of every model call of the OpenAI Agents SDK (docs/INTEGRATIONS.md).

One line::

    RunConfig(call_model_input_filter=ScoutdInputFilter(save_file="/srv/agent/run-1.chat"))

Before each model call the SDK hands the filter the run's input items (OpenAI
Responses format) and the instructions; the filter returns the prepared items
and the instructions unchanged. The SDK's own history (``RunResult``,
``to_input_list()``, sessions) is never touched: only what the model sees
changes. An operator's ``abort`` raises :class:`scoutd.Aborted` out of
``Runner.run`` before the next model call (the filter runs once before each
model call, not again before the SDK's retries of it: docs/INTEGRATIONS.md,
"Retries and fallbacks"; the SDK re-raises what it raises), and an
aborted chat stays aborted (docs/RELIABILITY.md): a later run, with this
filter or a new one for that chat, fails the same way until an operator
clears it.

Recall (docs/STRATEGIES.md, "Recall") is on by default: shortened outputs
carry their handles, and the filter's :attr:`~ScoutdInputFilter.recall_tool`,
given to the agent (``Agent(tools=[..., f.recall_tool])``), answers the model's
``recall`` calls in this process (or from the daemon's session), never by the
provider.

Needs the extra ``scoutd[openai-agents]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import anyio.to_thread
import msgspec

from ..formats import OPENAI_RESPONSES
from ..recall import RECALL_DESCRIPTION, RECALL_TOOL_NAME, arguments_of, recall_parameters
from ._run import ClosedByWith, HookOptions, RunPreparer, missing_extra

try:
    from agents import FunctionTool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise missing_extra(__name__, "openai-agents", exc) from None

__all__ = ["ScoutdInputFilter"]


class ScoutdInputFilter(ClosedByWith):
    """A ``call_model_input_filter`` that prepares each model call's input with scoutd.

    One filter is one run's scoutd session: make one per ``Runner.run``, and
    close it after the run (``with ScoutdInputFilter(...) as f:``), which ends
    its daemon session. The keyword arguments are those of
    :class:`~scoutd.integrations._run.RunPreparer`: ``save_file`` (the chat
    whose inbox is read), ``socket`` (the daemon's socket path, or ``True`` for
    the default; ``None`` prepares in this process), ``strategies``, ``config``
    (``[prompt]`` overrides for every call), ``timeout`` and ``recall``
    (default True: pass ``recall=False`` for a model without the recall tool).
    The items are read as OpenAI Responses input items.
    """

    def __init__(self, **options: Unpack[HookOptions]) -> None:
        options.setdefault("recall", True)
        self.preparer = RunPreparer(format=OPENAI_RESPONSES, **options)
        self.recall_tool = FunctionTool(
            name=RECALL_TOOL_NAME,
            description=RECALL_DESCRIPTION,
            params_json_schema=recall_parameters(),
            on_invoke_tool=self._invoke_recall,
            strict_json_schema=False,  # both parameters are optional
        )
        """The ``recall`` function tool for the agent's ``tools``, answered locally."""

    async def _invoke_recall(self, context: ToolContext[Any], arguments: str) -> str:
        """The recall tool's answer to the model's JSON ``arguments``."""
        try:
            given = msgspec.json.decode(arguments or "{}")
        except (msgspec.DecodeError, RecursionError):  # what a model sent: never raised
            given = None
        found = arguments_of(given)  # the rule and the texts every integration gives
        if isinstance(found, str):
            return found
        return await anyio.to_thread.run_sync(self.preparer.recall, *found)

    def prepare_items(self, items: Sequence[Any]) -> list[Any]:
        """The prepared input items (blocking; :meth:`__call__` runs it in a thread)."""
        return self.preparer.prepare(items).messages

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The hook: the same instructions and the prepared input items.

        Raises:
            Aborted: an operator aborted the run.
        """
        items = list(data.model_data.input)
        prepared = await anyio.to_thread.run_sync(self.prepare_items, items)
        return ModelInputData(input=prepared, instructions=data.model_data.instructions)

    def close(self) -> None:
        """End the run's scoutd session (idempotent)."""
        self.preparer.close()
