"""scoutd: context-window management for LLM agents.

Prompt strategies that keep a long agent conversation inside the model's
context window while keeping the prompt prefix stable for provider caches,
operator notices delivered through an inbox beside the chat, and a daemon
that serves all of it to local agents over a Unix socket.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from ._lazy import lazy_attributes
from ._version import __version__

# Where each public name lives: imported on first use (PEP 562), so that
# ``import scoutd.protocol``, ``import scoutd.client`` and the CLI's light verbs
# load only what they use (docs/ARCHITECTURE.md, "Layers").
_LAZY = {
    "AsyncClient": ".client",
    "AsyncSession": ".client",
    "Client": ".client",
    "Config": ".config",
    "DaemonConfig": ".config",
    "PromptConfig": ".config",
    "load_config": ".config",
    "Aborted": ".errors",
    "ConfigError": ".errors",
    "DaemonTimeout": ".errors",
    "DaemonUnavailable": ".errors",
    "RemoteError": ".errors",
    "ScoutdError": ".errors",
    "UnknownStrategy": ".errors",
    "AbortNotWritten": ".inbox",
    "inbox_dir": ".inbox",
    "inbox_removed_dir": ".inbox",
    "list_inbox": ".inbox",
    "write_abort": ".inbox",
    "write_notice": ".inbox",
    "InvalidMessages": ".message_rules",
    "available_strategies": ".prepare",
    "prepare": ".prepare",
    "prepare_prompt": ".prepare",
    "register_strategy": ".prepare",
    "unregister_strategy": ".prepare",
    "Prepared": ".protocol.report",
    "StrategyReport": ".protocol.report",
    "ToolAction": ".protocol.report",
    "Session": ".session",
    "shorten_string": ".strategies.text",
    "truncate_string": ".strategies.text",
}

if TYPE_CHECKING:
    from .client import AsyncClient, AsyncSession, Client
    from .config import Config, DaemonConfig, PromptConfig, load_config
    from .errors import (
        Aborted,
        ConfigError,
        DaemonTimeout,
        DaemonUnavailable,
        RemoteError,
        ScoutdError,
        UnknownStrategy,
    )
    from .inbox import (
        AbortNotWritten,
        inbox_dir,
        inbox_removed_dir,
        list_inbox,
        write_abort,
        write_notice,
    )
    from .message_rules import InvalidMessages
    from .prepare import (
        available_strategies,
        prepare,
        prepare_prompt,
        register_strategy,
        unregister_strategy,
    )
    from .protocol.report import Prepared, StrategyReport, ToolAction
    from .session import Session
    from .strategies.text import shorten_string, truncate_string


__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Facade(types.ModuleType):
    """This package's module type: ``scoutd.prepare`` stays the function.

    Importing a submodule binds it on its package, and ``scoutd/prepare.py``
    shares its name with the function it defines; eagerly imported, the
    function was bound after the module. Lazily, the import of the module may
    come later, so the binding is turned into the function's here.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "prepare" and isinstance(value, types.ModuleType):
            value = value.prepare
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade


__all__ = [
    # library entry points
    "prepare",
    "prepare_prompt",
    "Prepared",
    "StrategyReport",
    "ToolAction",
    "Session",
    # strategies
    "available_strategies",
    "register_strategy",
    "unregister_strategy",
    "inbox_dir",
    "inbox_removed_dir",
    # inbox files
    "AbortNotWritten",
    "list_inbox",
    "write_abort",
    "write_notice",
    "shorten_string",
    "truncate_string",
    # daemon client
    "AsyncClient",
    "AsyncSession",
    "Client",
    # configuration
    "Config",
    "DaemonConfig",
    "PromptConfig",
    "load_config",
    # errors
    "Aborted",
    "ConfigError",
    "InvalidMessages",
    "DaemonTimeout",
    "DaemonUnavailable",
    "RemoteError",
    "ScoutdError",
    "UnknownStrategy",
    "__version__",
]
