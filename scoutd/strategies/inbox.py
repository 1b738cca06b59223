"""``inbox`` (docs/STRATEGIES.md): operator notices, appended as ``user`` messages.

The strategy itself is :func:`deliver`, pure: it appends the notices one
pickup took and raises :class:`~scoutd.errors.Aborted` for an abort. The
pickup (claiming files, recording them, the abort rule) is file delivery and
lives in :mod:`scoutd.inbox`; :func:`inbox` joins the two. The names below
that come from :mod:`scoutd.inbox` stay importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import PromptConfig
from ..errors import Aborted
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
from .report import StrategyReport, content_chars

__all__ = [
    "ABORT_NAME",
    "AbortNotWritten",
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
    messages: Sequence[Any], config: PromptConfig, *, save_file: str | None = None
) -> tuple[list[Any], StrategyReport]:
    """Pick up ``save_file``'s inbox and deliver what it held (see :func:`deliver`).

    Without a ``save_file`` or an inbox directory, nothing is touched or created.

    Raises:
        Aborted: the inbox held an ``abort`` (now consumed); every notice stays
            pending for the next run.
    """
    pickup = pick_up(
        save_file, max_bytes=config.inbox_max_bytes, max_total_bytes=config.inbox_max_total_bytes
    )
    return deliver(messages, pickup)
