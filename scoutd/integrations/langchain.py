"""scoutd in front of every model call of a LangChain agent (docs/INTEGRATIONS.md).

One line::

    agent = create_agent(model, tools, middleware=[ScoutdMiddleware(save_file="/srv/a/run.chat")])

Before each model call the middleware prepares the request's messages (the
agent's conversation, without the system message) by way of the OpenAI Chat
mapping and hands the model the prepared ones. The agent's state is never
touched: only what the model sees changes. Each run (``invoke``/``ainvoke``)
has its own scoutd session, opened at its first model call and ended when the
run ends: the agent finishes, or an exception (an error, an abort, a
cancellation) leaves one of the middleware's hooks; :meth:`ScoutdMiddleware.close`
ends those of runs that ended elsewhere (the recursion limit, a stream left
unfinished).

An operator's ``abort`` raises :class:`scoutd.Aborted` out of ``invoke``
before the next model call, and an aborted chat stays aborted
(docs/RELIABILITY.md): every later run of this middleware, and of any other
for that chat until an operator clears it, fails the same way. The abort is
raised from ``before_model``, a step of its own that no model-call wrapper
(``ModelRetryMiddleware``, fallbacks) runs inside, so none can turn it into
an ordinary answer; the prepare inside ``wrap_model_call`` raises it as a
non-retryable model error (:class:`ModelCallAborted`), and ``after_model``
raises it again should an outer wrapper have swallowed it anyway.

The abort is checked once per model call *as scoutd's* ``wrap_model_call``
*sees it*. LangChain nests the model-call wrappers in ``middleware=[...]``
order, the first outermost: a wrapper listed after scoutd's runs inside it,
and the further attempts it makes of one call (``ModelRetryMiddleware``'s
retries, ``ModelFallbackMiddleware``'s other models) reach the model without
passing scoutd again, even after an abort appeared during the first. So
scoutd's middleware goes last whenever a retry or fallback middleware is
present; it logs a warning, once, when it finds one of those inside it.

Recall (docs/STRATEGIES.md, "Recall") is on by default: shortened outputs
carry their handles, and the middleware registers the ``recall`` tool with the
agent (``tools``), answered from the run's scoutd session (in this process or
by the daemon), never by the provider.

Needs the extra ``scoutd[langchain]``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any, NotRequired, Unpack, cast

import anyio.to_thread

from ..errors import Aborted
from ..formats import OPENAI_CHAT
from ..recall import RECALL_DESCRIPTION, RECALL_TOOL_NAME, arguments_of, recall_parameters
from ._run import ClosedByWith, HookClosed, HookOptions, RunPreparer, missing_extra
from ._run_engines import recalled

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelFallbackMiddleware,
        ModelRequest,
        ModelRetryMiddleware,
    )
    from langchain.agents.middleware.types import ModelCallResult, ModelResponse, PrivateStateAttr
    from langchain_core.exceptions import ModelError
    from langchain_core.messages import AnyMessage, ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.channels.untracked_value import UntrackedValue
    from langgraph.prebuilt import ToolRuntime
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command

    from ._langchain_messages import from_chat, to_chat
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise missing_extra(__name__, "langchain", exc) from None

__all__ = ["ModelCallAborted", "ScoutdMiddleware"]

log = logging.getLogger(__name__)

# LangChain's model-call wrappers that call the model more than once in one call of
# theirs: listed after scoutd's middleware, their further attempts skip its check.
_RETRYING: tuple[type[AgentMiddleware[Any, Any, Any]], ...] = (
    ModelRetryMiddleware,
    ModelFallbackMiddleware,
)
# The recall tool's answer when the run's session was ended by an exception that an
# outer middleware caught (a tool's, with a tool retry middleware): the run goes on.
_SESSION_ENDED = (
    "recall is not available now: this run's scoutd session ended after an error; "
    "call recall again after the next model call"
)
# The most handlers read on the way down a composed chain: a bound, however it is built.
_MAX_HANDLERS = 1_000


def _wrappers_inside(handler: Callable[..., Any]) -> list[AgentMiddleware[Any, Any, Any]]:
    """The middleware whose model-call wrappers ``handler`` runs: those inside the one
    that was handed ``handler`` (listed after it in ``middleware=[...]``).

    LangChain composes the wrappers, the first listed outermost
    (``_chain_model_call_handlers`` and its async twin in ``langchain.agents.factory``):
    each gets a ``handler`` that closes over the rest, ``inner`` (and, for a
    pair, ``outer``), down to each middleware's traced ``wrap_model_call``
    (``__wrapped__``: the method bound to the middleware). That shape is
    LangChain's, not an API: a handler of another shape gives what could be
    read of it, perhaps nothing, never an error.
    """
    found: list[AgentMiddleware[Any, Any, Any]] = []
    pending: list[object] = [handler]
    seen: set[int] = set()
    while pending and len(seen) < _MAX_HANDLERS:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        owner = getattr(getattr(item, "__wrapped__", item), "__self__", None)
        if isinstance(owner, AgentMiddleware):
            found.append(owner)
            continue
        code = getattr(item, "__code__", None)
        names = getattr(code, "co_freevars", ())
        for name, cell in zip(names, getattr(item, "__closure__", None) or (), strict=False):
            if name in ("inner", "outer"):
                try:
                    pending.append(cell.cell_contents)
                except ValueError:  # a cell not filled yet
                    continue
    return found


class _RecallTool(StructuredTool):
    """The recall tool: whatever object the model sends reaches the function whole, as
    ``given``, beside the ``runtime`` the tool node injects.

    LangChain checks no dict schema and calls the function with ``**`` the model's
    keys: a key the function does not take (``{"extra": 1}``), or ``self``, which
    LangChain's own ``_run`` takes, ended the run with a ``TypeError``.
    """

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        runtime = kwargs.pop("runtime", None)  # LangChain refuses a text input before this
        return args, {"given": kwargs, "runtime": runtime}


class ModelCallAborted(Aborted, ModelError):
    """:class:`scoutd.Aborted` raised inside a model call, marked not worth retrying.

    LangChain's retry middleware (``ModelRetryMiddleware`` with its default
    ``retry_on``) lets a model error that is not retryable through at once,
    without turning it into a message.
    """

    is_retryable = False


class _Run:
    """One run's scoutd session: its preparer, opened at the run's first round.

    A run can end without ``after_agent``: an exception (of the model, a tool,
    scoutd), an abort, a cancellation, an interrupt. LangChain has no hook for
    that, so each of the middleware's hooks that sees an exception leave it
    ends the session (:meth:`end`) at once, rather than at garbage collection.
    Should the run go on all the same (an outer retry middleware caught the
    exception), its next round opens a fresh session over the whole history.
    A run that ends where none of its hooks runs (the recursion limit, a stream
    left unfinished, another middleware's exception) is ended by the
    middleware's ``close()``: ``new`` and ``ended`` keep its list of open runs.
    """

    def __init__(self, new: Callable[[_Run], RunPreparer], ended: Callable[[_Run], None]) -> None:
        self._new = new
        self._ended = ended
        self._lock = threading.Lock()
        self._preparer: RunPreparer | None = None

    def preparer(self) -> RunPreparer:
        """The open preparer of the run, a new one after :meth:`end`."""
        with self._lock:
            if self._preparer is None:
                self._preparer = self._new(self)
            return self._preparer

    def current(self) -> RunPreparer | None:
        """The open preparer of the run, if any (never a new one)."""
        with self._lock:
            return self._preparer

    def end(self) -> None:
        """End the run's scoutd session (idempotent)."""
        with self._lock:  # under it: a reopen now is listed again after this
            preparer, self._preparer = self._preparer, None
            self._ended(self)
        if preparer is not None:
            preparer.close()


class ScoutdState(AgentState[Any]):
    """The agent's state with the run's scoutd session: each run (``invoke``) its own,
    so concurrent runs of one agent never share a session, a conversation or handles.
    Private (neither input nor output) and untracked (never checkpointed)."""

    scoutd_run: NotRequired[Annotated[_Run, UntrackedValue, PrivateStateAttr]]


def _run_of(state: Any) -> _Run | None:
    """The run's session held in ``state``, if any."""
    found = state.get("scoutd_run") if isinstance(state, Mapping) else None
    return found if isinstance(found, _Run) else None


class ScoutdMiddleware(AgentMiddleware[ScoutdState, Any, Any], ClosedByWith):
    """LangChain agent middleware that prepares each model call's messages with scoutd.

    The keyword arguments are those of
    :class:`~scoutd.integrations._run.RunPreparer`: ``save_file`` (the chat
    whose inbox is read), ``socket`` (the daemon's socket path, or ``True`` for
    the default; ``None`` prepares in this process), ``strategies``, ``config``
    (``[prompt]`` overrides for every call), ``timeout`` and ``recall``
    (default True: the middleware registers the recall tool; ``recall=False``
    registers none and leaves the prompts without handles). One middleware
    serves one chat; each run gets a fresh session, its own even when runs of the
    agent overlap (``abatch``, concurrent ``ainvoke``): it lives in the run's state.
    A run's session ends with the run, also when it raises (an error, an abort, a
    cancellation); :meth:`close` (or ``with``) ends those of runs that ended where
    no hook of the middleware runs (see :meth:`close`).
    """

    state_schema = ScoutdState

    def __init__(self, **options: Unpack[HookOptions]) -> None:
        super().__init__()
        options.setdefault("recall", True)
        self._options = options
        self._lock = threading.Lock()
        self._aborted: str | None = None  # once any run saw the chat's abort
        self.preparer = self._new_preparer()  # the latest run's (its ``.last``, ``.aborted``)
        self._open: set[_Run] = set()  # runs whose session is open: close() ends them
        self._order_checked = False
        self.tools: list[BaseTool] = []
        if options["recall"]:
            self.tools.append(
                _RecallTool.from_function(
                    func=self._recall,
                    coroutine=self._arecall,
                    name=RECALL_TOOL_NAME,
                    description=RECALL_DESCRIPTION,
                    args_schema=recall_parameters(),
                )
            )

    def _recall(self, given: Any = None, runtime: ToolRuntime | None = None) -> str:
        """The recall tool: ``given``, the model's arguments, answered from the session of
        the run that called it (its state, which the agent's tool node injects as
        ``runtime``). A call that carries no run of this middleware (the tool given to
        an agent without it, or called directly) holds no conversation: it gets the answer
        of a session that holds none, never one from the latest run's session, which is
        another conversation's (a run at once, an outer agent's).
        """
        arguments = arguments_of({} if given is None else given)
        if isinstance(arguments, str):
            return arguments
        run = _run_of(getattr(runtime, "state", None))
        if run is None:
            return recalled(None, *arguments)
        preparer = run.current()
        try:
            if preparer is None:
                raise HookClosed
            return preparer.recall(*arguments)
        except HookClosed:  # a new session would answer from an empty conversation
            return _SESSION_ENDED

    async def _arecall(self, given: Any = None, runtime: ToolRuntime | None = None) -> str:
        """:meth:`_recall` for the async agent loop (in a thread: it may ask the daemon)."""
        return await anyio.to_thread.run_sync(self._recall, given, runtime)

    def _new_preparer(self) -> RunPreparer:
        """A run's new preparer, which :attr:`preparer` then shows."""
        preparer = RunPreparer(format=OPENAI_CHAT, **self._options)
        with self._lock:
            self.preparer = preparer
        return preparer

    def _run_opened(self, run: _Run) -> RunPreparer:
        """A new preparer for ``run``, which is now open."""
        preparer = self._new_preparer()
        with self._lock:
            self._open.add(run)
        return preparer

    def _run_ended(self, run: _Run) -> None:
        with self._lock:
            self._open.discard(run)

    def _new_run(self) -> _Run:
        return _Run(self._run_opened, self._run_ended)

    def close(self) -> None:
        """End the scoutd session of every run of this middleware still open.

        A run ends its session itself, when it finishes or raises through one of
        the middleware's hooks; one that ends elsewhere (``GraphRecursionError``,
        a ``stream`` or ``astream`` left before its end, an exception or an
        interrupt of another middleware's hook) leaves it to this, or to garbage
        collection. A run still going on opens a fresh session at its next model
        call; the middleware serves later runs as before.
        """
        with self._lock:
            runs, self._open = list(self._open), set()
            latest = self.preparer
        for run in runs:
            run.end()
        latest.close()

    def _remember(self, preparer: RunPreparer | None) -> str | None:
        """The abort any run of this middleware saw, ``preparer``'s included."""
        with self._lock:
            if preparer is not None and preparer.aborted is not None:
                self._aborted = self._aborted or preparer.aborted
            return self._aborted

    def _raise_if_aborted(self, preparer: RunPreparer | None = None) -> None:
        """Raise the abort any run of this middleware saw (``preparer``'s included)."""
        reason = self._remember(preparer)
        if reason is not None:
            raise Aborted(reason)

    def _checked(self, preparer: RunPreparer) -> None:
        """``preparer.check()``, an abort it raises remembered for every run."""
        self._raise_if_aborted()
        try:
            preparer.check()
        finally:
            self._raise_if_aborted(preparer)

    def before_agent(self, state: ScoutdState, runtime: Runtime[Any]) -> dict[str, Any]:
        """A run starts: a fresh scoutd session, in the run's state.

        Raises:
            Aborted: an earlier run of this middleware was aborted: it stays so.
        """
        if self._remember(self.preparer) is not None:
            self.preparer.close()  # its daemon session ends; the abort stays
            self._raise_if_aborted()
        return {"scoutd_run": self._new_run()}

    def before_model(self, state: ScoutdState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Raise :class:`scoutd.Aborted` before the model call if the chat is aborted.

        A run resumed from a checkpoint (its state holds no session) gets a fresh one.
        An exception (the abort too) ends the run's session: the run ends with it.
        """
        run = _run_of(state)
        update = None
        if run is None:
            run = self._new_run()
            update = {"scoutd_run": run}
        try:
            self._checked(run.preparer())
        except BaseException:
            run.end()
            raise
        return update

    async def abefore_model(
        self, state: ScoutdState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`before_model` for the async agent loop (its file reads in a thread)."""
        return await anyio.to_thread.run_sync(self.before_model, state, runtime)

    def after_model(self, state: ScoutdState, runtime: Runtime[Any]) -> None:
        """Raise the abort a model-call wrapper outside this middleware may have swallowed."""
        self._raise_if_aborted()  # every abort a round raised was remembered

    async def aafter_model(self, state: ScoutdState, runtime: Runtime[Any]) -> None:
        """:meth:`after_model` for the async agent loop."""
        self.after_model(state, runtime)

    def after_agent(self, state: ScoutdState, runtime: Runtime[Any]) -> None:
        """The run is over: end its scoutd session."""
        run = _run_of(state)
        if run is not None:
            run.end()

    def prepared_request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """``request`` with the prepared messages (blocking; the async hook uses a thread).

        Raises:
            ModelCallAborted: an operator aborted the run (a :class:`scoutd.Aborted`).
        """
        messages = list(request.messages)
        sent = to_chat(messages)
        run = _run_of(request.state)
        preparer = self.preparer if run is None else run.preparer()
        try:
            self._raise_if_aborted()
            prepared = preparer.prepare(sent).messages
        except Aborted as exc:
            self._remember(preparer)
            raise ModelCallAborted(exc.reason) from None
        # The agent's own message objects, or copies of them: the same union of types.
        chosen = cast("list[AnyMessage]", from_chat(prepared, sent, messages))
        return request.override(messages=chosen)

    def _check_order(self, handler: Callable[..., Any]) -> None:
        """Warn, once, when a retry or fallback middleware runs inside this one: its
        further attempts of a model call would reach the model unchecked."""
        if self._order_checked:
            return
        self._order_checked = True
        for inside in _wrappers_inside(handler):
            if isinstance(inside, _RETRYING):
                log.warning(
                    "scoutd: %s is listed after ScoutdMiddleware in middleware=[...], so it "
                    "runs inside it: its further attempts of a model call reach the model "
                    "without scoutd's abort check; list ScoutdMiddleware last "
                    "(docs/INTEGRATIONS.md, LangChain)",
                    type(inside).__name__,
                )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Call the model with the prepared messages; an exception ends the run's session."""
        self._check_order(handler)
        with _ending(request.state):
            return handler(self.prepared_request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """Call the model with the prepared messages (the async agent loop)."""
        self._check_order(handler)
        with _ending(request.state):
            return await handler(await anyio.to_thread.run_sync(self.prepared_request, request))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool; an exception that leaves it (the tool's, a cancellation, an
        interrupt) ends the run's session."""
        with _ending(request.state):
            return handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """:meth:`wrap_tool_call` for the async agent loop."""
        with _ending(request.state):
            return await handler(request)


@contextmanager
def _ending(state: Any) -> Iterator[None]:
    """End the session of the run ``state`` belongs to when the block raises."""
    try:
        yield
    except BaseException:
        run = _run_of(state)
        if run is not None:
            run.end()
        raise
