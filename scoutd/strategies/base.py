"""What a strategy is: an object with a name, declared capabilities and ``run``.

A strategy takes a conversation's scout messages and a :class:`PrepareContext`
and returns the new messages and its :class:`~.report.StrategyReport`. The
context carries, explicitly, what a run may read besides the messages: the
``[prompt]`` configuration, the provider format, the save file, whether to
report each tool message's fate, and the roles and contents ``prepare`` read
once (docs/PERFORMANCE.md), a session's rewrite cache and, in the daemon,
what its call hands the ``inbox`` strategy (:class:`InboxCall`). The capabilities
tell the engine what it may assume of the strategy's prompts, so that no list
of names elsewhere decides it: ``appends_only`` (the messages it gets stay in
place, it may only append), ``keeps_prefix`` (its prompts stay byte-identical
until an epoch boundary, docs/STRATEGIES.md) and ``rounds`` (the form a session runs round by round:
:class:`Rounds`, or None when it is prepared whole every round).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..config import Config, PromptConfig
from .columns import Columns
from .report import StrategyReport, plain_report
from .rewrites import RewriteCache
from .tool_messages import Handed

if TYPE_CHECKING:
    from ..inbox.gate import Ticket

__all__ = [
    "Builtin",
    "FunctionStrategy",
    "InboxCall",
    "PrepareContext",
    "Redelivery",
    "Rounds",
    "Strategy",
    "checked_result",
]


class Rounds(enum.Enum):
    """A strategy's round-by-round form in a session (``scoutd.engine.incremental``)."""

    PLAN = "plan"  # a compaction plan carried from round to round (cost_rounds.CostPlanner)
    EPOCH = "epoch"  # bands fixed within an epoch: the last prompt extended (epoch_rounds)


@dataclass(slots=True)
class Redelivery:
    """Notices to deliver again before the inbox's own (``carried``, taken by the
    first pickup), and every notice the pickups delivered meanwhile."""

    carried: tuple[str, ...] = ()
    delivered: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class InboxCall:
    """What a daemon prepare call hands its ``inbox`` strategy runs.

    ``ticket``: the call's hold on the daemon's inbox gate, so that its
    pickup learns of an abort the watcher claimed since the call began
    (:mod:`scoutd.inbox.gate`); ``redelivery``: a session round's notices to
    deliver again, and the record of what it delivered (docs/PROTOCOL.md,
    ``redeliver``). The library's own calls have none. ``exact``: the save
    file is a path the daemon resolved itself (``allowed_roots``), so a
    symlink found on it, root's too, was swapped in after the check and is
    not followed: the inbox is unusable (:mod:`scoutd.inbox.walk`). True for
    a daemon call; the library's, given its user's own path, say False.
    """

    ticket: Ticket | None = None
    redelivery: Redelivery | None = None
    exact: bool = True


@dataclass(slots=True)
class PrepareContext:
    """Everything one strategy run reads besides the messages.

    ``columns``: the roles and contents of the very list the strategy gets,
    read once by ``prepare`` (None: read them afresh); valid only while
    nothing changes that list, so ``prepare`` hands them to its first
    strategy alone, and a strategy that runs code of its own (a tokenizer)
    clears them.
    """

    config: PromptConfig
    format: str = "scout"
    save_file: str | None = None
    detail: bool = False
    columns: Columns | None = None
    snapshot: Config | None = None  # the whole configuration, for plugins that ask for it
    rewrites: RewriteCache | None = None  # a session's, kept from round to round
    given: Handed | None = None  # bodies parsed by the previous prepare of this view
    inbox: InboxCall | None = None  # a daemon call's (None: the library's)


@runtime_checkable
class Strategy(Protocol):
    """A prompt strategy (docs/STRATEGIES.md): a name, its capabilities and ``run``."""

    name: str
    appends_only: bool
    keeps_prefix: bool
    rounds: Rounds | None

    def run(self, messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
        """The new messages (``messages`` itself unchanged) and what the run did."""
        ...


Run = Callable[[Sequence[Any], PrepareContext], tuple[list[Any], StrategyReport]]


class Builtin:
    """A built-in strategy: its run function and what it declares of its prompts."""

    __slots__ = ("appends_only", "keeps_prefix", "name", "rounds", "run")

    def __init__(
        self,
        name: str,
        run: Run,
        *,
        appends_only: bool = False,
        keeps_prefix: bool = False,
        rounds: Rounds | None = None,
    ) -> None:
        self.name = name
        self.run = run
        self.appends_only = appends_only
        self.keeps_prefix = keeps_prefix
        self.rounds = rounds


class FunctionStrategy:
    """A function registered by name or named as a plugin, adapted once into a strategy.

    The function gets the messages, and a plugin also the keywords its
    signature names among ``save_file``, ``config`` and ``format`` (the
    provider format: the messages are its scout view). It declares nothing:
    the engine assumes nothing of its prompts.
    """

    appends_only = False
    keeps_prefix = False
    rounds: Rounds | None = None

    def __init__(self, name: str, fn: Callable[..., Any], *, plugin: bool = False) -> None:
        self.name = name
        self.fn = fn
        parameters = inspect.signature(fn).parameters if plugin else {}
        self.keywords = tuple(k for k in ("save_file", "config", "format") if k in parameters)

    def run(self, messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], StrategyReport]:
        given = {"save_file": ctx.save_file, "config": ctx.snapshot, "format": ctx.format}
        result = checked_result(
            self.name, self.fn(messages, **{key: given[key] for key in self.keywords})
        )
        return result, plain_report(self.name, messages, result)


def checked_result(name: str, result: Any) -> list[Any]:
    """``result`` of the caller's strategy ``name``, if it is a list of message objects.

    Code scoutd does not own (a registered function, a plugin, a callable) is
    held to the rule its input kept (docs/PROTOCOL.md, "Messages") where it
    returns, so that its mistake is named as its own instead of surfacing as
    an ``AttributeError`` deep in a format's rebuild (or passing in one format
    and not in another).

    Raises:
        TypeError: not a list, or an entry that is not an object.
    """
    if not isinstance(result, list):
        raise TypeError(f"strategy {name!r} returned {type(result).__name__}, expected a list")
    for position, message in enumerate(result):
        if not isinstance(message, Mapping):
            raise TypeError(
                f"strategy {name!r} returned {type(message).__name__} at {position},"
                " expected message objects"
            )
    return result
