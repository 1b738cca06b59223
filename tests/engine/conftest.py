"""Fixtures of the session engine's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.engine.incremental import SessionPrompt


@pytest.fixture
def resets(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many messages each whole re-index of a session's conversation took."""
    taken: list[int] = []
    real = SessionPrompt.reset

    def counted(self: SessionPrompt, messages: Any, size: int | None = None) -> None:
        taken.append(len(messages))
        real(self, messages, size)

    monkeypatch.setattr(SessionPrompt, "reset", counted)
    yield taken
