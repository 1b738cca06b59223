"""``prepare_prompt``: resolve the strategy list and run it (docs/STRATEGIES.md).

Names resolve in this order: built-ins, strategies registered at run time with
:func:`register_strategy`, then operator plugins (entry points in group
``scoutd.strategies`` and the ``[plugins]`` table of the config file).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import msgspec

from ..config import DEFAULT_STRATEGIES, Config, PromptConfig, load_config, strategy_names
from ..errors import ConfigError, UnknownStrategy
from ..formats import AUTO, SCOUT, adapter, resolve_format
from ..formats.cache import hinted
from ..formats.detect import detect_format
from ..strategies import BUILTINS
from ..strategies.columns import Columns, columns_of, sharing
from ..strategies.report import StrategyReport, plain_report
from ..strategies.tool_messages import given_bodies
from .message_rules import check_plain

__all__ = [
    "ENTRY_POINT_GROUP",
    "Prepared",
    "available_strategies",
    "prepare",
    "prepare_prompt",
    "register_strategy",
    "resolve_snapshot",
    "unregister_strategy",
]

ENTRY_POINT_GROUP = "scoutd.strategies"

_registered: dict[str, Callable[[list[Any]], Any]] = {}


class Prepared(msgspec.Struct, kw_only=True):
    """The prepared prompt and what each strategy did to get there."""

    messages: list[Any]
    report: list[StrategyReport]

    @property
    def format(self) -> str:
        """The message format used (docs/FORMATS.md)."""
        return self.report[-1].format if self.report else "scout"

    @property
    def stable_prefix(self) -> int:
        """Leading messages that stay byte-identical until the next epoch boundary."""
        value = self.report[-1].stable_prefix if self.report else None
        return 0 if value is None else value

    @property
    def warnings(self) -> list[str]:
        """Warnings about the input (foreign tool traffic), also logged."""
        return [w for r in self.report for w in (r.warnings or ())]


def register_strategy(name: str, fn: Callable[[list[Any]], Any]) -> None:
    """Make ``fn`` selectable by ``name``; it receives the messages only."""
    if not isinstance(name, str) or not name.strip() or "," in name:
        raise ValueError(f"invalid strategy name {name!r}: a non-empty name without commas")
    if name in BUILTINS:
        raise ValueError(f"{name!r} is a built-in strategy and cannot be replaced")
    if not callable(fn):
        raise TypeError(f"strategy {name!r} must be callable, got {type(fn).__name__}")
    _registered[name.strip()] = fn


def unregister_strategy(name: str) -> None:
    """Forget a strategy registered with :func:`register_strategy` (no error if absent)."""
    _registered.pop(name, None)


def _plugin_sources(config: Config) -> dict[str, str]:
    # imported here: importlib.metadata costs every process (CLI, daemon) about
    # 40 ms at start-up, and only a prepare with an unknown name reads it
    from importlib.metadata import entry_points

    sources = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    sources.update(config.plugins)
    return sources


def available_strategies(config: Config | None = None) -> list[str]:
    """Every name :func:`prepare_prompt` accepts right now."""
    config = load_config() if config is None else config
    return sorted({*BUILTINS, *_registered, *_plugin_sources(config)})


def _load_plugin(name: str, target: str) -> Callable[..., Any]:
    module_name, _, attribute = target.partition(":")
    try:
        found: Any = importlib.import_module(module_name.strip())
        for part in attribute.strip().split(".") if attribute.strip() else []:
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"plugin strategy {name!r} ({target}) cannot be loaded: {exc}") from exc
    if not callable(found):
        raise TypeError(f"plugin strategy {name!r} ({target}) is not callable")
    return found  # type: ignore[no-any-return]


def _run_external(
    name: str,
    fn: Callable[..., Any],
    messages: list[Any],
    save_file: str | None,
    config: Config,
    plugin: bool,
    format: str,
) -> list[Any]:
    kwargs: dict[str, Any] = {}
    if plugin:
        parameters = inspect.signature(fn).parameters
        if "save_file" in parameters:
            kwargs["save_file"] = save_file
        if "config" in parameters:
            kwargs["config"] = config
        if "format" in parameters:
            kwargs["format"] = format  # the provider format; the messages are its scout view
    result = fn(messages, **kwargs)
    if not isinstance(result, list):
        raise TypeError(f"strategy {name!r} returned {type(result).__name__}, expected a list")
    return result


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
) -> tuple[list[Any], list[StrategyReport], list[str] | None]:
    """Run the strategies over ``current``; the names run (None for a callable).

    ``columns``: ``current``'s roles and contents, read by the caller; shared
    with the first strategy only (when built in), which runs before any other
    code could change the messages (docs/PERFORMANCE.md).
    """
    if callable(strategies) and not isinstance(strategies, str):
        result = strategies(current)
        return result, [plain_report("<callable>", current, result)], None
    assert snapshot is not None
    names = _names(strategies, snapshot)
    reports: list[StrategyReport] = []
    for position, name in enumerate(names):
        builtin = BUILTINS.get(name)
        if builtin is not None:
            with sharing(columns if position == 0 else None):
                current, report = builtin(current, snapshot.prompt, save_file, detail, format)
            reports.append(report)
            continue
        plugin = False
        fn: Callable[..., Any] | None = _registered.get(name)
        if fn is None:
            target = _plugin_sources(snapshot).get(name)
            if target is None:
                raise UnknownStrategy(name, available_strategies(snapshot))
            fn, plugin = _load_plugin(name, target), True
        before = current
        current = _run_external(name, fn, current, save_file, snapshot, plugin, format)
        reports.append(plain_report(name, before, current))
    return current, reports, names


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
) -> Prepared:
    """Run the strategies over ``messages``; return the prompt and the report.

    The input list and its messages are never modified. ``detail=True`` adds,
    per strategy, the fate of every tool message (``report[i].actions``).
    ``format`` names the message format (docs/FORMATS.md); ``auto`` detects it,
    and the prompt comes back in it. ``cache_control`` (default: the
    ``[prompt] cache_control`` key) marks the stable prefix in Anthropic form.

    Raises:
        Aborted: an ``abort`` file was found in the inbox.
        UnknownStrategy: a name is not known (the error lists the known ones).
        ConfigError: the configuration or the overrides are invalid, or an
            override sets a key only the operator may (``tokenizer``).
        ValueError: an unknown format, or ``auto`` over a list that mixes formats.
        InvalidMessages: a message breaks the rule of docs/PROTOCOL.md ("Messages");
            a ``TypeError`` and a ``ValueError``.
    """
    plain = check_plain(messages)  # the daemon applies the same rule (docs/PROTOCOL.md)
    name, warning, columns = _detect(messages, format, plain)
    snapshot = (
        None
        if callable(strategies) and not isinstance(strategies, str)
        else (resolve_snapshot(config))
    )
    chosen = adapter(name)
    shape = None if chosen is None else chosen.view(messages, True)
    current: list[Any] = list(messages) if shape is None else shape.messages
    if shape is None:
        shared = None if columns is None else columns.over(current)
    else:  # the strategies see the view's messages: read those once instead
        shared = columns_of(current) if plain else None
    handing_over = (
        nullcontext()
        if shape is None or shape.parsed is None
        else given_bodies(shape.bodies, shape.parsed)  # docs/PERFORMANCE.md
    )
    with handing_over:
        result, reports, names = _run_chain(
            current, strategies, save_file, snapshot, detail, name, shared
        )
    narration = 0
    if chosen is not None and shape is not None:
        rebuilt = chosen.restore(messages, shape, result)
        result, narration = rebuilt.messages, rebuilt.narration_dropped
    if not isinstance(result, list):
        raise TypeError(f"a strategy returned {type(result).__name__}, expected a list")
    hint = cache_control
    if hint is None:
        hint = snapshot.prompt.cache_control if snapshot is not None else False
    result, stable = hinted(names, messages, result, reports, name, hint)
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
) -> list[Any]:
    """The prepared prompt for ``messages`` (see :func:`prepare`)."""
    return prepare(
        messages,
        strategies,
        save_file=save_file,
        config=config,
        format=format,
        cache_control=cache_control,
    ).messages
