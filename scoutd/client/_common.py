"""What both clients share and that does no I/O: arguments to params, answers
to results or exceptions, and a session's incremental state."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import msgspec

from ..config import OPERATOR_ONLY, Config, PromptConfig, refuse_operator_keys
from ..delta import DeltaDecoder, DeltaMismatch, PromptDelta
from ..discovery import discover_socket
from ..errors import Aborted, InvalidMessages, RemoteError
from ..paths import display_path
from ..protocol import (
    UNKNOWN_SESSION,
    PreparePromptParams,
    SessionOpenParams,
    SessionRecallParams,
)
from ..protocol.client_state import ClientState, Incoming
from ..protocol.error_table import (
    RemoteSessionClosed,
    about_field,
    about_replace,
    exception_for,
)
from ..protocol.format_names import check_format_name
from ..protocol.layout import LayoutError, rebuild
from ..protocol.recall_args import recall_question
from ..protocol.report import Prepared, StrategyReport
from ..protocol.sdk_objects import sent_forms

__all__ = [
    "MAX_ANSWER_BYTES",
    "DeltaMismatch",
    "LineTooLong",
    "Messages",
    "Overrides",
    "SentConversation",
    "SessionAnswer",
    "WholePrepared",
    "WholePrompt",
    "default_socket_path",
    "open_params",
    "prepare_params",
    "recall_params",
    "refused_indices",
    "result_of",
    "session_closed",
    "unfinished_line",
    "whole_params",
    "wire_path",
]

log = logging.getLogger("scoutd.client")
T = TypeVar("T")
Overrides = Config | PromptConfig | Mapping[str, Any] | None

# The longest line a client reads from the daemon (``max_answer_bytes``): about
# twice the longest answer a daemon with the default limits sends (a session's
# whole prompt, whose JSON is at most half its ``max_session_bytes`` count, with
# notices of at most 8 MiB; a request, and so its prompt, is at most 64 MiB).
# Past it the peer is no daemon (an endless line from an impostor) and the
# connection is given up: without it, the line grew in the agent's memory until
# the timeout, or forever.
MAX_ANSWER_BYTES = 1024 * 1024 * 1024


class Messages(msgspec.Struct):
    """The part of a ``prepare_prompt`` result that ``prepare_prompt`` returns."""

    messages: list[Any]


class WholePrompt(msgspec.Struct):
    """A session-less ``prepare_prompt`` result as ``prepare_prompt`` reads it:
    every prepared message, or their layout over the messages sent."""

    messages: list[Any] | None = None
    layout: list[Any] | None = None

    def prompt(self, sent: Sequence[Any]) -> list[Any]:
        """The prepared prompt; kept messages are the objects of ``sent`` (LayoutError)."""
        if self.layout is not None:
            return rebuild(self.layout, sent)
        if self.messages is None:
            raise LayoutError("the answer carries neither `messages` nor a `layout`")
        return self.messages


class WholePrepared(WholePrompt):
    """:class:`WholePrompt` with the strategies' report, for ``prepare``."""

    report: list[StrategyReport] = msgspec.field(default_factory=list)


def whole_params(
    params: PreparePromptParams, state: ClientState
) -> tuple[PreparePromptParams, list[Any]]:
    """Ask for the indices answer (unless this connection's daemon refused it); the
    messages sent, as a list of the caller's objects that the layout indexes."""
    sent = list(params.messages or ())
    if state.indices_refused:
        return msgspec.structs.replace(params, messages=sent), sent
    return msgspec.structs.replace(params, messages=sent, answer="indices"), sent


def refused_indices(exc: RemoteError, params: PreparePromptParams, state: ClientState) -> bool:
    """Whether ``exc`` refuses ``answer`` (a daemon older than it) while it was asked
    for; the connection then asks for whole answers from now on."""
    if params.answer == "messages" or not about_field(exc, "answer"):
        return False
    state.indices_refused = True
    return True


class SessionAnswer(msgspec.Struct):
    """A session's ``prepare_prompt`` result: the whole prompt, or a delta."""

    report: list[StrategyReport]
    messages: list[Any] | None = None
    keep: int | None = None
    replace: list[tuple[int, Any]] | None = None
    append: list[Any] | None = None
    checksum: int | None = None


