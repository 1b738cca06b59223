"""``prepare``: the strategy list resolved (:mod:`.registry`) and run (docs/STRATEGIES.md).

A provider format's conversation is viewed in the scout format, the
strategies run over the view, each with the :class:`PrepareContext` of the
call, and the prompt is rebuilt in the provider's format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ..config import DEFAULT_STRATEGIES, Config, PromptConfig, load_config, strategy_names
from ..formats import AUTO, SCOUT, adapter, resolve_format
from ..formats.cache import hinted
from ..formats.detect import detect_format
from ..formats.texts import ConversationTexts
from ..protocol.report import Prepared, StrategyReport
from ..protocol.sdk_objects import sent_forms
from ..strategies.base import Builtin, InboxCall, PrepareContext, checked_result
from ..strategies.columns import Columns, columns_of
from ..strategies.report import plain_report
from ..strategies.rewrites import RewriteCache
from ..strategies.tool_messages import Handed, index_tools, output_handles
from .message_rules import check_plain, too_deep
from .registry import REGISTRY, available_strategies, register_strategy, unregister_strategy

__all__ = [
    "Prepared",
    "available_strategies",
    "prepare",
    "prepare_prompt",
    "prepare_with",
    "register_strategy",
    "resolve_snapshot",
    "unregister_strategy",
]


def resolve_snapshot(config: Config | PromptConfig | Mapping[str, Any] | None) -> Config:
    """Turn the ``config=`` argument into one snapshot for the whole call.

    A ``Config`` or ``PromptConfig`` is code's own and taken as it is; a mapping
    is per-call overrides of the configuration read now, held to what a client
    may set (no key that names code: docs/RELIABILITY.md).
    """
    if isinstance(config, Config):
        return config
    if isinstance(config, PromptConfig):
        return Config(prompt=config)
    return load_config(overrides=config)


def _names(strategies: str | Sequence[str] | None, config: Config) -> list[str]:
    if strategies is None:
        configured = strategy_names(config.prompt.prompt_strategies)
        return list(DEFAULT_STRATEGIES) if configured is None else configured
    if not isinstance(strategies, str) and not (
        isinstance(strategies, Sequence) and all(isinstance(s, str) for s in strategies)
    ):
        raise TypeError(
            "strategies must be a callable, a comma-separated string or a list of names"
        )
    return strategy_names(strategies) or []


def _run_chain(
    current: list[Any],
    strategies: str | Sequence[str] | Callable[[list[Any]], Any] | None,
    save_file: str | None,
    snapshot: Config | None,
    detail: bool,
    format: str,
    columns: Columns | None = None,
    rewrites: RewriteCache | None = None,
    given: Handed | None = None,
    inbox: InboxCall | None = None,
    numbered: bool = True,
) -> tuple[list[Any], list[StrategyReport], list[str] | None]:
    """Run the strategies over ``current``; the names run (None for a callable).

    ``columns``: ``current``'s roles and contents, read by the caller; shared
    with the first strategy only (in its context), which runs before any other
    code could change the messages (docs/PERFORMANCE.md). ``numbered``:
    ``current``'s tool outputs are the conversation's, numbered as recall's
    handles number them; a strategy given other outputs (an earlier one
    removed some) writes no handles, which would name other outputs.
    """
    if callable(strategies) and not isinstance(strategies, str):
        result = checked_result("<callable>", strategies(current))
        return result, [plain_report("<callable>", current, result)], None
    assert snapshot is not None
    names = _names(strategies, snapshot)
    chain = [REGISTRY.resolve(name, snapshot) for name in names]
    recall = snapshot.prompt.recall
    handles: list[tuple[Any, int]] | None = None  # the conversation's, read when needed
    reports: list[StrategyReport] = []
    for position, strategy in enumerate(chain):
        config = snapshot if numbered or not recall else _without_handles(snapshot)
        ctx = PrepareContext(
            config=config.prompt,
            format=format,
            save_file=save_file,
            detail=detail,
            columns=columns if position == 0 else None,
            snapshot=config,
            rewrites=rewrites,
            given=given,
            inbox=inbox,
        )
        # while handles are written, a strategy that may remove outputs before one that
        # may write handles must leave the conversation's outputs, numbered as they were
        check = (
            recall
            and numbered
            and not strategy.appends_only
            and not all(later.appends_only for later in chain[position + 1 :])
        )
        if check and handles is None:
            handles = output_handles(index_tools(current))
        current, report = strategy.run(current, ctx)
        if type(strategy) is not Builtin:  # code of the caller's: held to the rule here
            current = checked_result(strategy.name, current)
        reports.append(report)
        if check:
            numbered = output_handles(index_tools(current)) == handles
    return current, reports, names


def _without_handles(snapshot: Config) -> Config:
    """``snapshot`` with recall's handles off (its other keys as they are)."""
    prompt = msgspec.structs.replace(snapshot.prompt, recall=False)
    return msgspec.structs.replace(snapshot, prompt=prompt)


def _detect(
    messages: Sequence[Any], format: str, plain: bool
) -> tuple[str, str | None, Columns | None]:
    """:func:`resolve_format`, and a plain scout list's roles and contents read once.

    The columns (docs/PERFORMANCE.md) are read only for a list that may be in
    the scout format (no ``type`` or ``tool_calls`` key): a provider format's
    view makes messages of its own.
    """
    if not plain:
        return (*resolve_format(messages, format), None)
    if type(format) is str and format == AUTO:
        keys = set().union(*messages)
        scout = "type" not in keys and "tool_calls" not in keys
        columns = columns_of(messages, dicts=True) if scout else None
        known = (
            (keys, None, None) if columns is None else (keys, columns.roles, columns.content_types)
        )
        return detect_format(messages, known), None, columns
    name, warning = resolve_format(messages, format)
    return name, warning, columns_of(messages, dicts=True) if name == SCOUT else None


