"""The notice ``shorten_tools_cost_aware`` inserts, and what it adds to a prompt.

The notice is the one text a compaction adds; the prompt sent must fit its
limit with it (:func:`scoutd.strategies.cost_plan.fit_sent`), so its size is
counted from the same words the compaction writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import DEFAULT_NOTICE, PromptConfig
from .rewrites import recall_notice
from .tool_messages import ToolIndex

__all__ = ["COST_AWARE_NOTICE", "compaction_notice", "notice_estimate"]

# The default notice without the seed's promise about repeated calls: this
# strategy drops old pairs whatever their call (keeping the latest of every
# repeated call whole costs more than all the rest on long runs).
COST_AWARE_NOTICE = (
    "[Context compaction]\n"
    "This conversation was compacted to fit the model's context window: {compacted} older"
    ' tool messages are shown shortened (marked "Truncated (<original length>): ...") and'
    " {removed} were removed.\n"
    "A tool call that is no longer visible may still have run: do not repeat a call only"
    " because its earlier result is missing."
)
# What the notice's two counts add to its template, at most (20 digits each), and
# what the removed outputs' handles add with recall on, as counted ("#1-#46, ...").
_COUNTS, _HANDLES = 2 * 20, 100


def compaction_notice(config: PromptConfig, index: ToolIndex, dropped: Sequence[int]) -> str:
    """The notice's template for a compaction that drops the tool slots ``dropped``."""
    notice = config.compaction_notice
    if notice == DEFAULT_NOTICE:
        notice = COST_AWARE_NOTICE
    return recall_notice(notice, index, dropped) if config.recall else notice


def notice_estimate(config: PromptConfig) -> str:
    """A text as long as the longest notice a compaction usually writes, to count."""
    filled = _COUNTS + (_HANDLES if config.recall else 0)
    return compaction_notice(config, ToolIndex(), ()) + "x" * filled