def default_socket_path() -> str:
    """The socket used when none is given (docs/OPERATIONS.md, "Finding the daemon")."""
    return discover_socket()


def _overrides(config: Overrides) -> dict[str, Any] | None:
    """Per-call ``[prompt]`` overrides as sent over the wire."""
    if config is None:
        return None
    if isinstance(config, Config):
        config = config.prompt
    if isinstance(config, PromptConfig):
        values: dict[str, Any] = msgspec.to_builtins(config)
        # A key only the operator sets travels only when set, to be refused by name:
        # unset, it leaves the daemon's own value (docs/RELIABILITY.md).
        for key in OPERATOR_ONLY:
            if values.get(key) is None:
                values.pop(key, None)
        refuse_operator_keys(values)
        return values
    if isinstance(config, Mapping):
        refuse_operator_keys(config)  # before sending: an older daemon would run it
        return dict(config)
    raise TypeError(
        f"config must be a mapping of [prompt] overrides or a PromptConfig, "
        f"got {type(config).__name__}"
    )


def wire_path(save_file: str | os.PathLike[str]) -> str:
    """``save_file`` as the protocol carries it, UTF-8 text: a path with bytes that are
    not UTF-8 is refused here with why, rather than failing to encode the request."""
    path = os.fspath(save_file)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"save_file {display_path(path)} is not UTF-8: the daemon's protocol carries"
            " UTF-8 text only (scoutd in process takes any path)"
        ) from None
    return path


def open_params(
    save_file: str | os.PathLike[str], pid: int | None, format: str, label: str | None
) -> SessionOpenParams:
    """The ``session.open`` params; refuses what cannot go over the wire first."""
    return SessionOpenParams(
        save_file=wire_path(save_file),
        pid=pid,
        format=check_format_name(format),  # type: ignore[arg-type]
        label=label,
    )


def prepare_params(
    messages: Sequence[Any],
    strategies: str | Sequence[str] | None,
    save_file: str | os.PathLike[str] | None,
    session: str | None,
    config: Overrides,
    format: str | None = None,
    cache_control: bool | None = None,
) -> PreparePromptParams:
    """The ``prepare_prompt`` params for the library's arguments; refuses what cannot
    go over the wire (a callable strategy) before anything is sent."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes, bytearray)):
        # the library's refusal (engine.message_rules), raised before anything is sent
        raise InvalidMessages(None, f"must be a list of messages, got {type(messages).__name__}")
    if type(messages) is not list and type(messages) is not tuple:
        messages = list(messages)  # any sequence, as the library takes: JSON writes lists
    names: str | list[str] | None = None
    if isinstance(strategies, str):
        names = strategies
    elif strategies is not None:
        if not isinstance(strategies, Sequence) or not all(isinstance(s, str) for s in strategies):
            raise TypeError(
                "strategies must be a comma-separated string or a list of names "
                "(a callable cannot be sent to the daemon)"
            )
        names = list(strategies)
    return PreparePromptParams(
        messages=messages,  # type: ignore[arg-type]  # encoded as is, any sequence of mappings
        strategies=names,
        save_file=None if save_file is None else wire_path(save_file),
        session=session,
        config=_overrides(config),
        format=None if format is None else check_format_name(format),  # type: ignore[arg-type]
        cache_control=cache_control,
    )


def recall_params(
    session: str, handle: Any, search: Any, *, closed: bool
) -> SessionRecallParams | str:
    """The ``session.recall`` params for what a model sent, or the answer itself when
    the arguments need no conversation (:func:`~scoutd.protocol.recall_args.recall_question`).

    Raises:
        RemoteSessionClosed: ``closed``: the client closed the session (as the daemon
            answers for it).
    """
    if closed:
        raise session_closed(session)
    question = recall_question(handle, search)
    if isinstance(question, str):
        return question
    return SessionRecallParams(session=session, handle=question.number, search=question.search)


def session_closed(session: str) -> RemoteSessionClosed:
    """What the daemon answers for a session no longer open: a call of a session the
    client closed gets it without asking."""
    return RemoteSessionClosed(UNKNOWN_SESSION, f"unknown session {session!r}")


class LineTooLong(ValueError):
    """A line from the daemon longer than the client's ``max_answer_bytes``."""


