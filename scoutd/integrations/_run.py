"""The engine behind the framework hooks: one scoutd session per agent run.

:class:`RunPreparer` prepares the prompt of one run before each model call,
in process or through the daemon (docs/INTEGRATIONS.md). It is synchronous and
thread-safe; the async hooks run it in a worker thread, so there is one code
path for both.

An aborted chat stays aborted (docs/RELIABILITY.md): before every round,
whatever the strategies, :meth:`RunPreparer.check` asks whether the chat is
aborted (its durable marker, :mod:`scoutd.inbox.aborted`, or a waiting
``abort``, consumed then; through the daemon, the session's abort, which the
daemon sets at ``session.open`` for a chat so marked). Once a round raised
:class:`~scoutd.Aborted`, every later round raises it again with the same
reason, so a run that catches it and carries on still never reaches the
model, and a new preparer for the same chat is aborted by the marker until
an operator clears it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any, NoReturn, Self, TypedDict

import msgspec

from ..client import Client, default_socket_path
from ..config import Config, PromptConfig
from ..engine.prepare import Prepared
from ..errors import Aborted, DaemonUnavailable
from ..formats import check_format_name
from ..recall import arguments_problem
from ._run_engines import Engine, InProcess, Overrides, Strategies, ThroughDaemon, recalled

__all__ = [
    "ClosedByWith",
    "HookClosed",
    "HookOptions",
    "Overrides",
    "RunPreparer",
    "Strategies",
    "missing_extra",
    "round_summary",
    "with_recall",
]

log = logging.getLogger("scoutd.integrations")


class HookClosed(RuntimeError):
    """A round asked of a :class:`RunPreparer` after :meth:`~RunPreparer.close`."""


# The recall tool's answer while the run's daemon session is gone with its connection.
RECALL_LOST = (
    "recall is not available now: the scoutd daemon restarted; call recall again after"
    " the next model call"
)


def round_summary(received: int, prepared: Prepared) -> str:
    """One line about a round, for the debug log: what the model gets instead of what it had."""
    notice = any(r.notice for r in prepared.report)
    delivered = sum(r.inbox_delivered for r in prepared.report)
    return (
        f"prepared {received} messages into {len(prepared.messages)} ({prepared.format}; "
        f"compaction notice: {'yes' if notice else 'no'}; inbox notices: {delivered}; "
        f"stable prefix: {prepared.stable_prefix})"
    )


def missing_extra(module: str, extra: str, exc: ImportError) -> ImportError:
    """The one-line error of an integration whose framework is not installed."""
    return ImportError(
        f"{module} needs the optional dependencies of scoutd[{extra}] "
        f"(missing: {exc.name or exc}); install them with: pip install 'scoutd[{extra}]'"
    )


def with_recall(config: Overrides) -> Overrides:
    """``config`` with ``[prompt] recall`` on, unless a mapping sets it itself."""
    if config is None:
        return {"recall": True}
    if isinstance(config, Config):
        return msgspec.structs.replace(config, prompt=with_recall(config.prompt))
    if isinstance(config, PromptConfig):
        return msgspec.structs.replace(config, recall=True)
    return {"recall": True, **config}


class HookOptions(TypedDict, total=False):
    """The keyword arguments every framework hook takes (see :class:`RunPreparer`)."""

    save_file: str | os.PathLike[str] | None
    socket: str | os.PathLike[str] | bool | None
    strategies: Strategies
    config: Overrides
    timeout: float | None
    recall: bool


class ClosedByWith:
    """``with`` support for an object with a ``close()``: the block's end closes it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class RunPreparer(ClosedByWith):
    """Prepares the prompt of one agent run before each model call.

    Args:
        save_file: the chat's save file; its inbox (notices, ``abort``) beside
            it is read before every round (docs/OPERATIONS.md). ``None``: no inbox.
        socket: the daemon's socket path, or ``True`` for the default one
            (``$SCOUTD_SOCKET``, else the configured ``[daemon] socket_path``);
            ``None`` (the default) prepares in this process.
        strategies: strategy names (a callable too, in process only); ``None``
            uses the configured ones.
        config: ``[prompt]`` overrides applied to every round.
        format: the message format of the conversation (docs/FORMATS.md).
        timeout: seconds allowed for each daemon answer.
        recall: turn ``[prompt] recall`` on (shortened outputs carry their
            handles) for a run whose model has the recall tool, answered by
            :meth:`recall` (docs/STRATEGIES.md, "Recall").
        client: a daemon client shared by many runs (instead of ``socket``):
            their sessions share its connection, which :meth:`close` leaves open.

    The daemon session opens at the first round, so building a hook costs
    nothing until the run starts; :meth:`close` ends it (the daemon also ends it
    when this process goes away).
    """

    def __init__(
        self,
        *,
        save_file: str | os.PathLike[str] | None = None,
        socket: str | os.PathLike[str] | bool | None = None,
        strategies: Strategies = None,
        config: Overrides = None,
        format: str = "auto",
        timeout: float | None = 60.0,
        recall: bool = False,
        client: Client | None = None,
    ) -> None:
        self.save_file = None if save_file is None else os.fspath(save_file)
        self.format = check_format_name(format)
        if socket is True:
            socket = default_socket_path()
        self.socket_path = None if socket is None or socket is False else os.fspath(socket)
        self._client = client
        if client is not None:
            self.socket_path = client.socket_path
        if self.socket_path is not None and callable(strategies):
            raise TypeError("a strategy callable cannot run in the daemon: pass strategy names")
        self.strategies = strategies
        self.config = with_recall(config) if recall else config
        self.timeout = timeout
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._aborted: str | None = None
        self._closed = False
        self.last: Prepared | None = None  # the latest round, with its report

    @property
    def aborted(self) -> str | None:
        """The abort reason once the run was aborted, else ``None``."""
        return self._aborted

    def check(self) -> None:
        """Raise :class:`~scoutd.Aborted` if the chat is aborted; the hooks ask before each
        model call, whatever the strategies.

        Raises:
            Aborted: an operator aborted the chat (now, at an earlier round, or
                in an earlier run not cleared since).
        """
        with self._lock:
            self._checked()

    def _checked(self) -> Engine:
        """The engine, once the chat is known not to be aborted (called under the lock)."""
        if self._aborted is not None:
            raise Aborted(self._aborted)
        if self._closed:
            raise HookClosed("this scoutd hook was closed: make a new one for a new run")
        engine = self._open()
        if engine.lost():
            return self._reopened(engine)  # checked there
        reason = engine.check()
        if reason is not None:
            self._abort(reason)
        return engine

    def _reopened(self, lost: Engine) -> Engine:
        """A new daemon session for the run, its last one having ended with its
        connection (a daemon restarted): the run goes on, its whole conversation
        sent again. An abort still holds: the chat's marker aborts the new session
        at its open, and an abort dropped meanwhile is claimed then (under the lock)."""
        log.info("the run's scoutd session ended with its connection: opening a new one")
        self._engine = None
        lost.close()
        engine = self._open()
        reason = engine.check()
        if reason is not None:
            self._abort(reason)
        return engine

    def _abort(self, reason: str) -> NoReturn:
        """Remember the abort for every later round, log it and raise it."""
        self._aborted = reason
        log.warning("run aborted before the model call: %r", reason)
        raise Aborted(reason)

    def prepare(self, messages: Sequence[Any]) -> Prepared:
        """The prepared prompt for the run's whole conversation so far.

        Raises:
            Aborted: an operator aborted the chat (see :meth:`check`).
        """
        with self._lock:
            engine = self._checked()
            try:
                try:
                    prepared = engine.prepare(messages)
                except DaemonUnavailable:
                    if not engine.lost():
                        raise
                    prepared = self._reopened(engine).prepare(messages)  # lost during it
            except Aborted as exc:
                self._abort(exc.reason)
            self.last = prepared
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s", round_summary(len(messages), prepared))
            return prepared

    def recall(self, handle: str | int | None = None, search: str | None = None) -> str:
        """The recall tool's answer (docs/STRATEGIES.md, "Recall") from this run's
        conversation, as of its last round: in process, or by the daemon's session.
        A handle or search that finds nothing gets a tool-error text, never an exception.

        Raises:
            HookClosed: the preparer was closed.
        """
        with self._lock:
            if self._closed:
                raise HookClosed("this scoutd hook was closed: make a new one for a new run")
            problem = arguments_problem(handle, search)  # before any daemon sees them
            if problem is not None:
                return problem
            if self._engine is None:
                return recalled(None, handle, search)
            try:
                return self._engine.recall(handle, search)
            except DaemonUnavailable:
                if not self._engine.lost():
                    raise
                return RECALL_LOST  # the next round opens a new session, with the outputs

    def held_bytes(self) -> int:
        """The memory this process holds for the run's conversation
        (:func:`~scoutd.engine.held.held_bytes`): what a caller keeping many runs
        bounds (the LiteLLM proxy); 0 before the first round, after :meth:`close`,
        and through the daemon, which holds the conversation and bounds it itself.
        """
        with self._lock:
            return 0 if self._engine is None else self._engine.held_bytes()

    def _open(self) -> Engine:
        if self._engine is None:
            if self.socket_path is None:
                self._engine = InProcess(self.save_file, self.strategies, self.config, self.format)
            else:
                assert not callable(self.strategies)
                shared = self._client
                client = (
                    Client(self.socket_path, timeout=self.timeout) if shared is None else shared
                )
                self._engine = ThroughDaemon(
                    client,
                    shared is None,
                    None if self.save_file is None else os.path.abspath(self.save_file),
                    self.strategies,
                    self.config,
                    self.format,
                )
        return self._engine

    def close(self) -> None:
        """End the run's scoutd session (idempotent)."""
        with self._lock:
            self._closed = True
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
