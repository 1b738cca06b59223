"""What the daemon runs in worker threads: path checks, decoding, preparing.

Each function here is synchronous and touches no event-loop state; the
handlers hand them to :func:`anyio.to_thread.run_sync` so that one large or
slow request never holds up the others (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec

from .. import protocol
from ..config import Config
from ..engine.held import held_bytes
from ..engine.incremental import SessionPrompt, json_size
from ..engine.prepare import Prepared, prepare_with
from ..inbox.gate import Ticket
from ..protocol.layout import layout_of
from ..protocol.messages import TOO_DEEP
from ..security import PeerCred, check_access, check_save_file
from ..strategies.base import InboxCall, Redelivery
from .quotas import Quotas
from .sessions import AgentSession

__all__ = [
    "PathCheck",
    "check_session_size",
    "differs",
    "checked_path",
    "decode_large",
    "run_prepare",
    "run_session_prepare",
    "store_opening",
    "too_deep",
]

log = logging.getLogger("scoutd.server")


def checked_path(save_file: str, roots: tuple[str, ...], peer: PeerCred, own_uid: int) -> str:
    """The resolved save file, inside a root and reachable by the peer (Forbidden)."""
    resolved = check_save_file(save_file, roots)
    if peer.uid != own_uid:
        check_access(resolved, peer)
    return resolved


def _log_warnings(prepared: Prepared) -> None:
    """Foreign tool traffic in a request is never silent: the daemon log says so too."""
    for warning in prepared.warnings:
        log.warning("prepare_prompt: %s", warning)


def run_prepare(
    rid: protocol.RequestId,
    params: protocol.PreparePromptParams,
    save_file: str | None,
    config: Config,
    layout_allowed: bool,
    ticket: Ticket | None = None,
) -> tuple[bytes, int]:
    """Run the strategies on the request's messages; (answer line, notices delivered).

    ``ticket``: the call's hold on the daemon's inbox gate (``inbox/gate.py``).

    With ``answer="indices"`` and ``layout_allowed``, the answer is the prompt's
    layout over the request's messages (docs/PROTOCOL.md): the kept messages,
    the very objects decoded from the request, are not encoded again. The
    caller allows it only when built-in strategies alone run (they never
    modify their input; a plugin might); the answer is ``messages`` otherwise,
    or when the layout has no such form (:func:`scoutd.protocol.layout.layout_of`).
    """
    assert params.messages is not None  # required without a session
    prepared = prepare_with(
        params.messages,
        params.strategies,
        save_file=save_file,
        config=config,
        format=params.format or "auto",
        cache_control=params.cache_control,
        inbox=InboxCall(ticket),
    )
    delivered = sum(report.inbox_delivered for report in prepared.report)
    _log_warnings(prepared)
    layout = None
    if layout_allowed and params.answer == "indices":
        layout = layout_of(params.messages, prepared.messages)
    if layout is None:
        result = protocol.PreparePromptResult(messages=prepared.messages, report=prepared.report)
    else:
        result = protocol.PreparePromptResult(layout=layout, report=prepared.report)
    return protocol.encode_result(rid, result), delivered


def too_deep(rid: protocol.RequestId) -> bytes:
    """The error for a request whose params nest deeper than the daemon walks.

    ``-32602`` at ``$.params``, ``data.error`` :data:`~scoutd.protocol.messages.TOO_DEEP`,
    what clients recognise it by. A line nested too deeply to read at all never
    gets here: the codec refuses it (``-32700`` at ``$``,
    :func:`scoutd.protocol.codec.too_deep`).
    """
    return protocol.encode_error(
        rid,
        protocol.INVALID_PARAMS,
        f"invalid params: {TOO_DEEP} - at `$.params`",
        {"path": "$.params", "error": TOO_DEEP},
    )


def decode_large(line: bytes) -> tuple[protocol.Request, msgspec.Struct | None]:
    """A large line, in one pass when it is a valid ``prepare_prompt``."""
    fast = protocol.decode_prepare_request(line)
    if fast is not None:
        return fast
    return protocol.decode_request(line), None


def check_session_size(
    session: AgentSession,
    new: Sequence[Any],
    config: Config,
    rid: protocol.RequestId,
    quotas: Quotas,
    *,
    kept: int = 0,
) -> tuple[int, int]:
    """Refuse a conversation that would hold more than ``max_session_messages``
    (TOO_LARGE); its ``(JSON size, bytes held)`` otherwise.

    The JSON size of ``new`` is what it adds to the session's stored size; the
    bytes held are what the whole conversation will hold in memory
    (:func:`~scoutd.engine.held.held_bytes`), which :meth:`Quotas.reserve_session`
    checks against the session, uid and daemon bounds.
    """
    daemon = config.daemon
    count = kept + len(new)
    if count > daemon.max_session_messages:
        limit = daemon.max_session_messages
        raise protocol.ProtocolError(
            protocol.TOO_LARGE,
            f"too large: the session would hold {count} messages, more than"
            f" max_session_messages = {limit}",
            protocol.TooLargeData(limit=limit, key="max_session_messages"),
            id=rid,
        )
    added = json_size(new)
    held = (quotas.session_held(session.id) if kept else 0) + held_bytes(new, added)
    return added, held


def store_opening(
    session: AgentSession,
    messages: Sequence[Any],
    config: Config,
    rid: protocol.RequestId,
    quotas: Quotas,
) -> None:
    """Store the conversation a ``session.open`` brings, if the bounds allow it."""
    size, held = check_session_size(session, messages, config, rid, quotas)
    before = quotas.reserve_session(session, held, rid)
    try:
        session.prompt.extend(messages, size)
    except BaseException:
        quotas.restore_session(session, before)
        raise
    # The opener set the conversation: another connection's `append` is refused
    # (docs/PROTOCOL.md), never prepared on these messages.
    session.encoder.writer = session.owner


PathCheck = tuple[str, tuple[str, ...], PeerCred, int]


def differs(rid: protocol.RequestId) -> protocol.ProtocolError:
    """The error for a save file that does not resolve to the session's."""
    return protocol.ProtocolError(
        protocol.INVALID_PARAMS,
        "invalid params: save_file differs from the session's save file",
        {"path": "$.params.save_file", "error": "differs from the session's"},
        id=rid,
    )


