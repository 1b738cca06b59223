"""What a name registered at run time may be (docs/STRATEGIES.md): never a built-in's,
never empty or a list, always a strategy; blanks around it are no part of it."""

from __future__ import annotations

from typing import Any

import pytest

import scoutd
from scoutd.engine.registry import Registry
from scoutd.strategies import BUILTINS

MESSAGES = [{"role": "user", "content": "hello"}]


def _mark(messages: list[Any]) -> list[Any]:
    return [*messages, {"role": "user", "content": "marked"}]


@pytest.mark.parametrize("name", ["", "   ", "a,b", 5, None])
def test_a_name_that_is_no_single_name_is_refused(name: Any) -> None:
    registry = Registry(BUILTINS)
    with pytest.raises(ValueError, match=r"^invalid strategy name .*: a non-empty name"):
        registry.register(name, _mark)
    assert registry.registered == {}


@pytest.mark.parametrize("name", ["none", " inbox ", "shorten_tools\t"])
def test_a_builtins_name_is_refused_with_or_without_blanks(name: str) -> None:
    registry = Registry(BUILTINS)
    said = rf"^'{name.strip()}' is a built-in strategy and cannot be replaced$"
    with pytest.raises(ValueError, match=said):
        registry.register(name, _mark)
    assert registry.registered == {}


def test_what_is_no_strategy_is_refused() -> None:
    registry = Registry(BUILTINS)
    with pytest.raises(TypeError, match=r"^strategy 'x' must be callable, got int$"):
        registry.register("x", 5)  # type: ignore[arg-type]


def test_a_name_with_blanks_is_registered_and_forgotten_as_the_name_itself() -> None:
    scoutd.register_strategy(" marks ", _mark)
    try:
        assert "marks" in scoutd.available_strategies()
        assert scoutd.prepare_prompt(MESSAGES, strategies="marks")[-1]["content"] == "marked"
    finally:
        scoutd.unregister_strategy(" marks ")
    assert "marks" not in scoutd.available_strategies()
