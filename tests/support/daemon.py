"""The daemon harness of the suite: :mod:`scoutd.testing`, shared with ``scripts/``."""

from __future__ import annotations

from scoutd.testing import Daemon, InProcessDaemon, LineClient, conversation, toml_text, wait_for

__all__ = ["Daemon", "InProcessDaemon", "LineClient", "conversation", "toml_text", "wait_for"]
