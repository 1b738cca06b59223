"""The two engines behind a :class:`~scoutd.integrations._run.RunPreparer`.

:class:`InProcess` runs the library in the agent's process (one incremental
:class:`scoutd.Session` per run); :class:`ThroughDaemon` keeps one daemon
session for the run's chat, on a connection of its own or one shared by many
runs. The preparer picks one, checks the abort before each round, and opens a
new engine when the daemon session was lost (:meth:`Engine.lost`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..client import Client, Session
from ..config import Config, PromptConfig
from ..engine.held import held_bytes
from ..engine.incremental import json_size
from ..engine.prepare import Prepared, prepare, resolve_snapshot
from ..engine.session import Session as InProcessSession
from ..inbox.aborted import check, held
from ..inbox.names import ABORT_NAME, inbox_dir
from ..protocol.recall_args import recall_question
from ..recall import NO_CONVERSATION, find_output

__all__ = ["Engine", "InProcess", "Overrides", "Strategies", "ThroughDaemon", "recalled"]

# How long a hook waits for the daemon's push once it sees a waiting abort itself.
PUSH_WAIT = 5.0
Overrides = Config | PromptConfig | Mapping[str, Any] | None
Strategies = str | Sequence[str] | Callable[[list[Any]], Any] | None
# The last round's conversation and prompt, which a recall without a session reads.
Held = tuple[Sequence[Any], Sequence[Any]]


def recalled(held: Held | None, handle: Any, search: Any) -> str:
    """The recall tool's answer over the last round's conversation and prompt, here;
    before any round, the answer every path gives a session that holds nothing."""
    if held is None:
        question = recall_question(handle, search)
        return question if isinstance(question, str) else NO_CONVERSATION
    messages, shown = held
    return find_output(messages, handle, search, visible=shown).text


class Engine(Protocol):
    """What a run preparer asks of its engine."""

    def check(self) -> str | None:
        """Why the chat is aborted, or None."""

    def prepare(self, messages: Sequence[Any]) -> Prepared: ...

    def recall(self, handle: str | int | None, search: str | None) -> str:
        """The recall tool's answer from the run's conversation."""

    def held_bytes(self) -> int:
        """The memory this process holds for the run's conversation."""

    def lost(self) -> bool:
        """Whether the run's daemon session ended with its connection."""

    def close(self) -> None: ...


class InProcess:
    """The library in this process: one incremental :class:`scoutd.Session` per run.

    A custom strategy function has no incremental engine: it runs over the
    whole conversation on every round.
    """

    def __init__(
        self, save_file: str | None, strategies: Strategies, config: Overrides, format: str
    ) -> None:
        self.save_file = save_file
        self.strategies = strategies
        self.config = config
        self.format = format
        self.session: InProcessSession | None = None
        if not callable(strategies):
            self.session = InProcessSession(
                save_file, strategies=strategies, config=config, format=format
            )
        snapshot = self.session.config if self.session is not None else resolve_snapshot(config)
        self.max_bytes = snapshot.prompt.inbox_max_bytes
        self.held: tuple[Sequence[Any], Sequence[Any]] | None = (
            None  # for recall, without a session
        )

    def check(self) -> str | None:
        """The chat's marker, else a waiting abort: consumed now and the chat marked, or,
        when it cannot be taken or marked, left in place and aborting all the same."""
        return check(self.save_file, max_bytes=self.max_bytes)

    def prepare(self, messages: Sequence[Any]) -> Prepared:
        if self.session is not None:
            return self.session.prepare(messages)
        prepared = prepare(
            messages,
            self.strategies,
            save_file=self.save_file,
            config=self.config,
            format=self.format,
        )
        self.held = list(messages), prepared.messages
        return prepared

    def recall(self, handle: str | int | None, search: str | None) -> str:
        if self.session is not None:
            return self.session.recall(handle, search)
        return recalled(self.held, handle, search)

    def lost(self) -> bool:
        return False

    def held_bytes(self) -> int:
        if self.session is not None:
            return self.session.held_bytes()
        conversation = self.held[0] if self.held is not None else ()
        return held_bytes(conversation, json_size(conversation))

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


class ThroughDaemon:
    """A daemon session for the run's save file: each round sends only what is new."""

    def __init__(
        self,
        client: Client,
        owned: bool,
        save_file: str | None,
        strategies: str | Sequence[str] | None,
        config: Overrides,
        format: str,
    ) -> None:
        self.strategies = strategies
        self.config = config
        self.format = format
        self.client = client
        self.owned = owned  # closed with the run; else shared by many runs, left open
        self.save_file = save_file
        self.session: Session | None = None
        self.held: tuple[Sequence[Any], Sequence[Any]] | None = (
            None  # for recall, without a session
        )
        if save_file is not None:
            try:
                self.session = self.client.open_session(save_file, format=format)
            except BaseException:
                if owned:
                    self.client.close()
                raise

    def check(self) -> str | None:
        """The session's abort: pushed by the daemon, at ``session.open`` for a marked chat.

        An abort that exists always aborts, even before its push arrives: a
        marker this process can read, or an ``abort`` entry still waiting
        (then the push is awaited a moment for its reason; the daemon consumes it).
        """
        if self.session is None or self.save_file is None:
            return None
        reason = self.session.reason or held(self.save_file)
        if reason is not None:
            return reason
        waiting = os.path.join(inbox_dir(self.save_file), ABORT_NAME)
        if not os.path.lexists(waiting):
            return None
        if self.session.wait_aborted(PUSH_WAIT) and self.session.reason is not None:
            return self.session.reason
        return f"aborted by operator (an abort is waiting: {waiting})"

    def prepare(self, messages: Sequence[Any]) -> Prepared:
        if self.session is None:  # no chat, no inbox: a plain call each round
            prepared = self.client.prepare(
                messages, self.strategies, config=self.config, format=self.format
            )
            self.held = list(messages), prepared.messages
            return prepared
        return self.session.prepare(messages, self.strategies, config=self.config)

    def recall(self, handle: str | int | None, search: str | None) -> str:
        """Answered by the daemon from the session's conversation; without a session
        (no save file), here from the last round's.

        The client answers what needs no conversation as the library does and asks
        the daemon only what the wire carries, so what a model sends gets a text,
        never an exception.
        """
        if self.session is None:
            return recalled(self.held, handle, search)
        return self.session.recall(handle, search)

    def lost(self) -> bool:
        return self.session is not None and self.session.lost

    def held_bytes(self) -> int:
        """Nothing counted: the daemon holds the conversation and bounds it (``[daemon]
        max_session_bytes`` and its siblings); this process keeps the last prompt only."""
        return 0

    def close(self) -> None:
        try:
            if self.session is not None:
                self.session.close()
        finally:
            if self.owned:
                self.client.close()
