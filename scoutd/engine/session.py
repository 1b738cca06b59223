"""In-process incremental sessions: the daemon's session engine inside the agent.

An agent that calls scoutd in its own process prepares its prompt before every
inference with a conversation that only grows. :class:`Session` keeps what
the previous round computed (the tool index, the epoch schedule and the
rewrites, see :mod:`scoutd.engine.incremental`) so that a round costs in proportion
to what is new, and answers exactly what :func:`scoutd.prepare` answers for
the same conversation (docs/PERFORMANCE.md, in-process sessions).

Messages are values: a message the session has seen must not be changed in
place. Replacing one (a new object that is not equal to the old one, or an
SDK's object that sends other JSON) is noticed, and the round is then computed
from scratch.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import is_not
from types import TracebackType
from typing import Any

from ..config import Config, PromptConfig
from ..errors import Aborted, InvalidMessages, SessionClosed
from ..formats import AUTO, check_format_name
from ..protocol.recall_args import NO_CONVERSATION, recall_question
from ..protocol.sdk_objects import sent_forms
from ..recall import find_output
from .held import held_bytes
from .incremental import SessionPrompt, json_size
from .message_rules import check_messages, message_problem, too_deep
from .prepare import Prepared, resolve_snapshot

__all__ = ["Session", "SessionClosed"]


class Session:
    """An in-process session over one growing conversation.

    ``save_file`` names the conversation's save file: the ``inbox`` strategy
    delivers the notices and aborts of its inbox. ``strategies``, ``config``,
    ``format`` and ``cache_control`` mean what they mean for
    :func:`scoutd.prepare`; ``config`` is resolved once, when the session
    opens (a configuration file changed later is not read again).

    ``aborted`` and ``reason`` are set when a round meets an ``abort`` file;
    every later round raises :class:`~scoutd.Aborted` again (an abort is never
    forgotten).

    One round at a time: threads that share a session take turns (a lock), as
    the client sessions' calls queue. A round is CPU work plus the inbox's
    small file reads, so an asyncio agent runs it in a worker thread
    (``anyio.to_thread.run_sync(session.prepare_prompt, messages)``).
    """

    def __init__(
        self,
        save_file: str | None = None,
        *,
        strategies: str | Sequence[str] | None = None,
        config: Config | PromptConfig | Mapping[str, Any] | None = None,
        format: str = AUTO,
        cache_control: bool | None = None,
    ) -> None:
        check_format_name(format)
        self.save_file = save_file
        self.strategies = strategies
        self.config = resolve_snapshot(config)
        self.format = format
        self.cache_control = cache_control
        self.aborted = False
        self.reason: str | None = None
        self.closed = False
        self._state = SessionPrompt(format=format)
        # the last prompt prepared, which recall's search skips (not mutated: recall
        # reads it only once a round has set it)
        self._shown: list[Any] = []  # pragma: no mutate
        # held_bytes(): how many leading messages of the conversation it counted, and their count
        self._counted = (0, 0)
        # The caller's messages when they held an SDK's objects (held converted,
        # .protocol.sdk_objects): what the next round's are compared with. None: the
        # held messages are the caller's own (not mutated: an empty value of another type
        # held there answers alike).
        self._given: list[Any] | None = None  # pragma: no mutate
        # Rounds, recalls and close take turns: two rounds at once would interleave
        # their changes to the held conversation and answer wrong prompts.
        self._lock = threading.Lock()

    def prepare_prompt(self, messages: Sequence[Any]) -> list[Any]:
        """The prepared prompt of the whole conversation ``messages``: the list to send.

        What :func:`scoutd.prepare_prompt` returns, and the client sessions'
        ``prepare_prompt`` too: every ``prepare_prompt`` gives the message list,
        every ``prepare`` the :class:`~scoutd.Prepared` with its report
        (:meth:`prepare`).

        Raises:
            Aborted: this round, or an earlier one, met an ``abort`` file.
            SessionClosed: the session was closed.
            InvalidMessages: a message breaks the rule of docs/PROTOCOL.md
                ("Messages"); the session keeps what it held.
        """
        return self.prepare(messages).messages

    def prepare(self, messages: Sequence[Any]) -> Prepared:
        """:meth:`prepare_prompt` plus what each strategy did (``.report``).

        Pass the whole, growing conversation every round: what was seen before
        is recognised (by identity, else by equality) and only what is new is
        indexed. Equal to :func:`scoutd.prepare` with the session's arguments.

        A round that raises leaves the session's conversation as it was before
        it, as a daemon session's failed call does: a :meth:`recall` then answers
        from the conversation of the last round that succeeded.

        Raises:
            Aborted: this round, or an earlier one, met an ``abort`` file.
            SessionClosed: the session was closed.
            InvalidMessages: a message breaks the rule of docs/PROTOCOL.md
                ("Messages"), or is nested deeper than the interpreter walks.
        """
        with self._lock:
            return self._prepare(messages)

    def _prepare(self, messages: Sequence[Any]) -> Prepared:
        if self.closed:
            raise SessionClosed("the session is closed")
        if self.aborted:
            raise Aborted(self.reason or "aborted")
        held = len(self._state.messages)
        try:
            state, given = self._absorb(messages)
            prepared, _ = state.prepare(
                self.strategies,
                self.config,
                save_file=self.save_file,
                cache_control=self.cache_control,
            )
        except Aborted as exc:
            self._roll_back(held)
            self.aborted, self.reason = True, exc.reason
            raise
        except RecursionError:
            self._roll_back(held)
            raise too_deep() from None
        except BaseException:
            self._roll_back(held)
            raise
        if state is not self._state:  # a new conversation replaces the old one
            self._state, self._counted = state, (0, 0)
        self._given = given
        self._shown = prepared.messages
        return prepared

    def _roll_back(self, held: int) -> None:
        """Leave the conversation as the failed round found it: its first ``held``
        messages, as the daemon does with a session call that fails (docs/PROTOCOL.md),
        so that a ``recall`` before the next round answers the same in both.

        The index is rebuilt from them (what a failed round pays). Should even that
        fail, the session forgets its conversation and the next round starts over;
        the round's own error is the one raised.
        """
        try:
            self._state.truncate(held)
        except BaseException as exc:
            self._state = SessionPrompt(format=self.format)
            self._counted, self._given = (0, 0), None
            if not isinstance(exc, Exception):
                raise  # an interrupt is the caller's own

    def recall(self, handle: str | int | None = None, search: str | None = None) -> str:
        """The recall tool's answer from this session's conversation (docs/STRATEGIES.md,
        "Recall"): output ``handle`` (``"#37"``), else the newest one not shown whole
        in the last prompt that contains ``search``, exactly as the conversation holds
        it. An unknown or malformed handle, or a search without a match, gets a
        tool-error text, not an exception. Only this session's conversation is read.

        The same text as the daemon's ``session.recall``: arguments that need no
        conversation are answered first, then a session that holds none (no round
        has succeeded yet) says so.

        Raises:
            SessionClosed: the session was closed.
        """
        with self._lock:
            if self.closed:
                raise SessionClosed("the session is closed")
            question = recall_question(handle, search)
            if isinstance(question, str):
                return question
            if not self._state.messages:
                return NO_CONVERSATION
            return find_output(
                self._state.messages, handle, search, format=self.format, visible=self._shown
            ).text

    def held_bytes(self) -> int:
        """The memory the held conversation takes, as the daemon counts its sessions'
        (:func:`~scoutd.engine.held.held_bytes`): for a caller that bounds many sessions
        by memory (the LiteLLM proxy's chats).

        Counted when asked, each message once while the conversation only grows:
        a round that asks pays for what is new, a session never asked pays nothing.
        """
        with self._lock:
            messages = self._state.messages
            length, held = self._counted
            new = messages[length:]
            if new:
                held += held_bytes(new, json_size(new))
            self._counted = (len(messages), held)
            return held

    def _absorb(self, messages: Sequence[Any]) -> tuple[SessionPrompt, list[Any] | None]:
        """The session's conversation brought to ``messages``: the held one extended,
        or a new one (the held one stays until the round succeeds, as in the daemon);
        and the caller's messages, if an SDK's objects among them are held converted."""
        state = self._state
        held = len(state.messages)
        given = state.messages if self._given is None else self._given
        check_messages(messages, start=len(messages))  # a list at all
        if (
            len(messages) >= held
            and _same_prefix(messages, given)
            and (self._given is None or _same_sent(messages, given, state.messages))
        ):
            new = messages[held:]
            converted = sent_forms(new, held)
            if converted is None:
                # what was held kept the rule (not mutated: checked from 0, the same answer)
                check_messages(messages, start=held)  # pragma: no mutate
            else:
                _check_new(converted, held)
                new = converted
            if new:
                # not mutated (nor below): the size serves the daemon's byte limits only
                state.extend(new, size=0)  # pragma: no mutate
            if self._given is None and converted is None:
                return state, None
            return state, list(messages)
        converted = sent_forms(messages)
        conversation = messages if converted is None else converted
        check_messages(conversation)  # every message is new
        fresh = SessionPrompt(format=self.format)
        fresh.reset(conversation, size=0)  # pragma: no mutate
        # not mutated: plain messages kept as given too would cost only a comparison by
        # identity a round (a model's dropped, which starts every round over, is tested)
        return fresh, None if converted is None else list(messages)  # pragma: no mutate

    def close(self) -> None:
        """Forget the conversation (idempotent); the session prepares nothing more."""
        with self._lock:
            self.closed = True
            # not mutated: nothing reads these again but held_bytes(), which counts
            # the empty conversation as 0 whatever they hold
            self._state = SessionPrompt(format=self.format)  # pragma: no mutate
            self._shown = []  # pragma: no mutate
            self._counted, self._given = (0, 0), None  # pragma: no mutate

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _check_new(converted: list[Any], start: int) -> None:
    """:func:`check_messages` of a round's new messages in their sent form, the
    position of a bad one counted in the whole conversation, as a whole prepare
    names it."""
    problem = message_problem(converted)
    if problem is not None:
        at = problem.position
        # not mutated: ``converted`` is a list, so a problem is always a message's (its
        # position in the whole conversation is tested)
        position = None if at is None else start + at  # pragma: no mutate
        raise InvalidMessages(position, problem.reason)


def _same_sent(messages: Sequence[Any], given: list[Any], held: list[Any]) -> bool:
    """Whether each message the caller replaced by an equal object sends what the held
    one does, where the held one is an SDK's object converted (``held``: the sent forms
    of ``given``).

    A pydantic model's ``==`` ignores which fields were set, and the SDK sends only
    those: two equal objects can send different JSON. Only the replaced messages
    (not the same objects) are converted again, found in C: nothing is done for a
    caller that passes its own list on.
    """
    replaced = compress(count(), map(is_not, messages, given))
    for position in replaced:
        if held[position] is given[position]:
            continue  # held as the caller's own: equal is what the rule asks
        message = messages[position]
        try:
            forms = sent_forms([message])
            # not mutated: a message with no model in it is equal to a model only by
            # an == of its own; read wrongly, the round starts over, to the same answer
            if (message if forms is None else forms[0]) != held[position]:  # pragma: no mutate
                return False
        except RecursionError:
            raise  # refused as too deep, as the round starting over would
        except Exception:  # unreadable, or its comparison fails: the round starts over
            return False  # and refuses it where it stands
    return True


def _same_prefix(messages: Sequence[Any], held: list[Any]) -> bool:
    """Whether ``messages`` starts with ``held`` (identity first, as list equality does).

    Python's ``==``: a message replaced by an equal one of other JSON (``1`` by
    ``true`` or ``1.0``, keys in another order) is taken as unchanged. Telling
    them apart would cost a look at every message every round (it doubled a
    round at 2,000 calls); docs/PROTOCOL.md says so.
    """
    if not held:
        return True
    try:
        head = messages[: len(held)]
        if type(head) is not list:
            head = list(head)
        return bool(head == held)
    except Exception:  # a message whose comparison fails: treat it as changed
        return False
