"""Every exception of scoutd, in one module.

The public ones form one tree under :class:`ScoutdError`, each named after the
condition it reports; the old import locations re-export them. The internal
ones (never raised to a caller of the library or of a client) are at the end.
"""

from __future__ import annotations

import errno
import os
from typing import Any

__all__ = [
    "ScoutdError",
    "Aborted",
    "StillAborted",
    "InboxUnusable",
    "AbortNotTaken",
    "ConfigError",
    "UnknownStrategy",
    "RemoteError",
    "DaemonUnavailable",
    "DaemonTimeout",
    "DeltaMismatch",
    "FormatError",
    "AbortNotWritten",
    "InvalidMessages",
    "SessionClosed",
    # internal
    "ProtocolError",
    "Forbidden",
    "StartupError",
    "ActivationError",
]


class ScoutdError(Exception):
    """Base class of every scoutd error."""


class Aborted(ScoutdError):
    """An operator asked the agent to stop (an ``abort`` file in its inbox).

    ``reason`` is the stripped content of the abort file, or a sentence naming the
    consumed file when the content was blank.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InboxUnusable(Aborted):
    """The chat's inbox exists but cannot be opened, searched or listed.

    It may hold an abort that nobody can see, so the chat is not served (fails
    closed) until an operator repairs it: an :class:`Aborted`, whose
    ``reason`` names the inbox (``inbox``) and the ``problem``.
    """

    def __init__(self, inbox: str, problem: str) -> None:
        shown = os.fsencode(inbox).decode("utf-8", "backslashreplace")
        super().__init__(
            f"the inbox {shown!r} exists but cannot be used ({problem}): the chat is not"
            " served until an operator repairs it"
        )
        self.inbox = inbox
        self.problem = problem


class StillAborted(Aborted):
    """The chat was aborted earlier and no operator has cleared it since.

    Raised while the chat's durable abort marker exists
    (:mod:`scoutd.inbox.aborted`): no abort entry was consumed by this call.
    """


class AbortNotTaken(Aborted):
    """An ``abort`` entry waits in the inbox, but this call could not take it.

    It is still being written, or it cannot be examined (a generic reason), or
    no marker could be written for it, as on a full disk (its own reason). It
    aborts all the same (fail closed) and stays in place, for the consumer that
    can take it and as the chat's durable signal: nothing was consumed by this
    call.
    """


# The aborts that consumed no abort file: the chat aborted before, an inbox that
# cannot be used, an entry that could not be taken. Counted apart from consumed ones.
NOT_CONSUMED = (StillAborted, InboxUnusable, AbortNotTaken)


class ConfigError(ScoutdError, ValueError):
    """The configuration (file, environment or overrides) is invalid.

    The message names the offending key and where it came from.
    """


class UnknownStrategy(ScoutdError, ValueError):
    """A strategy name that is neither built in, registered nor installed as a plugin."""

    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(
            f"unknown prompt strategy {name!r}; available: {', '.join(sorted(available))}"
        )
        self.name = name
        self.available = sorted(available)


class RemoteError(ScoutdError):
    """The daemon answered a request with an error that has no more specific class.

    ``code`` is the JSON-RPC error code (see docs/PROTOCOL.md), ``data`` its
    optional structured detail, as sent.
    """

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class DaemonUnavailable(ScoutdError, ConnectionError):
    """The daemon cannot be reached, or the connection to it was lost.

    The message names the socket path. A request in flight when the connection
    was lost may or may not have run.
    """


class DaemonTimeout(ScoutdError, TimeoutError):
    """The daemon did not answer within the client's timeout."""


class DeltaMismatch(ScoutdError):
    """A prompt delta does not apply to the prompt the receiver holds."""


class FormatError(ScoutdError, ValueError):
    """An unknown format name, or a message list that mixes formats."""


class SessionClosed(ScoutdError):
    """An in-process session was closed: it prepares nothing more."""


class InvalidMessages(ScoutdError, TypeError, ValueError):
    """A message list that breaks the rule of docs/PROTOCOL.md ("Messages").

    Both a ``TypeError`` (what a non-list always raised) and a ``ValueError``.
    ``position`` is the first bad message (None: the list itself), ``reason``
    says what is wrong with it.
    """

    def __init__(self, position: int | None, reason: str) -> None:
        where = "messages" if position is None else f"message {position}"
        super().__init__(f"invalid {where}: {reason}")
        self.position = position
        self.reason = reason


class AbortNotWritten(ScoutdError, FileExistsError):
    """A non-regular ``abort`` entry was already waiting: the reason was not written.

    The agent is aborted all the same, with a generic reason naming the
    entry's kind (``kind``); the operator's reason is lost.
    """

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(
            errno.EEXIST,
            f"an abort entry that is {kind} is already waiting: the agent will be aborted"
            " with a generic reason, but yours could not be written",
            path,
        )
        self.kind = kind


# -- internal ------------------------------------------------------------------------------


class ProtocolError(Exception):
    """A request the daemon cannot serve, with the JSON-RPC error to answer.

    Raised and caught inside the daemon; a client sees the error response
    (as :class:`RemoteError` or one of its more specific siblings).
    """

    def __init__(self, code: int, message: str, data: Any = None, *, id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.id = id


class Forbidden(Exception):
    """A peer or a path the configuration does not allow; ``str()`` is the reason."""


class StartupError(Exception):
    """The daemon cannot start; the message is the one line shown to the operator."""


class ActivationError(Exception):
    """The passed file descriptor is not a listening AF_UNIX stream socket."""
