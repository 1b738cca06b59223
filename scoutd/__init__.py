"""scoutd: context-window management for LLM agents.

Prompt strategies that keep a long agent conversation inside the model's
context window while keeping the prompt prefix stable for provider caches,
operator notices delivered through an inbox beside the chat, and a daemon
that serves all of it to local agents over a Unix socket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    "InvalidMessages": ".engine.message_rules",
    "available_strategies": ".engine.prepare",
    "prepare": ".engine.prepare",
    "prepare_prompt": ".engine.prepare",
    "register_strategy": ".engine.prepare",
    "unregister_strategy": ".engine.prepare",
    "Prepared": ".protocol.report",
    "Reason": ".protocol.report",
    "StrategyReport": ".protocol.report",
    "ToolAction": ".protocol.report",
    "Session": ".engine.session",
    "ConversationTexts": ".formats.texts",
    "recall_output": ".recall",
    "recall_tool": ".recall",
    "shorten_string": ".strategies.text",
    "truncate_string": ".strategies.text",
}

if TYPE_CHECKING:
    from .client import AsyncClient, AsyncSession, Client
    from .config import Config, DaemonConfig, PromptConfig, load_config
    from .engine.message_rules import InvalidMessages
    from .engine.prepare import (
        available_strategies,
        prepare,
        prepare_prompt,
        register_strategy,
        unregister_strategy,
    )
    from .engine.session import Session
    from .errors import (
        Aborted,
        ConfigError,
        DaemonTimeout,
        DaemonUnavailable,
        RemoteError,
        ScoutdError,
        UnknownStrategy,
    )
    from .formats.texts import ConversationTexts
    from .inbox import (
        AbortNotWritten,
        inbox_dir,
        inbox_removed_dir,
        list_inbox,
        write_abort,
        write_notice,
    )
    from .protocol.report import Prepared, Reason, StrategyReport, ToolAction
    from .recall import recall_output, recall_tool
    from .strategies.text import shorten_string, truncate_string


__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    # library entry points
    "prepare",
    "prepare_prompt",
    "Prepared",
    "Reason",
    "StrategyReport",
    "ToolAction",
    "Session",
    "ConversationTexts",
    # recall (docs/STRATEGIES.md, "Recall")
    "recall_output",
    "recall_tool",
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
