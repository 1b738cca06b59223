"""scoutd in front of every model request of a Pydantic AI agent (docs/INTEGRATIONS.md).

One line::

    agent = Agent(model, capabilities=[ScoutdCapability(save_file="/srv/a/run-1.chat")])

Before each model request the capability's ``before_model_request`` hook maps
the request's messages to OpenAI Chat messages, prepares those with scoutd
and hands the model the agent's own messages for what scoutd kept (copies
with only the edited parts replaced, new ones for what it added). It sets
only what the request sends: the run's history (``result.all_messages()``,
``RunContext.messages``) stays whole. Pydantic AI's ``ProcessHistory`` (the
former ``history_processors=``) would not do: it writes what it returns back
into the run's history, which would make compaction permanent.

Each run (``run``, ``run_sync``, ``run_stream``, ``run_stream_events``,
``iter``) has its own scoutd session, ended when the run ends. An operator's
``abort`` raises :class:`scoutd.Aborted` out of the run before the next model
request (the hook runs once per request step, before its first attempt, and
Pydantic AI lets what it raises through; a further attempt of the same step,
a retry or another model, checks it again in ``prepare_model_request``),
and an aborted chat stays aborted (docs/RELIABILITY.md): every later run,
with this capability or another for that chat, fails the same way until an
operator clears it.

Recall (docs/STRATEGIES.md, "Recall") is on by default: shortened outputs
carry their handles, and the capability contributes a ``recall`` tool to the
agent (``get_toolset``), answered from the run's scoutd session (in this
process or by the daemon), never by the provider; ``recall=False`` contributes
none and leaves the prompts without handles.

Needs the extra ``scoutd[pydantic-ai]``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, Unpack

import anyio.to_thread

from ..errors import Aborted
from ..formats import OPENAI_CHAT
from ..recall import (
    NOT_AN_OBJECT,
    RECALL_DESCRIPTION,
    RECALL_TOOL_NAME,
    arguments_of,
    recall_parameters,
)
from ._run import HookOptions, RunPreparer, missing_extra

try:
    from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import RunContext, Tool
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset
    from pydantic_core import SchemaValidator, core_schema

    from ._pydantic_ai_messages import from_chat, to_chat
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise missing_extra(__name__, "pydantic-ai", exc) from None

__all__ = ["ScoutdCapability"]

_T = TypeVar("_T")

# The one keyword the recall function gets for arguments that are not a JSON object.
_NOT_AN_OBJECT = "(not a JSON object)"


class _NotAnObject:
    """The value under :data:`_NOT_AN_OBJECT`: no value a model sends is one, so a model's
    own ``{"(not a JSON object)": 1}`` is an object with an unknown key, as it is."""

    __slots__ = ()


def _keywords(given: Any) -> dict[str, Any]:
    """The recall function's keyword arguments for what the model sent: an object as it is,
    anything else (a list, a number, ``null``) under one key that the function answers
    with a text. Pydantic AI calls the function with ``**`` these and insists on a dict:
    a model's ``[1, 2]`` or ``null`` used to end the run with a ``TypeError``."""
    return given if isinstance(given, dict) else {_NOT_AN_OBJECT: _NotAnObject()}


class _Shared:
    """What the runs of one capability share: the abort once one of them saw it."""

    def __init__(self) -> None:
        self.aborted: str | None = None
        self.lock = threading.Lock()