def unfinished_line(held: int, data: bytes, limit: int) -> int:
    """The bytes of the line left unfinished once ``data`` is read after ``held``
    bytes of it, every line of ``data`` counted against ``limit``.

    Raises:
        LineTooLong: a line is longer than ``limit`` bytes (its newline not counted).
    """
    end = data.find(b"\n")
    if end < 0:
        longest = held = held + len(data)
    else:
        longest, start = held + end, end + 1
        if len(data) - start > limit:  # a whole line after the first may pass it too
            while (end := data.find(b"\n", start)) >= 0:
                longest, start = max(longest, end - start), end + 1
        held = len(data) - data.rfind(b"\n") - 1
        longest = max(longest, held)
    if longest > limit:
        raise LineTooLong(f"a line longer than {limit} bytes (max_answer_bytes)")
    return held


def result_of(answer: Incoming, kind: type[T], state: ClientState, params: msgspec.Struct) -> T:
    """The typed result of an answer, or its exception (an abort also marks the session)."""
    if answer.error is not None:
        raise_error(answer, state, params)
    return msgspec.json.decode(answer.result, type=kind)


def raise_error(answer: Incoming, state: ClientState, params: msgspec.Struct) -> NoReturn:
    """Raise the exception of an error answer."""
    assert answer.error is not None
    session: str | None = None
    base = 0  # the messages a session held before an append: its positions start there
    if isinstance(params, PreparePromptParams):
        session, base = params.session, params.base or 0
    exception = exception_for(answer.error, base)
    if isinstance(exception, Aborted) and session is not None:
        state.record_abort(session, exception.reason)
    raise exception


