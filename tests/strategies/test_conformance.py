"""Byte-for-byte agreement with the golden vectors of the original implementation."""

from __future__ import annotations

from typing import Any

import pytest

from scoutd import prepare_prompt, shorten_string, truncate_string
from scoutd.config import resolve_config

from .vectors import vector_params


@pytest.mark.parametrize("case", vector_params("strategy"))
def test_strategy_vector(case: dict[str, Any]) -> None:
    config = resolve_config(environ=case["config"])
    result = prepare_prompt(case["input"], case["strategy"], config=config)
    assert len(result) == len(case["expected"])
    for got, expected in zip(result, case["expected"], strict=True):
        assert got == expected


@pytest.mark.parametrize("case", vector_params("helper"))
def test_helper_vector(case: dict[str, Any]) -> None:
    arguments = case["input"]
    if case["function"] == "Log.truncate_string":
        call = lambda: truncate_string(arguments["string"], arguments["max"])  # noqa: E731
    else:
        # without a size the vector checks shorten_string's own default
        sized = {"size": arguments["size"]} if "size" in arguments else {}
        call = lambda: shorten_string(arguments["string"], **sized)  # noqa: E731
    if case.get("expected_error"):
        with pytest.raises(ValueError):
            call()
    else:
        assert call() == case["expected"]