class ScoutdCapability(AbstractCapability[Any]):
    """A Pydantic AI capability that prepares each model request's messages with scoutd.

    The keyword arguments are those of
    :class:`~scoutd.integrations._run.RunPreparer`: ``save_file`` (the chat
    whose inbox is read), ``socket`` (the daemon's socket path, or ``True`` for
    the default; ``None`` prepares in this process), ``strategies``, ``config``
    (``[prompt]`` overrides for every request), ``timeout`` and ``recall``
    (default True: the capability contributes the recall tool; ``recall=False``
    contributes none and leaves the prompts without handles). One capability
    serves one chat; each run of the agent gets its own instance (``for_run``)
    and scoutd session.
    """

    def __init__(self, **options: Unpack[HookOptions]) -> None:
        options.setdefault("recall", True)
        self._options = options
        self._shared = _Shared()
        self.preparer: RunPreparer | None = None  # the run's, once it prepared a request

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not part of an agent spec: it holds a live session."""
        return None

    async def for_run(self, ctx: RunContext[Any]) -> ScoutdCapability:
        """A fresh instance for the run, sharing this one's memory of an abort."""
        run = ScoutdCapability(**self._options)
        run._shared = self._shared
        return run

    def get_toolset(self) -> AbstractToolset[Any] | None:
        """The ``recall`` tool, answered by this instance's run (None with ``recall=False``).

        Pydantic AI asks the run's instance (``for_run``) for its toolset, so
        each run's calls reach that run's session.
        """
        if not self._options["recall"]:
            return None

        async def recall(**arguments: Any) -> str:
            """No parameter of its own: any key the model sends is one of ``arguments``
            (a bound method's ``self`` once clashed with a model's ``{"self": 1}``)."""
            return await self._recall(arguments)

        tool: Tool[Any] = Tool.from_schema(
            recall, RECALL_TOOL_NAME, RECALL_DESCRIPTION, recall_parameters()
        )
        # from_schema validates nothing (any value passes) and then calls with ``**``:
        # every value the model sends is made a dict of keywords here instead.
        tool.function_schema.validator = SchemaValidator(
            core_schema.no_info_plain_validator_function(_keywords)
        )
        return FunctionToolset([tool])

    async def _recall(self, given: dict[str, Any]) -> str:
        """The recall tool's answer (Pydantic AI skips the schema's checks: done here)."""
        if isinstance(given.get(_NOT_AN_OBJECT), _NotAnObject):
            return NOT_AN_OBJECT
        arguments = arguments_of(given)  # the rule and the texts every integration gives
        if isinstance(arguments, str):
            return arguments
        return await anyio.to_thread.run_sync(self._run_preparer().recall, *arguments)

    def _run_preparer(self) -> RunPreparer:
        """The run's preparer, made at its first use (no session opens before a round)."""
        with self._shared.lock:
            if self.preparer is None:
                self.preparer = RunPreparer(format=OPENAI_CHAT, **self._options)
            return self.preparer

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Run the agent, then end the run's scoutd session whatever happened."""
        try:
            return await handler()
        finally:
            if self.preparer is not None:
                await anyio.to_thread.run_sync(self.preparer.close)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """The request with the prepared messages (the run's history is left as it is).

        Raises:
            Aborted: an operator aborted the chat (now, or in an earlier run).
        """
        messages = list(request_context.messages)
        request_context.messages = await anyio.to_thread.run_sync(self.prepared, messages)
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """A further attempt of the request step (a retry, another model): the abort is
        checked again; the messages stay those :meth:`before_model_request` prepared.

        Raises:
            Aborted: an operator aborted the chat since the step's first attempt.
        """
        if request_context.attempt > 1:
            await anyio.to_thread.run_sync(self._check)
        return request_context

    def _check(self) -> None:
        """Raise the chat's abort (blocking; the hook uses a thread)."""
        self._guarded(RunPreparer.check)

    def prepared(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """The messages the model gets for ``messages`` (blocking; the hook uses a thread)."""
        sent = to_chat(messages)
        prepared = self._guarded(lambda preparer: preparer.prepare(sent.chat))
        return from_chat(prepared.messages, sent, messages)

    def _guarded(self, round: Callable[[RunPreparer], _T]) -> _T:
        """``round`` of the run's preparer, unless an abort is known; an abort it raises is
        remembered for the capability's later runs."""
        with self._shared.lock:
            if self._shared.aborted is not None:
                raise Aborted(self._shared.aborted)
        try:
            return round(self._run_preparer())
        except Aborted as exc:
            with self._shared.lock:
                self._shared.aborted = exc.reason
            raise
