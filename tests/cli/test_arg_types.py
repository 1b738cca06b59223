"""The command line's option types (``scoutd/cli/arg_types.py``), in this process.

Each bound is tried at, just inside and just outside it, and through argparse:
a value out of bounds is one usage line and exit 2, naming the option.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

import pytest

from scoutd.cli.arg_types import integer, path, real


def refusal(parse: object, text: str) -> str:
    assert callable(parse)
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        parse(text)
    return str(caught.value)


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("2", 2), (" 7 ", 7), ("1_000", 1000)])
def test_an_integer_at_or_over_its_minimum_is_taken(text: str, value: int) -> None:
    parsed = integer(1)(text)
    assert parsed == value and type(parsed) is int


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "one", "", "9" * 5000])
def test_an_integer_under_its_minimum_or_no_integer_is_refused_naming_both(text: str) -> None:
    assert refusal(integer(1), text) == f"must be an integer >= 1, got {text!r}"


def test_an_integer_minimum_of_zero_takes_zero() -> None:
    assert integer(0)("0") == 0
    assert refusal(integer(0), "-1") == "must be an integer >= 0, got '-1'"


@pytest.mark.parametrize(
    ("bounds", "taken", "refused", "message"),
    [
        ({}, ["0", "0.5", "1e6"], ["-0.5", "nan", "inf", "x"], "a finite number >= 0"),
        ({"above": True}, ["1e-9", "3"], ["0", "-1"], "a finite number > 0"),
        ({"minimum": 0.5}, ["0.5", "2"], ["0.4999"], "a finite number >= 0.5"),
        (
            {"maximum": 1.0},
            ["0", "1"],
            ["1.0000001", "-0.1"],
            "a finite number >= 0 and <= 1",
        ),
        (
            {"minimum": 1.0, "above": True, "maximum": 2.5},
            ["1.5", "2.5"],
            ["1", "2.6"],
            "a finite number > 1 and <= 2.5",
        ),
        ({"infinite": True}, ["inf", "0"], ["-inf", "nan", "-1"], "a number >= 0"),
    ],
)
def test_a_number_is_held_to_each_bound_and_refused_naming_them(
    bounds: dict[str, object], taken: list[str], refused: list[str], message: str
) -> None:
    parse = real(**bounds)  # type: ignore[arg-type]
    for text in taken:
        assert parse(text) == float(text), text
    for text in refused:
        assert refusal(parse, text) == f"must be {message}, got {text}", text


def test_an_infinite_number_is_refused_unless_admitted() -> None:
    assert real(infinite=True)("inf") == math.inf
    assert refusal(real(), "inf") == "must be a finite number >= 0, got inf"
    assert refusal(real(maximum=5.0, infinite=True), "inf") == (
        "must be a number >= 0 and <= 5, got inf"
    )


def test_a_path_is_any_text_but_the_empty_one() -> None:
    assert path("a") == "a"
    assert path(" ") == " "
    assert refusal(path, "") == "must name a file, got an empty string"


@pytest.mark.parametrize(
    ("kind", "given", "line"),
    [
        (integer(1), "0", "argument --x: must be an integer >= 1, got '0'"),
        (real(above=True), "0", "argument --x: must be a finite number > 0, got 0"),
        (path, "", "argument --x: must name a file, got an empty string"),
    ],
)
def test_argparse_makes_a_refusal_one_usage_line_and_exit_2(
    kind: Callable[[str], Any], given: str, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="scoutd")
    parser.add_argument("--x", type=kind)
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["--x", given])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"scoutd: error: {line}"


def test_the_parsers_names_are_what_argparse_prints_for_them() -> None:
    assert integer(1).__name__ == "integer"
    assert real().__name__ == "number"