def run_session_prepare(
    rid: protocol.RequestId,
    params: protocol.PreparePromptParams,
    session: AgentSession,
    save_file: str | None,
    config: Config,
    recheck: PathCheck | None = None,
    *,
    quotas: Quotas,
    ticket: Ticket | None = None,
) -> tuple[bytes, int]:
    """Update the session's conversation, prepare it, encode the answer.

    Runs under the session's lock: one prepare per session at a time. A call
    that fails leaves the session's conversation exactly as it was. With
    ``redeliver``, the notices of the session's previous answer come first
    again; the count returned is of notices delivered for the first time.
    ``recheck`` (save file, roots, peer, daemon uid): check the session's save
    file here first (:func:`checked_path`; Forbidden) and prepare with it; it
    must still resolve to the session's. ``quotas`` counts what the
    conversation holds (TOO_LARGE beyond a bound, nothing changed;
    UNKNOWN_SESSION once the session is closed); ``ticket`` the call's hold on
    the daemon's inbox gate (``inbox/gate.py``).
    """
    if recheck is not None:
        save_file = checked_path(*recheck)
        if save_file != session.resolved:
            raise differs(rid)
    state = session.prompt
    if params.messages is not None:
        size, held = check_session_size(session, params.messages, config, rid, quotas)
        before = quotas.reserve_session(session, held, rid)
        try:
            state = SessionPrompt(format=session.prompt.format)
            state.reset(params.messages, size)
        except BaseException:
            quotas.restore_session(session, before)
            raise
    else:
        if session.forgotten or (params.base is not None and params.base != len(state.messages)):
            if session.forgotten:
                holds = "no conversation (dropped when idle)"
            else:
                holds = f"{len(state.messages)} messages, not {params.base}"
            error = f"the session holds {holds}: send the whole conversation as `messages`"
            raise protocol.ProtocolError(
                protocol.INVALID_PARAMS,
                f"invalid params: {error} - at `$.params.base`",
                {"path": "$.params.base", "error": error, "messages": len(state.messages)},
                id=rid,
            )
        append = params.append or []
        kept = len(state.messages)
        size, held = check_session_size(session, append, config, rid, quotas, kept=kept)
        before = quotas.reserve_session(session, held, rid)
        try:
            state.extend(append, size)
        except BaseException:
            quotas.restore_session(session, before)
            raise
    carried = session.delivered if params.redeliver else ()
    redelivery = Redelivery(tuple(carried))
    try:
        prepared, stable = state.prepare(
            params.strategies,
            config,
            save_file=save_file,
            format=params.format,
            cache_control=params.cache_control,
            inbox=InboxCall(ticket, redelivery),
        )
    except BaseException:
        if state is session.prompt and params.append:
            state.truncate(len(state.messages) - len(params.append))
        quotas.restore_session(session, before)
        raise
    session.prompt, session.forgotten = state, False
    session.delivered = tuple(redelivery.delivered)
    session.shown, session.shown_format = prepared.messages, params.format  # for recall
    redelivered = len(carried) - len(redelivery.carried)  # those the inbox strategy took
    delivered = sum(report.inbox_delivered for report in prepared.report) - redelivered
    _log_warnings(prepared)
    if params.delta:
        delta = session.encoder.delta(prepared.messages, stable, replace=params.delta_replace)
        result = protocol.PreparePromptResult(
            keep=delta.keep,
            replace=msgspec.UNSET if delta.replace is None else delta.replace,
            append=delta.append,
            checksum=delta.checksum,
            report=prepared.report,
        )
    else:
        session.encoder.sent_whole(prepared.messages)
        result = protocol.PreparePromptResult(messages=prepared.messages, report=prepared.report)
    return protocol.encode_result(rid, result), delivered