class SentConversation:
    """A session's incremental state: how much of the caller's conversation the
    daemon already has, and the prepared prompt the deltas apply to."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._sent = 0  # conversation messages the daemon holds
        # What was sent, message by message, to notice a conversation that changed:
        # a shallow copy of each dict's top level (other messages as they are).
        self._shapes: list[Any] = []
        # The messages sent that held an SDK's objects: (position, the caller's
        # message, the JSON it sent), to notice one replaced by an equal object
        # that sends other JSON (see ``_unchanged``).
        self._objects: list[tuple[int, Any, Any]] = []
        # Replacing deltas (docs/PROTOCOL.md) unless the daemon predates them.
        self._prompt = DeltaDecoder(replacing=True)
        # Whether the tail last sent lies on messages changed since (see ``check``).
        self.stale = False
        # Whether the next whole call asks for the notices of a discarded answer.
        self._redeliver = False
        # Whether the last request made went out (the daemon runs it, answered or not).
        self._out = False

    def params(
        self,
        messages: Sequence[Any],
        strategies: str | Sequence[str] | None,
        config: Overrides,
        *,
        whole: bool,
    ) -> PreparePromptParams:
        """Only what was appended since the last call, unless ``whole``.

        The tail goes out before the messages under it are compared with those
        sent (:meth:`check`, while the daemon prepares).
        """
        self.stale = False
        self._out = False
        params = prepare_params(messages, strategies, None, self.session_id, config)
        sent = self._sent
        if not whole and 0 < sent <= len(messages):
            return msgspec.structs.replace(
                params,
                messages=None,
                append=list(messages[sent:]),
                base=sent,
                delta=True,
                delta_replace=self._prompt.replacing,
            )
        return msgspec.structs.replace(
            params,
            delta=not whole,
            delta_replace=not whole and self._prompt.replacing,
            redeliver=self._redeliver,
        )

    def check(self, messages: Sequence[Any], params: PreparePromptParams) -> None:
        """Set ``stale`` if the tail of ``params`` went out on top of messages that
        changed since they were sent: its answer is then not theirs (:meth:`discard`).

        Run while the daemon prepares that tail, so that the comparison, the one
        part of a round that grows with the conversation, overlaps its work.
        """
        self._out = True
        if params.append is not None:
            self.stale = not self._unchanged(messages)

    def discard(self, answer: SessionAnswer) -> None:
        """Drop a ``stale`` answer: the next whole call asks for its notices again."""
        self._redeliver = any(report.inbox_delivered for report in answer.report)

    def unused(self) -> None:
        """The answer to the request last made will not be used (it came too late, was
        cancelled, or did not apply): start over, and if the request went out, ask in
        the next whole call for the notices its round took (docs/PROTOCOL.md, "Answers
        not used"); the daemon gives back those of its last round, none if it failed."""
        if self._out:
            self._redeliver = True
        self.forget()

    def refused_redeliver(self, exc: RemoteError) -> bool:
        """Whether ``exc`` refuses ``redeliver`` (a daemon older than it) while it
        was asked for; the call is then made without (those notices are lost)."""
        if not (self._redeliver and about_field(exc, "redeliver")):
            return False
        log.warning(
            "scoutd session %s: the daemon cannot deliver again the notices of an "
            "answer not used (the conversation changed while it was prepared)",
            self.session_id,
        )
        self._redeliver = False
        return True

    def refused_replace(self, exc: RemoteError) -> bool:
        """Whether ``exc`` refuses ``delta_replace`` (a daemon older than it) while
        it was asked for; the session then asks for running deltas from now on."""
        if not (self._prompt.replacing and about_replace(exc)):
            return False
        self._prompt.reset(replacing=False)
        self.forget()
        return True

    def _unchanged(self, messages: Sequence[Any]) -> bool:
        """Whether the first messages still have the top-level values sent.

        O(messages) shallow comparisons, no encoding: a message that was
        replaced by a different one, or whose keys were reassigned in place, is
        noticed (one replaced by an equal message changes nothing the daemon
        holds). One list comparison, in C (the values themselves are compared
        by identity first): a per-message Python loop cost 4 ms a round at
        2,000 calls, more than the rest of the round; ``all(map(operator.eq,
        ...))`` a quarter more than the list comparison.
        """
        head = messages[: len(self._shapes)]
        if type(head) is not list:
            head = list(head)
        if head != self._shapes:
            return False
        # An SDK's object is equal to another that sends other JSON (pydantic's
        # ``==`` ignores which fields were set): a replaced one is compared as sent.
        return all(head[at] is given or _sends(head[at], json) for at, given, json in self._objects)

    def absorb(
        self, answer: SessionAnswer, messages: Sequence[Any], params: PreparePromptParams
    ) -> Prepared:
        """Apply the answer to the held prompt; remember what the daemon now has.

        Raises:
            DeltaMismatch: the delta does not apply to the prompt held here, or the
                answer carries neither a delta nor the prompt (not an empty one).
        """
        if answer.keep is None and answer.messages is None:
            raise DeltaMismatch("the answer carries neither `messages` nor a delta (`keep`)")
        if answer.keep is not None:
            prompt = self._prompt.apply(
                PromptDelta(
                    keep=answer.keep,
                    append=answer.append or [],
                    checksum=answer.checksum or 0,
                    replace=answer.replace,
                )
            )
        else:
            prompt = self._prompt.full(answer.messages or [])
        start = self._sent if params.append is not None else 0
        new = messages[start:]
        forms = sent_forms(new, start)  # read once already as the request was encoded
        del self._shapes[start:]
        self._shapes += map(_shape, new)
        self._objects = [entry for entry in self._objects if entry[0] < start]
        if forms is not None:
            self._objects += (
                (at, message, form)
                for at, (message, form) in enumerate(zip(new, forms, strict=True), start)
                if form is not message
            )
        self._sent = len(messages)
        self._redeliver = False
        return Prepared(messages=prompt, report=answer.report)

    def forget(self) -> None:
        """The daemon's conversation is not the one we believed: start over."""
        self._sent = 0
        self._shapes.clear()
        self._objects.clear()


def _sends(message: Any, json: Any) -> bool:
    """Whether ``message`` (a replacement) sends ``json``; False when it cannot be read
    (the whole call that follows says why)."""
    try:
        forms = sent_forms([message])
        return bool((message if forms is None else forms[0]) == json)
    except Exception:
        return False


def _shape(message: Any) -> Any:
    """A message's top level as sent, to compare with later (see ``_unchanged``)."""
    if type(message) is dict:
        return dict(message)  # values are shared; a key reassigned in place shows
    return message
