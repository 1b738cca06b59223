"""The strategies a name can select: built-ins, registered ones, operator plugins.

Names resolve in this order: built-ins, strategies registered at run time
with :func:`register_strategy`, then operator plugins (entry points in group
``scoutd.strategies`` and the ``[plugins]`` table of the config file). A plain
function is adapted into a :class:`~scoutd.strategies.base.FunctionStrategy`
once, when it is registered or its plugin loaded; an object that follows the
:class:`~scoutd.strategies.base.Strategy` protocol is taken as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import Config, load_config
from ..errors import ConfigError, UnknownStrategy
from ..paths import printable
from ..strategies import BUILTINS
from ..strategies.base import FunctionStrategy, Rounds, Strategy
from ..strategies.named_code import Contained, callers_interrupt, import_named

__all__ = [
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "Registry",
    "available_strategies",
    "register_strategy",
    "unregister_strategy",
]

ENTRY_POINT_GROUP = "scoutd.strategies"


def _plugin_sources(config: Config) -> dict[str, str]:
    # imported here: importlib.metadata costs every process (CLI, daemon) about
    # 40 ms at start-up, and only a prepare with an unknown name reads it
    from importlib.metadata import entry_points

    sources = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    sources.update(config.plugins)
    return sources


def _adapted(name: str, found: Any, *, plugin: bool = False) -> Strategy:
    """``found`` as a strategy: a Strategy object as it is, a function adapted (a
    plugin's gets the keywords its signature names)."""
    if isinstance(found, Strategy) and not isinstance(found, type):
        return found
    return FunctionStrategy(name, found, plugin=plugin)


class _Plugin:
    """An operator's plugin strategy, held so that nothing it raises ends the daemon
    (:mod:`scoutd.strategies.named_code`)."""

    def __init__(self, label: str, inner: Strategy) -> None:
        self.name = inner.name
        self.inner = inner
        self.appends_only = inner.appends_only is True
        self.keeps_prefix = inner.keeps_prefix is True
        self.rounds: Rounds | None = inner.rounds  # what the plugin declares, as it is
        self.run = Contained(label, inner.run)


def _load_plugin(name: str, target: str) -> Strategy:
    """Import ``target`` (``module:attribute``) now; ConfigError naming the plugin for
    anything its import or adaptation raises (an exit included: never the daemon's)."""
    label = f"plugin strategy {name!r} ({printable(target)})"
    found = import_named(label, target)
    if not callable(found) and not isinstance(found, Strategy):
        raise ConfigError(f"{label} cannot be loaded: not callable")
    try:
        adapted = _adapted(name, found, plugin=True)
    except BaseException as exc:
        if callers_interrupt(exc):
            raise
        raise ConfigError(f"{label} cannot be loaded: {type(exc).__name__}: {exc}") from None
    return _Plugin(label, adapted)


class Registry:
    """The built-in strategies and those registered at run time, by name."""

    def __init__(self, builtins: Mapping[str, Strategy]) -> None:
        self.builtins = dict(builtins)
        self.registered: dict[str, Strategy] = {}

    def register(self, name: str, strategy: Callable[[list[Any]], Any] | Strategy) -> None:
        """Make ``strategy`` selectable by ``name`` (a function receives the messages only).

        Blanks around the name are no part of it, as in a list of names
        (``"a, b"``): a built-in's name with blanks around is refused too.
        """
        if not isinstance(name, str) or not name.strip() or "," in name:
            raise ValueError(f"invalid strategy name {name!r}: a non-empty name without commas")
        name = name.strip()
        if name in self.builtins:
            raise ValueError(f"{name!r} is a built-in strategy and cannot be replaced")
        if not callable(strategy) and not isinstance(strategy, Strategy):
            raise TypeError(f"strategy {name!r} must be callable, got {type(strategy).__name__}")
        self.registered[name] = _adapted(name, strategy)

    def unregister(self, name: str) -> None:
        """Forget a registered strategy (no error if absent), named as it was registered."""
        if isinstance(name, str):
            self.registered.pop(name.strip(), None)

    def names(self, config: Config) -> list[str]:
        """Every name :meth:`resolve` accepts right now under ``config``."""
        return sorted({*self.builtins, *self.registered, *_plugin_sources(config)})

    def resolve(self, name: str, config: Config) -> Strategy:
        """The strategy called ``name``.

        Raises:
            UnknownStrategy: no strategy has that name (the error lists those known).
            ConfigError: its plugin cannot be loaded.
        """
        found = self.builtins.get(name) or self.registered.get(name)
        if found is not None:
            return found
        target = _plugin_sources(config).get(name)
        if target is None:
            raise UnknownStrategy(name, self.names(config))
        return _load_plugin(name, target)

    def keeps_prefix(self, names: Sequence[str] | None) -> bool:
        """Whether every built-in of ``names`` keeps a stable prefix (None: a callable ran)."""
        if names is None:
            return False
        return all(name in self.builtins and self.builtins[name].keeps_prefix for name in names)


REGISTRY = Registry(BUILTINS)  # the process's: what register_strategy adds


def register_strategy(name: str, fn: Callable[[list[Any]], Any] | Strategy) -> None:
    """Make ``fn`` selectable by ``name``: a function receives the messages only, a
    :class:`~scoutd.strategies.base.Strategy` its ``run(messages, ctx)``."""
    REGISTRY.register(name, fn)


def unregister_strategy(name: str) -> None:
    """Forget a strategy registered with :func:`register_strategy` (no error if absent)."""
    REGISTRY.unregister(name)


def available_strategies(config: Config | None = None) -> list[str]:
    """Every name :func:`scoutd.prepare` accepts right now."""
    return REGISTRY.names(load_config() if config is None else config)
