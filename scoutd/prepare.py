"""``prepare_prompt``: resolve the strategy list and run it (SPEC section 3).

Names resolve in this order: built-ins, strategies registered at run time with
:func:`register_strategy`, then operator plugins (entry points in group
``scoutd.strategies`` and the ``[plugins]`` table of the config file).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

import msgspec

from .config import DEFAULT_STRATEGIES, Config, PromptConfig, load_config, strategy_names
from .errors import ConfigError, UnknownStrategy
from .strategies import BUILTINS
from .strategies.report import StrategyReport, plain_report

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
) -> list[Any]:
    kwargs: dict[str, Any] = {}
    if plugin:
        parameters = inspect.signature(fn).parameters
        if "save_file" in parameters:
            kwargs["save_file"] = save_file
        if "config" in parameters:
            kwargs["config"] = config
    result = fn(messages, **kwargs)
    if not isinstance(result, list):
        raise TypeError(f"strategy {name!r} returned {type(result).__name__}, expected a list")
    return result


def resolve_snapshot(config: Config | PromptConfig | Mapping[str, Any] | None) -> Config:
    """Turn the ``config=`` argument into one snapshot for the whole call."""
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


def prepare(
    messages: Sequence[Any],
    strategies: str | Sequence[str] | Callable[[list[Any]], Any] | None = None,
    *,
    save_file: str | None = None,
    config: Config | PromptConfig | Mapping[str, Any] | None = None,
    detail: bool = False,
) -> Prepared:
    """Run the strategies over ``messages``; return the prompt and the report.

    The input list and its messages are never modified. ``detail=True`` adds,
    per strategy, the fate of every tool message (``report[i].actions``).

    Raises:
        Aborted: an ``abort`` file was found in the inbox.
        UnknownStrategy: a name is not known (the error lists the known ones).
        ConfigError: the configuration or the overrides are invalid.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
    current: list[Any] = list(messages)
    if callable(strategies) and not isinstance(strategies, str):
        result = strategies(current)
        return Prepared(messages=result, report=[plain_report("<callable>", current, result)])
    snapshot = resolve_snapshot(config)
    names = _names(strategies, snapshot)
    reports: list[StrategyReport] = []
    for name in names:
        builtin = BUILTINS.get(name)
        if builtin is not None:
            current, report = builtin(current, snapshot.prompt, save_file, detail)
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
        current = _run_external(name, fn, current, save_file, snapshot, plugin)
        reports.append(plain_report(name, before, current))
    return Prepared(messages=current, report=reports)


def prepare_prompt(
    messages: Sequence[Any],
    strategies: str | Sequence[str] | Callable[[list[Any]], Any] | None = None,
    *,
    save_file: str | None = None,
    config: Config | PromptConfig | Mapping[str, Any] | None = None,
) -> list[Any]:
    """The prepared prompt for ``messages`` (see :func:`prepare`)."""
    return prepare(messages, strategies, save_file=save_file, config=config).messages