def prepare(
    messages: Sequence[Any],
    strategies: str | Sequence[str] | Callable[[list[Any]], Any] | None = None,
    *,
    save_file: str | None = None,
    config: Config | PromptConfig | Mapping[str, Any] | None = None,
    detail: bool = False,
    format: str = AUTO,
    cache_control: bool | None = None,
    texts: ConversationTexts | None = None,
) -> Prepared:
    """Run the strategies over ``messages``; return the prompt and the report.

    The input list and its messages are never modified. ``detail=True`` adds,
    per strategy, the fate of every tool message (``report[i].actions``).
    ``format`` names the message format (docs/FORMATS.md); ``auto`` detects it,
    and the prompt comes back in it. ``cache_control`` (default: the
    ``[prompt] cache_control`` key; off for a callable, for which no
    configuration is read) marks the stable prefix in Anthropic form.
    ``texts``: a :class:`~scoutd.ConversationTexts` the caller keeps for this
    conversation; a provider format's view then reuses the texts and parsed
    bodies of the messages it saw at the previous call with the same object
    (docs/PERFORMANCE.md). Without it, every call starts from nothing.

    Raises:
        Aborted: an ``abort`` file was found in the inbox.
        UnknownStrategy: a name is not known (the error lists the known ones).
        ConfigError: the configuration or the overrides are invalid, or an
            override sets a key only the operator may (``tokenizer``).
        ValueError: an unknown format, or ``auto`` over a list that mixes formats.
        InvalidMessages: a message breaks the rule of docs/PROTOCOL.md ("Messages"),
            or nests deeper than the interpreter walks; a ``TypeError`` and a
            ``ValueError``.
    """
    try:
        return prepare_with(
            messages,
            strategies,
            save_file=save_file,
            config=config,
            detail=detail,
            format=format,
            cache_control=cache_control,
            texts=texts,
        )
    except RecursionError:
        raise too_deep() from None


def prepare_with(
    messages: Sequence[Any],
    strategies: str | Sequence[str] | Callable[[list[Any]], Any] | None,
    *,
    save_file: str | None,
    config: Config | PromptConfig | Mapping[str, Any] | None,
    detail: bool = False,
    format: str = AUTO,
    cache_control: bool | None,
    rewrites: RewriteCache | None = None,
    texts: ConversationTexts | None = None,
    inbox: InboxCall | None = None,
    numbered: bool = True,
) -> Prepared:
    """:func:`prepare` with a session's ``rewrites`` (the session engine's whole rounds),
    a daemon call's ``inbox`` (``PrepareContext.inbox``) and ``numbered``
    (:func:`_run_chain`: False for messages whose tool outputs are not the
    conversation's)."""
    converted = sent_forms(messages)  # an SDK's objects, as it sends them (docs/FORMATS.md)
    if converted is not None:
        messages = converted
    plain = check_plain(messages)  # the daemon applies the same rule (docs/PROTOCOL.md)
    name, warning, columns = _detect(messages, format, plain)
    snapshot = (
        None
        if callable(strategies) and not isinstance(strategies, str)
        else (resolve_snapshot(config))
    )
    chosen = adapter(name)
    shape = None if chosen is None else chosen.view(messages, True, texts)
    current: list[Any] = list(messages) if shape is None else shape.messages
    if shape is None:
        shared = None if columns is None else columns.over(current)
    else:  # the strategies see the view's messages: read those once instead
        shared = columns_of(current) if plain else None
    handed: Handed | None = (
        None
        if shape is None or shape.parsed is None
        else (shape.bodies, shape.parsed)  # docs/PERFORMANCE.md
    )
    result, reports, names = _run_chain(
        current,
        strategies,
        save_file,
        snapshot,
        detail,
        name,
        shared,
        rewrites,
        handed,
        inbox,
        numbered,
    )
    # messages dropped with their calls: the rebuild's count, or in scoutd's own format
    # the assistant remarks the strategies dropped (each counts its own)
    narration = sum(report.narration_dropped for report in reports)
    if chosen is not None and shape is not None:
        rebuilt = chosen.restore(messages, shape, result)
        result, narration = rebuilt.messages, rebuilt.narration_dropped
    hint = cache_control
    if hint is None:
        hint = snapshot.prompt.cache_control if snapshot is not None else False
    result, stable = hinted(REGISTRY.keeps_prefix(names), messages, result, reports, chosen, hint)
    for report in reports:
        report.format = name
    if not reports:
        reports.append(plain_report("<none>", messages, result))
        reports[0].format = name
    last = reports[-1]
    last.malformed = 0 if shape is None else shape.malformed
    last.narration_dropped = narration
    last.stable_prefix = stable
    if warning is not None:
        last.warnings = [warning]
    return Prepared(messages=result, report=reports)


def prepare_prompt(
    messages: Sequence[Any],
    strategies: str | Sequence[str] | Callable[[list[Any]], Any] | None = None,
    *,
    save_file: str | None = None,
    config: Config | PromptConfig | Mapping[str, Any] | None = None,
    format: str = AUTO,
    cache_control: bool | None = None,
    texts: ConversationTexts | None = None,
) -> list[Any]:
    """The prepared prompt for ``messages`` (see :func:`prepare`)."""
    return prepare(
        messages,
        strategies,
        save_file=save_file,
        config=config,
        format=format,
        cache_control=cache_control,
        texts=texts,
    ).messages
