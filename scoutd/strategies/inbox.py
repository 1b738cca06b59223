"""Placeholder: being written."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import PromptConfig
from .report import StrategyReport, plain_report


def inbox(
    messages: Sequence[Any], config: PromptConfig, *, save_file: str | None = None
) -> tuple[list[Any], StrategyReport]:
    return list(messages), plain_report("inbox", messages, messages)


def inbox_dir(save_file: str) -> str:
    raise NotImplementedError


def inbox_removed_dir(save_file: str) -> str:
    raise NotImplementedError
