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

A sub-agent's runs (``agent.as_tool``) and runs made at once that share the
filter each get a session of their own (see :class:`ScoutdInputFilter`).

Recall (docs/STRATEGIES.md, "Recall") is on by default: shortened outputs
carry their handles, and the filter's :attr:`~ScoutdInputFilter.recall_tool`,
given to the agent (``Agent(tools=[..., f.recall_tool])``), answers the model's
``recall`` calls in this process (or from the daemon's session), never by the
provider.

Needs the extra ``scoutd[openai-agents]``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

import anyio.to_thread
import msgspec

from ..errors import Aborted
from ..formats import OPENAI_RESPONSES
from ..recall import (
    RECALL_DESCRIPTION,
    RECALL_TOOL_NAME,
    arguments_of,
    arguments_problem,
    recall_parameters,
)
from ._run import ClosedByWith, HookClosed, HookOptions, RunPreparer, missing_extra
from ._run_engines import recalled

try:
    from agents import FunctionTool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise missing_extra(__name__, "openai-agents", exc) from None

__all__ = ["ScoutdInputFilter"]


# Conversations one filter keeps a session for at once; past it, the least recently
# prepared idle one is closed (its run, if it goes on, is sent whole to a new session).
MAX_CONVERSATIONS = 16
# First items of conversations closed so, remembered to keep their recalls refused.
MAX_RETIRED = 1024
# The recall tool's answer when more than one kept conversation could be the caller's.
RECALL_AMBIGUOUS = (
    "recall is not available: runs that began with the same input share this scoutd"
    " filter, and which one is asking cannot be told; give each Runner.run its own"
    " ScoutdInputFilter"
)


@dataclass(eq=False)
class _Conversation:
    """One conversation the filter serves: its run's preparer and the items of its
    latest round (what a later round of the same run starts with)."""

    preparer: RunPreparer
    held: list[Any] = field(default_factory=list)
    busy: int = 0  # rounds in progress
    used: int = 0  # when it was last routed, for closing the least recently used


def _starts_with(items: Sequence[Any], head: Sequence[Any]) -> bool:
    """Whether ``items`` begins with ``head`` (Python's ``==``, identity first)."""
    if len(head) > len(items):
        return False
    try:
        start = items[: len(head)]
        return bool((start if type(start) is list else list(start)) == list(head))
    except Exception:  # an item whose comparison fails: taken as different
        return False


class ScoutdInputFilter(ClosedByWith):
    """A ``call_model_input_filter`` that prepares each model call's input with scoutd.

    Make one per ``Runner.run``, and close it after the run (``with
    ScoutdInputFilter(...) as f:``), which ends its daemon sessions. The keyword
    arguments are those of :class:`~scoutd.integrations._run.RunPreparer`: ``save_file`` (the chat
    whose inbox is read), ``socket`` (the daemon's socket path, or ``True`` for
    the default; ``None`` prepares in this process), ``strategies``, ``config``
    (``[prompt]`` overrides for every call), ``timeout`` and ``recall``
    (default True: pass ``recall=False`` for a model without the recall tool).
    The items are read as OpenAI Responses input items.

    The SDK hands one filter more than one conversation: the runs of a sub-agent
    called as a tool (``agent.as_tool``) inherit the run's ``RunConfig``, and a
    filter may be given to runs made at once. Each conversation gets a session of
    its own (a round goes to the one its items continue; at most
    ``MAX_CONVERSATIONS``), so that one never replaces another's, and a ``recall``
    is answered from the conversation that began with the calling run's input:
    when more than one did and they answer differently, it is refused with a text
    rather than answered from another run's. An abort met by any of them stops
    them all.
    """

    def __init__(self, **options: Unpack[HookOptions]) -> None:
        options.setdefault("recall", True)
        self._options = options
        self._lock = threading.Lock()
        self._conversations = [_Conversation(RunPreparer(format=OPENAI_RESPONSES, **options))]
        self._latest = self._conversations[0].preparer
        self._retired: deque[Any] = deque(maxlen=MAX_RETIRED)
        self._clock = 0
        self._aborted: str | None = None
        self._closed = False
        self.recall_tool = FunctionTool(
            name=RECALL_TOOL_NAME,
            description=RECALL_DESCRIPTION,
            params_json_schema=recall_parameters(),
            on_invoke_tool=self._invoke_recall,
            strict_json_schema=False,  # both parameters are optional
        )
        """The ``recall`` function tool for the agent's ``tools``, answered locally."""

    @property
    def preparer(self) -> RunPreparer:
        """The preparer of the latest round: ``.last`` is its prompt and report,
        ``.aborted`` the abort's reason, ``.check()`` raises an abort of the chat."""
        return self._latest

    async def _invoke_recall(self, context: ToolContext[Any], arguments: str) -> str:
        """The recall tool's answer to the model's JSON ``arguments``."""
        try:
            given = msgspec.json.decode(arguments or "{}")
        except (msgspec.DecodeError, RecursionError):  # what a model sent: never raised
            given = None
        found = arguments_of(given)  # the rule and the texts every integration gives
        if isinstance(found, str):
            return found
        start = list(getattr(context, "turn_input", None) or [])
        return await anyio.to_thread.run_sync(self.recall, start, *found)

    def recall(self, start: Sequence[Any], handle: str | int | None, search: str | None) -> str:
        """The recall answer for a run whose conversation began with ``start`` (its
        input; empty: any), from that conversation's session (blocking).

        Raises:
            HookClosed: the filter was closed.
        """
        with self._lock:
            if self._closed:
                raise HookClosed("this scoutd hook was closed: make a new one for a new run")
            kept = [c for c in self._conversations if c.held]
            candidates = [c.preparer for c in kept if _starts_with(c.held, start)]
            if not candidates and len(kept) == 1 and not self._retired:
                candidates = [kept[0].preparer]  # the only conversation there is
            retired = any(_starts_with([head], start[:1]) for head in self._retired)
        problem = arguments_problem(handle, search)
        if problem is not None:
            return problem
        if retired:  # its session may have been closed to make room: never guess
            return RECALL_AMBIGUOUS
        if not candidates:
            return recalled(None, handle, search)
        try:
            answers = {preparer.recall(handle, search) for preparer in candidates}
        except HookClosed:
            if self._closed:
                raise
            return RECALL_AMBIGUOUS  # one was closed to make room meanwhile
        if len(answers) > 1:
            return RECALL_AMBIGUOUS
        return answers.pop()

    def prepare_items(self, items: Sequence[Any]) -> list[Any]:
        """The prepared input items (blocking; :meth:`__call__` runs it in a thread).

        Raises:
            Aborted: an operator aborted the chat (in this run or another the
                filter serves).
        """
        conversation, closing = self._route(items)
        if closing is not None:
            closing.close()
        try:
            return conversation.preparer.prepare(items).messages
        except Aborted as exc:
            with self._lock:
                self._aborted = self._aborted or exc.reason
            raise
        finally:
            with self._lock:
                conversation.busy -= 1
                if self._aborted is None or conversation.preparer.aborted is not None:
                    self._latest = conversation.preparer  # the abort stays on show

    def _route(self, items: Sequence[Any]) -> tuple[_Conversation, RunPreparer | None]:
        """The conversation ``items`` continue (the longest held one they begin with),
        or a new one, counted busy; and the preparer of one closed to make room."""
        with self._lock:
            if self._aborted is not None:
                raise Aborted(self._aborted)
            if self._closed:
                raise HookClosed("this scoutd hook was closed: make a new one for a new run")
            found = [c for c in self._conversations if _starts_with(items, c.held)]
            chosen = max(found, key=lambda c: len(c.held), default=None)
            closing = None
            if chosen is None:
                chosen = _Conversation(RunPreparer(format=OPENAI_RESPONSES, **self._options))
                closing = self._make_room()
                self._conversations.append(chosen)
            self._clock += 1
            chosen.held, chosen.used = list(items), self._clock
            chosen.busy += 1
            return chosen, closing

    def _make_room(self) -> RunPreparer | None:
        """Drop the least recently used idle conversation once there are too many
        (called under the lock; the caller closes its preparer)."""
        if len(self._conversations) < MAX_CONVERSATIONS:
            return None
        idle = [c for c in self._conversations if not c.busy and c.preparer is not self._latest]
        if not idle:
            return None
        oldest = min(idle, key=lambda c: c.used)
        self._conversations.remove(oldest)
        if oldest.held:
            self._retired.append(oldest.held[0])
        return oldest.preparer

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The hook: the same instructions and the prepared input items.

        Raises:
            Aborted: an operator aborted the run.
        """
        items = list(data.model_data.input)
        prepared = await anyio.to_thread.run_sync(self.prepare_items, items)
        return ModelInputData(input=prepared, instructions=data.model_data.instructions)

    def close(self) -> None:
        """End the scoutd sessions of the filter's runs (idempotent)."""
        with self._lock:
            self._closed = True
            preparers = [c.preparer for c in self._conversations]
        for preparer in preparers:
            preparer.close()
