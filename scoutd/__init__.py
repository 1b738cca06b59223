"""scoutd: context-window management for LLM agents.

Prompt strategies that keep a long agent conversation inside the model's
context window while keeping the prompt prefix stable for provider caches,
operator notices delivered through an inbox beside the chat, and a daemon
that serves all of it to local agents over a Unix socket.
"""

from __future__ import annotations

from ._version import __version__
from .client import AsyncClient, AsyncSession, Client
from .config import Config, DaemonConfig, PromptConfig, load_config
from .engine.message_rules import InvalidMessages
from .engine.prepare import (
    Prepared,
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
from .inbox import (
    AbortNotWritten,
    inbox_dir,
    inbox_removed_dir,
    list_inbox,
    write_abort,
    write_notice,
)
from .strategies.report import StrategyReport, ToolAction
from .strategies.text import shorten_string, truncate_string

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
