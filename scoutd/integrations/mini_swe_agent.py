"""scoutd in front of every model query of a mini-swe-agent run (docs/INTEGRATIONS.md).

One line of the agent's config selects it; it wraps the model the config
would have selected otherwise::

    model:
      model_class: scoutd.integrations.mini_swe_agent.ScoutdModel
      scoutd: {save_file: /srv/agents/run-1.chat}   # optional: notices and aborts

Before each query :class:`ScoutdModel` prepares the agent's messages (OpenAI
Chat messages, without mini-swe-agent's ``extra`` metadata) and hands the
prepared ones to the wrapped model. The agent's own ``messages`` (and so its
saved trajectory) are never touched. An operator's ``abort`` ends the run
before the next query the way mini-swe-agent ends runs: ``DefaultAgent.run``
returns with ``exit_status`` ``"Aborted"`` (the reason is the ``exit``
message's content), and an aborted chat stays aborted (docs/RELIABILITY.md)
until an operator clears it.

Needs the extra ``scoutd[mini-swe-agent]``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Unpack

from ..errors import Aborted
from ..formats import OPENAI_CHAT
from ._run import ClosedByWith, HookOptions, RunPreparer, missing_extra

try:
    from minisweagent.exceptions import InterruptAgentFlow
    from minisweagent.models import get_model_class
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise missing_extra(__name__, "mini-swe-agent", exc) from None

__all__ = ["RunAborted", "ScoutdModel"]

# mini-swe-agent's own keys of a message that never reach a model.
_AGENT_ONLY = frozenset({"extra"})
# Runs whose sessions one model keeps at once (agents sharing it); past it the least
# recently queried idle run's session ends, and its next query opens a new one.
MAX_RUNS = 8


@dataclass(eq=False)
class _Run:
    """One run the model serves: its first message (the very object) and its preparer."""

    head: Any
    preparer: RunPreparer
    busy: int = 0  # its queries between picking the preparer and preparing
    ending: bool = False  # dropped while busy: its session ends when its last round does


class RunAborted(Aborted, InterruptAgentFlow):
    """:class:`scoutd.Aborted` as mini-swe-agent's way to end a run: an ``exit`` message.

    ``DefaultAgent.run`` adds the message and returns its ``extra``:
    ``{"exit_status": "Aborted", "submission": ""}``.
    """

    def __init__(self, reason: str) -> None:
        Exception.__init__(self, reason)
        self.reason = reason
        exit_extra = {"exit_status": "Aborted", "submission": "", "reason": reason}
        self.messages = ({"role": "exit", "content": reason, "extra": exit_extra},)


class ScoutdModel(ClosedByWith):
    """A mini-swe-agent model that prepares the messages with scoutd, then queries another.

    Args:
        scoutd: the hook's options (docs/INTEGRATIONS.md): ``save_file`` (the
            chat whose inbox is read), ``socket`` (the daemon's socket path, or
            ``True`` for the default; none prepares in this process),
            ``strategies``, ``config`` (``[prompt]`` overrides) and ``timeout``.
        wrapped_model_class: the model class to wrap, as mini-swe-agent's
            ``model_class`` names it; empty: the one ``model_name`` selects.
        wrapped: a model object to wrap instead (from Python).
        **config: the wrapped model's own config (``model_name``, ``model_kwargs``, ...).

    Each run of an agent (its messages start again) gets a scoutd session of
    its own, kept from query to query while agents sharing this model query in
    between (at most ``MAX_RUNS`` at once); :meth:`close` ends them (the daemon
    also ends them when the process goes away), and so does an abort.
    """

    def __init__(
        self,
        *,
        scoutd: Mapping[str, Any] | None = None,
        wrapped_model_class: str = "",
        wrapped: Any = None,
        **config: Any,
    ) -> None:
        self.options = _options(scoutd or {})  # a mistyped key fails before any model is built
        if wrapped is None:
            model_class = get_model_class(str(config.get("model_name", "")), wrapped_model_class)
            wrapped = model_class(**config)
        self.wrapped = wrapped
        self._lock = threading.Lock()
        self._runs: list[_Run] = []  # the runs served, least recently queried first
        self._latest: RunPreparer | None = None  # the preparer of the latest query
        self._aborted: str | None = None

    @classmethod
    def wrapping(cls, model: Any, **options: Unpack[HookOptions]) -> ScoutdModel:
        """``model`` behind scoutd, with the hook's options as keyword arguments."""
        return cls(scoutd=dict(options), wrapped=model)

    @property
    def config(self) -> Any:
        """The wrapped model's config (the agent reads it)."""
        return self.wrapped.config

    @config.setter
    def config(self, value: Any) -> None:
        self.wrapped.config = value

    @property
    def preparer(self) -> RunPreparer | None:
        """The preparer of the latest query's run (``.last`` is its round), once it queried."""
        return self._latest

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        """The wrapped model's answer to the prepared messages.

        Raises:
            RunAborted: an operator aborted the chat (now, or in an earlier run).
        """
        sent = [{k: v for k, v in m.items() if k not in _AGENT_ONLY} for m in messages]
        try:
            run = self._for_run(messages)
            try:
                prepared = run.preparer.prepare(sent).messages
            finally:
                self._done(run)
        except Aborted as exc:
            self._end_all(exc.reason)  # every run ends here, and its session with it
            raise RunAborted(exc.reason) from None  # (``.last`` and ``.aborted`` stay readable)
        answer: dict[str, Any] = self.wrapped.query(prepared, **kwargs)
        return answer

    def _for_run(self, messages: list[dict[str, Any]]) -> _Run:
        """The run ``messages`` belong to (by their first message), counted busy until
        :meth:`_done`: a new one when a run starts. A run keeps its session while other
        runs query between its queries (agents sharing this model); past ``MAX_RUNS``
        the least recently queried idle run's session is ended.

        Raises:
            Aborted: a run of this model was aborted.
        """
        with self._lock:
            if self._aborted is not None:
                raise Aborted(self._aborted)
            head = messages[0] if messages else None
            run = next((r for r in self._runs if r.head is head), None)
            if run is None:
                run = _Run(head, RunPreparer(format=OPENAI_CHAT, **self.options))
            else:
                self._runs.remove(run)
            self._runs.append(run)  # the most recently queried last
            run.busy += 1
            self._latest = run.preparer
            idle = [r for r in self._runs if not r.busy]
            ended = idle[: max(0, len(self._runs) - MAX_RUNS)]
            for old in ended:
                self._runs.remove(old)
        for old in ended:
            old.preparer.close()
        return run

    def _done(self, run: _Run) -> None:
        """A round of ``run`` ended: end its session if it was dropped meanwhile and is idle."""
        with self._lock:
            run.busy -= 1
            if run.busy or not run.ending:
                return
            run.ending = False
        run.preparer.close()

    def _end_all(self, reason: str) -> None:
        """An abort: every later query raises it; the runs' sessions end (a run with a
        round in progress when that round ends)."""
        with self._lock:
            self._aborted = self._aborted or reason
            runs, self._runs = self._runs, []
            for run in runs:
                run.ending = run.busy > 0
        for run in runs:
            if not run.ending:
                run.preparer.close()

    def format_message(self, **kwargs: Any) -> dict[str, Any]:
        """The wrapped model's message format."""
        message: dict[str, Any] = self.wrapped.format_message(**kwargs)
        return message

    def format_observation_messages(
        self, message: dict[str, Any], outputs: list[dict[str, Any]], template_vars: Any = None
    ) -> list[dict[str, Any]]:
        """The wrapped model's observation messages."""
        found: list[dict[str, Any]] = self.wrapped.format_observation_messages(
            message, outputs, template_vars
        )
        return found

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """The wrapped model's template variables."""
        found: dict[str, Any] = self.wrapped.get_template_vars(**kwargs)
        return found

    def serialize(self) -> dict[str, Any]:
        """The wrapped model's record, with the scoutd options beside its config."""
        data: dict[str, Any] = self.wrapped.serialize()
        config = data.setdefault("info", {}).setdefault("config", {})
        config["scoutd"] = {k: _plain(v) for k, v in self.options.items()}
        return data

    def __getattr__(self, name: str) -> Any:
        """Anything else (cost counters, ...) is the wrapped model's."""
        if name == "wrapped":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    def close(self) -> None:
        """End the scoutd sessions of the runs served (idempotent)."""
        with self._lock:
            runs, self._runs = self._runs, []
            self._latest = None
        for run in runs:
            run.preparer.close()


def _options(given: Mapping[str, Any]) -> HookOptions:
    """The hook's options from a config: unknown keys refused, ``~`` in ``save_file`` expanded."""
    unknown = sorted(set(given) - set(HookOptions.__annotations__))
    if unknown:
        known = ", ".join(HookOptions.__annotations__)
        raise ValueError(f"unknown scoutd option(s) {', '.join(unknown)} (known: {known})")
    options: HookOptions = HookOptions(**given)  # type: ignore[typeddict-item]
    save_file = options.get("save_file")
    if isinstance(save_file, str):
        options["save_file"] = os.path.expanduser(save_file)
    return options


def _plain(value: Any) -> Any:
    """A JSON-ready copy of an option for the trajectory."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)
