"""An operator's tokenizer is held to its contract (``str -> int``,
docs/ECONOMY.md) where it returns, and its mistake is named as its own."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scoutd import ConfigError, PromptConfig, prepare
from tests.formats import conversations

RETURNS: dict[str, Any] = {
    "nothing": None,
    "text": "5",
    "negative": -3,
    "nan": math.nan,
    "infinite": math.inf,
    "beyond_floats": 10**400,
    "beyond_writing": 10**5000,
    "boolean": True,
}


def _returning(value: Any) -> Any:
    return lambda text: value


for _name, _value in RETURNS.items():
    globals()[f"count_{_name}"] = _returning(_value)


def count_fraction(text: str) -> float:
    """Not an int, but a count all the same: still served."""
    return len(text) / 3.7


@pytest.mark.parametrize("name", sorted(RETURNS))
def test_a_tokenizer_returning_no_count_is_a_config_error_naming_it(name: str) -> None:
    config = PromptConfig(tokenizer=f"{__name__}:count_{name}", context_window=5000)
    with pytest.raises(ConfigError, match=f"count_{name}' returned .*expected a count"):
        prepare(conversations.chat(8), "shorten_tools_cost_aware", config=config)


def test_a_fractional_count_is_still_served() -> None:
    config = PromptConfig(tokenizer=f"{__name__}:count_fraction", context_window=5000)
    prepared = prepare(conversations.chat(30), "shorten_tools_cost_aware", config=config)
    assert prepared.report[-1].outputs_dropped > 0
