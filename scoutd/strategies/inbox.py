"""``inbox`` (docs/STRATEGIES.md): operator notices, appended as ``user`` messages.

The strategy itself is :func:`deliver`, pure: it appends the notices one
pickup took and raises :class:`~scoutd.errors.Aborted` for an abort. The
pickup (claiming files, recording them, the abort rule) is file delivery and
lives in :mod:`scoutd.inbox`; :func:`inbox` joins the two. The names below
that come from :mod:`scoutd.inbox` stay importable from here.

A daemon call hands the strategy, in ``PrepareContext.inbox``, its hold on
the daemon's inbox gate and, for a session round, a :class:`Redelivery`: the
notices of an answer its client did not use (they come again first) and the
record of what the round delivered (docs/PROTOCOL.md, ``redeliver``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from ..config import PromptConfig
from ..errors import Aborted, StillAborted
from ..inbox import (
    ABORT_NAME,
    AbortNotWritten,
    Pickup,
    claim_abort,
    inbox_dir,
    inbox_removed_dir,
    pick_up,
    record_problem,
    write_abort,
    write_notice,
)
from ..inbox.aborted import held, mark
from .base import Builtin, InboxCall, PrepareContext, Redelivery
from .report import StrategyReport, content_chars

__all__ = [
    "ABORT_NAME",
    "AbortNotWritten",
    "INBOX",
    "Redelivery",
    "claim_abort",
    "deliver",
    "inbox",
    "inbox_dir",
    "inbox_removed_dir",
    "record_problem",
    "write_abort",
    "write_notice",
]


def deliver(messages: Sequence[Any], pickup: Pickup) -> tuple[list[Any], StrategyReport]:
    """``messages`` with each notice of ``pickup`` appended as a ``user`` message.

    Returns a new list (``messages`` is not modified) and the report.

    Raises:
        Aborted: the pickup took an abort (it then took no notice).
    """
    if pickup.abort is not None:
        raise Aborted(pickup.abort)
    out = list(messages)
    out.extend({"role": "user", "content": text} for text in pickup.notices)
    return out, StrategyReport(
        strategy="inbox",
        inbox_delivered=len(pickup.notices),
        chars_before=content_chars(messages),
        chars_after=content_chars(out),
    )


def inbox(
    messages: Sequence[Any],
    config: PromptConfig,
    *,
    save_file: str | None = None,
    call: InboxCall | None = None,
) -> tuple[list[Any], StrategyReport]:
    """Pick up ``save_file``'s inbox and deliver what it held (see :func:`deliver`).

    Without a ``save_file`` or an inbox directory, nothing is touched or created.
    A daemon ``call``'s redelivered notices come first and count against
    ``inbox_max_total_bytes`` like the inbox's own; its ``save_file`` is a
    path the daemon resolved, used exactly (``InboxCall.exact``).

    Raises:
        Aborted: the inbox held an ``abort`` (now consumed, and the chat marked
            aborted: :mod:`scoutd.inbox.aborted`), or the chat was aborted
            before and no operator cleared it; every notice stays pending.
    """
    call = call or _LIBRARY
    reason = held(save_file, exact=call.exact)
    if reason is not None:  # an aborted chat stays aborted (docs/RELIABILITY.md)
        raise StillAborted(reason)
    redelivery = call.redelivery
    carried = redelivery.carried if redelivery is not None else ()
    budget = config.inbox_max_total_bytes - sum(len(text.encode("utf-8")) for text in carried)
    pickup = pick_up(
        save_file,
        max_bytes=config.inbox_max_bytes,
        max_total_bytes=budget,
        ticket=call.ticket,
        before_abort=None if save_file is None else partial(mark, save_file, exact=call.exact),
        exact=call.exact,
    )
    if redelivery is not None and pickup.abort is None:
        if carried:
            pickup = Pickup([*carried, *pickup.notices])
            redelivery.carried = ()
        redelivery.delivered += pickup.notices
    return deliver(messages, pickup)


# The library's calls: no daemon gate, nothing to deliver again, its user's own path
# (root's links and its own followed); frozen: shared safely
_LIBRARY = InboxCall(exact=False)


def _run(messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
    return inbox(messages, ctx.config, save_file=ctx.save_file, call=ctx.inbox)


# It only appends, after the prompt: the prefix stays (docs/STRATEGIES.md)
INBOX = Builtin("inbox", _run, appends_only=True, keeps_prefix=True)
